#include "kvq/server.h"

#include <pthread.h>
#include <signal.h>
#include <sys/resource.h>

#include <cstdio>
#include <cstdlib>
#include <thread>

#include "kvq/etcd_store.h"
#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "kvq/workers.h"
#include "server/api.h"
#include "server/http_server.h"
#include "server/serve_options.h"

namespace kvq::server {
namespace {

using namespace std::chrono_literals;
constexpr auto kStopGrace = 5s;

// Many idle long-polls need many descriptors: take all the system allows this process.
void raise_descriptor_limit() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
    limit.rlim_cur = limit.rlim_max;
    setrlimit(RLIMIT_NOFILE, &limit);
  }
}

int fail(const std::string& message) {
  std::fprintf(stderr, "kvq serve: %s\n", message.c_str());
  return 1;
}

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
  HttpOptions http;
  const auto colon = options.listen.rfind(':');
  http.host = options.listen.substr(0, colon);
  if (http.host.size() > 1 && http.host.front() == '[')
    http.host = http.host.substr(1, http.host.size() - 2);
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

  Result<std::shared_ptr<kv::Store>> store = InvalidArgument("no store");
  if (options.store.empty()) {
    store = open_lmdb_store({.path = options.data, .durability = options.durability});
    if (!store.ok()) return fail("cannot open the data directory: " + store.status().to_string());
  } else {
    auto etcd = parse_etcd_url(options.store);
    if (!etcd.ok()) return fail(etcd.status().to_string());
    etcd->ca_file = options.etcd_ca;
    etcd->cert_file = options.etcd_cert;
    etcd->key_file = options.etcd_key;
    etcd->username = options.etcd_user;
    etcd->password = options.etcd_password;
    store = open_etcd_store(*etcd);
    if (!store.ok()) return fail("cannot use etcd: " + store.status().to_string());
    // Refused credentials or certificates are a configuration error: say so now. An
    // unreachable cluster is not; the server starts and retries.
    auto probe = (*store)->begin();
    Status reached = probe.ok() ? (*probe)->read_version().status() : probe.status();
    if (!reached.ok() && !reached.retryable())
      return fail("cannot use etcd: " + reached.to_string());
    if (!reached.ok())
      std::fprintf(stderr, "kvq serve: etcd not reachable yet: %s\n", reached.to_string().c_str());
  }
  auto jobs = jobs::Jobs::open(*store);
  if (!jobs.ok()) return fail(jobs.status().to_string());
  jobs::Jobs& jobs_ref = **jobs;
  auto workers = workers::Workers::open(
      *store, {.on_departure = [&jobs_ref](kv::Transaction& txn, const std::string& type,
                                           const std::string& id) {
        return jobs_ref.release_worker(txn, type, id).status();
      }});
  if (!workers.ok()) return fail(workers.status().to_string());

  Metrics metrics;
  // Destroyed before the server (below), so that exchanges it still holds (a subscription being
  // dropped on its timer thread) end their sessions while the server's io_context exists.
  std::unique_ptr<Api> api(
      new Api{jobs_ref, **workers, **store, metrics});  // an aggregate: no make_unique
  Router router;
  add_api_routes(router, *api);
  // The hot routes (add, accept, finish) then run where their request was read, and a commit
  // that waits for an fsync holds up no thread: the reply goes out once it is on disk.
  http.nonblocking_store = (*store)->nonblocking();
  const bool debug = options.log_level == "debug";
  http.on_accept_error = [&metrics](std::string_view reason) { metrics.accept_error(reason); };
  http.log = [](const std::string& line) { std::fprintf(stderr, "kvq serve: %s\n", line.c_str()); };
  HttpServer server(
      http, std::move(router), [&metrics, debug](const std::string& route, unsigned status) {
        metrics.request(route, status);
        if (debug)
          std::fprintf(stderr, "kvq serve: %u %s\n", status, route.empty() ? "-" : route.c_str());
      });
  auto bound = server.listen();
  if (auto* error = std::get_if<std::string>(&bound)) return fail(*error);
  const bool ipv6 = http.host.find(':') != std::string::npos;
  std::printf("kvq serve: listening on %s://%s%s%s:%u store %s\n",
              http.tls_cert.empty() ? "http" : "https", ipv6 ? "[" : "", http.host.c_str(),
              ipv6 ? "]" : "", std::get<unsigned short>(bound), (*store)->describe().c_str());
  std::fflush(stdout);

  std::thread stopper([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    if (options.log_level != "error")
      std::fprintf(stderr, "kvq serve: stopping (signal %d)\n", signal_number);
    api->end_all_waiting();
    server.stop(kStopGrace);
  });
  server.run();
  stopper.join();
  api.reset();
  if (options.log_level != "error") std::fprintf(stderr, "kvq serve: stopped\n");
  return 0;
}

}  // namespace kvq::server
