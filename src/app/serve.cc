#include "kvq/serve.h"

#include <netdb.h>
#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <variant>

#include "app/log.h"
#include "app/serve_options.h"
#include "beanstalk/listener.h"
#include "kvq/etcd_store.h"
#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "kvq/workers.h"
#include "server/api.h"
#include "server/http_server.h"

namespace kvq::app {
namespace {

using namespace std::chrono_literals;
using server::Api;
using server::HttpOptions;
using server::HttpServer;
using server::Metrics;
using server::Router;
constexpr auto kStopGrace = 5s;

// --ephemeral's data directory: made new under $TMPDIR (else /tmp), removed with all it holds
// when this object goes, which run_serve arranges to be after the store using it has closed.
class EphemeralDirectory {
 public:
  static std::variant<std::unique_ptr<EphemeralDirectory>, std::string> make() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp && *tmp ? tmp : "/tmp") + "/kvq-ephemeral-XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr)
      return "--ephemeral cannot make a directory like " + pattern + ": " + std::strerror(errno);
    return std::unique_ptr<EphemeralDirectory>(new EphemeralDirectory(std::move(pattern)));
  }
  ~EphemeralDirectory() {
    std::error_code ignored;  // nothing more to do about a directory that will not go
    std::filesystem::remove_all(path_, ignored);
  }
  const std::string& path() const { return path_; }

 private:
  explicit EphemeralDirectory(std::string path) : path_(std::move(path)) {}
  std::string path_;
};

// Many idle long-polls need many descriptors: take all the system allows this process.
void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

// A numeric address as given, else the host name's first IPv4 address (else its first IPv6
// one): "localhost" listens on 127.0.0.1.
std::variant<std::string, std::string> resolve_host(const std::string& host,
                                                    const char* flag = "--listen") {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int e = getaddrinfo(host.c_str(), nullptr, &hints, &found); e != 0) {
    return std::variant<std::string, std::string>(
        std::in_place_index<1>,
        std::string("cannot resolve the ") + flag + " host '" + host + "': " + gai_strerror(e));
  }
  const addrinfo* pick = found;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    if (a->ai_family == AF_INET) {
      pick = a;
      break;
    }
  }
  char text[NI_MAXHOST] = {};
  const int e =
      getnameinfo(pick->ai_addr, pick->ai_addrlen, text, sizeof text, nullptr, 0, NI_NUMERICHOST);
  freeaddrinfo(found);
  if (e != 0) {
    return std::variant<std::string, std::string>(
        std::in_place_index<1>,
        std::string("cannot resolve the ") + flag + " host '" + host + "': " + gai_strerror(e));
  }
  return std::variant<std::string, std::string>(std::in_place_index<0>, text);
}

// Starts the beanstalkd protocol's listener (--beanstalk-listen) and prints its address, or
// says why it cannot.
std::variant<std::unique_ptr<beanstalk::Listener>, std::string> start_beanstalk(
    const ServeOptions& options, unsigned worker_threads, jobs::Jobs& jobs, log::Logger& logger) {
  beanstalk::ListenerOptions b;
  const auto colon = options.beanstalk_listen.rfind(':');
  b.host = options.beanstalk_listen.substr(0, colon);
  if (b.host.size() > 1 && b.host.front() == '[') b.host = b.host.substr(1, b.host.size() - 2);
  auto resolved = resolve_host(b.host, "--beanstalk-listen");
  if (resolved.index() == 1) return std::get<1>(resolved);
  b.host = std::get<0>(resolved);
  // parse_serve_options has checked the name; this checks what it resolved to.
  if (!options.beanstalk_allow_remote && !is_loopback_host(b.host))
    return "--beanstalk-listen resolved to " + b.host +
           ", not a loopback address; add --beanstalk-allow-remote to listen there";
  // parse_serve_options has checked the port: digits, at most 65535.
  b.port = static_cast<unsigned short>(
      std::strtoul(options.beanstalk_listen.c_str() + colon + 1, nullptr, 10));
  b.max_job_size = options.beanstalk_max_job_size;
  b.io_threads = options.io_threads;
  // Its commands make blocking store calls: a pool as HTTP's, or none where HTTP runs its
  // calls on the I/O threads (a store whose commits never wait on a disk or a network).
  b.worker_threads = worker_threads;
  b.log = [&logger](const std::string& line) { logger.warn(line); };
  auto listener = std::make_unique<beanstalk::Listener>(jobs, b);
  auto bound = listener->listen();
  if (auto* error = std::get_if<std::string>(&bound)) return *error;
  const bool ipv6 = b.host.find(':') != std::string::npos;
  const std::string address = (ipv6 ? "[" : "") + b.host + (ipv6 ? "]" : "") + ":" +
                              std::to_string(std::get<unsigned short>(bound));
  listener->start();
  std::printf("kvq serve: beanstalkd protocol on %s\n", address.c_str());
  std::fflush(stdout);
  logger.info("serving the beanstalkd protocol",
              {{"address", address}, {"max_job_size", b.max_job_size}});
  return listener;
}

// What the library's background work did, from its counters, logged once a second when it
// did something: monitor re-enqueues and give-ups of lost runs, retention removals, workers
// declared dead.
class BackgroundLog {
 public:
  BackgroundLog(log::Logger& logger, jobs::Jobs& jobs, workers::Workers& workers)
      : logger_(logger), jobs_(jobs), workers_(workers) {
    last_ = jobs_.stats();
    last_workers_ = workers_.stats();
    last_types_ = jobs_.type_stats();
    thread_ = std::thread([this] { run(); });
  }
  ~BackgroundLog() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

 private:
  void run() {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::seconds(1), [this] { return stop_; })) check();
    check();
  }
  void check() {
    const auto now = jobs_.stats();
    const auto now_workers = workers_.stats();
    if (now.reenqueued_by_monitor > last_.reenqueued_by_monitor) {
      logger_.info("monitor re-enqueued lost runs",
                   {{"count", now.reenqueued_by_monitor - last_.reenqueued_by_monitor},
                    {"total", now.reenqueued_by_monitor}});
    }
    if (now.gave_up_by_monitor > last_.gave_up_by_monitor) {
      logger_.warn("monitor gave up lost runs (max_lost_runs)",
                   {{"count", now.gave_up_by_monitor - last_.gave_up_by_monitor},
                    {"total", now.gave_up_by_monitor}});
    }
    if (now.removed_by_retention > last_.removed_by_retention) {
      logger_.info("retention removed finished jobs",
                   {{"count", now.removed_by_retention - last_.removed_by_retention},
                    {"total", now.removed_by_retention}});
    }
    if (now_workers.declared_dead > last_workers_.declared_dead) {
      logger_.info("workers declared dead (no heartbeat within their health timeout)",
                   {{"count", now_workers.declared_dead - last_workers_.declared_dead},
                    {"total", now_workers.declared_dead}});
    }
    if (logger_.enabled(log::Level::kDebug)) {
      // Which types lost runs (the monitor's, and departed workers' jobs).
      auto types = jobs_.type_stats();
      for (const auto& [type, stats] : types) {
        auto before = last_types_.find(type);
        const uint64_t lost_before = before == last_types_.end() ? 0 : before->second.lost;
        if (stats.lost > lost_before) {
          logger_.debug("lost runs ended", {{"type", type}, {"count", stats.lost - lost_before}});
        }
      }
      last_types_ = std::move(types);
    }
    last_ = now;
    last_workers_ = now_workers;
  }

  log::Logger& logger_;
  jobs::Jobs& jobs_;
  workers::Workers& workers_;
  jobs::Jobs::Stats last_;
  workers::Workers::Stats last_workers_;
  std::map<std::string, jobs::Jobs::TypeStats> last_types_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace

int run_serve(int argc, char** argv) {
  auto parsed = parse_serve_options(argc, argv);
  if (auto* error = std::get_if<std::string>(&parsed)) {
    std::fprintf(stderr, "kvq serve: %s\n\n%s", error->c_str(), kServeUsage);
    return 2;
  }
  const ServeOptions& options = std::get<ServeOptions>(parsed);
  if (options.help) {
    std::fputs(kServeUsage, stdout);
    return 0;
  }
  // parse_serve_options has checked both names.
  log::Logger logger(*log::parse_format(options.log_format), *log::parse_level(options.log_level));
  // From here on a reason to stop is logged (in the chosen format) as an error.
  auto fatal = [&logger](const std::string& message) {
    logger.error(message);
    return 1;
  };
  HttpOptions http;
  const auto colon = options.listen.rfind(':');
  http.host = options.listen.substr(0, colon);
  if (http.host.size() > 1 && http.host.front() == '[')
    http.host = http.host.substr(1, http.host.size() - 2);
  auto resolved = resolve_host(http.host);
  if (resolved.index() == 1) return fatal(std::get<1>(resolved));
  http.host = std::get<0>(resolved);
  // parse_serve_options has checked the port: digits, at most 65535.
  http.port =
      static_cast<unsigned short>(std::strtoul(options.listen.c_str() + colon + 1, nullptr, 10));
  http.token = options.token;
  http.max_body = options.max_body;
  http.max_body_memory = options.max_body_memory;
  http.tls_cert = options.tls_cert;
  http.tls_key = options.tls_key;
  http.tls_client_ca = options.tls_client_ca;
  http.io_threads = options.io_threads;
  // An LMDB commit without fsync takes microseconds: handing it to another thread and back
  // costs more than it does, so it runs where the request was read. A call that can wait on a
  // disk or a network keeps the I/O threads free, and enough pool threads that many commits
  // wait together and share an fsync (group commit): 32 ran 1.4x the jobs/s of 8 with sync,
  // before the hot routes stopped using the pool (nonblocking_store below).
  const bool fast_store = options.store.empty() && options.durability == Durability::kNoSync;
  http.worker_threads = options.worker_threads.value_or(fast_store ? 0 : 32);

  raise_descriptor_limit();
  // Signals are taken by one thread with sigwait; every thread started from here blocks them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGINT);
  sigaddset(&stop_signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // Declared before the store, so that the directory goes after everything that uses it.
  std::unique_ptr<EphemeralDirectory> ephemeral;
  if (options.ephemeral) {
    auto made = EphemeralDirectory::make();
    if (auto* error = std::get_if<std::string>(&made)) return fatal(*error);
    ephemeral = std::move(std::get<0>(made));
  }
  Result<std::shared_ptr<kv::Store>> store = InvalidArgument("no store");
  if (options.store.empty()) {
    store = open_lmdb_store(
        {.path = ephemeral ? ephemeral->path() : options.data, .durability = options.durability});
    if (!store.ok()) return fatal("cannot open the data directory: " + store.status().to_string());
  } else {
    auto etcd = parse_etcd_url(options.store);
    if (!etcd.ok()) return fatal(etcd.status().to_string());
    etcd->ca_file = options.etcd_ca;
    etcd->cert_file = options.etcd_cert;
    etcd->key_file = options.etcd_key;
    etcd->group_commit = options.etcd_group_commit;
    etcd->serializable_first_reads = options.etcd_serializable_first_reads;
    etcd->async_transactions = options.etcd_async_transactions;
    etcd->username = options.etcd_user;
    etcd->password = options.etcd_password;
    store = open_etcd_store(*etcd);
    if (!store.ok()) return fatal("cannot use etcd: " + store.status().to_string());
    // Refused credentials or certificates are a configuration error: say so now. An
    // unreachable cluster is not; the server starts and retries.
    auto probe = (*store)->begin();
    Status reached = probe.ok() ? (*probe)->read_version().status() : probe.status();
    if (!reached.ok() && !reached.retryable())
      return fatal("cannot use etcd: " + reached.to_string());
    if (!reached.ok()) logger.warn("etcd not reachable yet", {{"error", reached.to_string()}});
  }
  auto jobs = jobs::Jobs::open(*store);
  if (!jobs.ok()) return fatal(jobs.status().to_string());
  jobs::Jobs& jobs_ref = **jobs;
  // The departure rule, wired here and decided in the jobs layer: a worker that unregisters or
  // is declared dead hands back the jobs it holds (Jobs::release_worker).
  auto workers = workers::Workers::open(
      *store, {.on_departure = [&jobs_ref](kv::Transaction& txn, const std::string& type,
                                           const std::string& id) {
        return jobs_ref.release_worker(txn, type, id).status();
      }});
  if (!workers.ok()) return fatal(workers.status().to_string());

  Metrics metrics;
  // Destroyed before the server (below), so that exchanges it still holds (a subscription being
  // dropped on its timer thread) end their sessions while the server's io_context exists.
  std::unique_ptr<Api> api(
      new Api{jobs_ref, **workers, **store, metrics});  // an aggregate: no make_unique
  Router router;
  server::add_api_routes(router, *api);
  // The hot routes (add, accept, finish) then run where their request was read, and a commit
  // that waits for an fsync holds up no thread: the reply goes out once it is on disk.
  http.nonblocking_store = (*store)->nonblocking();
  http.on_accept_error = [&metrics](std::string_view reason) { metrics.accept_error(reason); };
  http.log = [&logger](const std::string& line) { logger.warn(line); };
  // At warn only 5xx answers are logged (Logger::request formats nothing for the others); at
  // error none is, and the server measures and copies nothing for the log.
  if (logger.enabled(log::Level::kWarn)) {
    http.request_log = [&logger](const HttpOptions::RequestRecord& r) {
      logger.request({.method = r.method,
                      .path = r.path,
                      .route = r.route,
                      .client = r.client,
                      .trace_id = r.trace_id,
                      .status = r.status,
                      .latency = r.latency});
    };
  }
  HttpServer server(http, std::move(router),
                    [&metrics](const std::string& method, const std::string& route, unsigned status,
                               std::chrono::nanoseconds latency) {
                      metrics.request(method, route, status,
                                      std::chrono::duration<double>(latency).count());
                    });
  auto bound = server.listen();
  if (auto* error = std::get_if<std::string>(&bound)) return fatal(*error);
  const bool ipv6 = http.host.find(':') != std::string::npos;
  const std::string url = std::string(http.tls_cert.empty() ? "http" : "https") + "://" +
                          (ipv6 ? "[" : "") + http.host + (ipv6 ? "]" : "") + ":" +
                          std::to_string(std::get<unsigned short>(bound));
  auto announce = [&] {
    // On stdout, as it always was: scripts and tests read the URL from this line.
    std::printf("kvq serve: listening on %s store %s\n", url.c_str(), (*store)->describe().c_str());
    std::fflush(stdout);
    logger.info("listening", {{"url", url},
                              {"store", (*store)->describe()},
                              {"io_threads", http.io_threads},
                              {"worker_threads", http.worker_threads}});
  };
  // --ephemeral promises the URL on the first line; otherwise the beanstalkd protocol's line
  // (docs/beanstalk.md) comes first, so that whoever reads the URL line has seen it too.
  if (options.ephemeral) announce();
  std::unique_ptr<beanstalk::Listener> beanstalkd;
  if (!options.beanstalk_listen.empty()) {
    auto started = start_beanstalk(options, http.worker_threads, jobs_ref, logger);
    if (auto* error = std::get_if<std::string>(&started)) return fatal(*error);
    beanstalkd = std::move(std::get<0>(started));
  }
  if (!options.ephemeral) announce();
  std::optional<BackgroundLog> background;
  background.emplace(logger, jobs_ref, **workers);

  std::thread stopper([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    logger.info("stopping", {{"signal", signal_number}});
    api->end_all_waiting();
    server.stop(kStopGrace);
  });
  server.run();
  stopper.join();
  // A route's asynchronous store call may still be under way (on etcd, up to its request
  // timeout): its callback uses what goes below.
  if (!(*store)->wait_for_callbacks(kv::Clock::now() + kStopGrace))
    logger.warn("stopping with store calls still under way");
  // Its connections hand their reserved jobs back, through Jobs: before Jobs goes.
  beanstalkd.reset();
  background.reset();
  api.reset();
  logger.info("stopped");
  return 0;
}

}  // namespace kvq::app
