// queue_bench — one benchmark workload, run unchanged against kvq (over HTTP and in-process) and
// against the job queues users would pick instead: beanstalkd, a PostgreSQL SKIP LOCKED table and
// a Redis reliable queue (bench/peers/queue.h). scripts/bench-peers.sh (`make bench`) starts
// every server, runs this program against each and writes docs/benchmarks.md from its output.
//
//   queue_bench lifecycle --system S --address A [--workers N] [--producers P] [--seconds S]
//                         [--warmup S] [--window K] [--payload BYTES] [--data-dir DIR]
//                         [--server-pid PID] [--batch N [--take M]] [--tag k=v ...]
//     Producers add jobs carrying a BYTES-long JSON payload while workers reserve and finish
//     them, each on its own connection. A job counts once its finish was acknowledged. At most K
//     jobs (default 2 x workers) are added but not yet finished, so add->accept latency measures
//     the system's hand-off, not a backlog that producers outran. Jobs finished during the
//     warm-up are not counted; after the measured seconds the producers stop and the workers
//     drain every acknowledged add (a lost job fails the run). The run's cost per job: the round
//     trips its clients made and the store commits the system counted (kvq over HTTP or the
//     beanstalkd protocol: in its data directory DIR), over the whole run, per finished job;
//     and over the measured seconds, per job measured, the CPU time and context switches of
//     the server PID (when given) and of this process (the clients; in-process, the system too).
//     With --batch N, the batched path: producers add N jobs a call and workers take up to M
//     (default 16) a call and finish them together, through each system's own calls for many
//     (QueueClient::add_batch, reserve_batch, finish_batch); the window defaults to
//     2 x workers x M + producers x N.
//   queue_bench scale --system S --address A [--jobs N] [--workers N] [--producers P]
//                     [--server-pid PID] [--data-dir DIR]
//     Adds N jobs with no worker running (add rate), measures the memory (PSS of PID and its
//     children, else of this process) and disk use with N jobs pending, then drains them with
//     the workers (accept rate: reserve + finish).
//   queue_bench fsync-probe --data-dir DIR [--seconds S]
//     4 KiB write + fdatasync in a loop: the disk's synchronous write rate.
//
// Prints one JSON object on stdout; --tag k=v pairs are copied into it. A failed run prints
// {"error": ...} and exits 1.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "queue.h"

namespace kvq::peers {
namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// ---- command line
// --------------------------------------------------------------------------------

struct Args {
  std::string mode;
  std::map<std::string, std::string> values;
  json tags = json::object();

  std::string get(const std::string& name, const std::string& fallback = "") const {
    auto it = values.find(name);
    return it == values.end() ? fallback : it->second;
  }
  int64_t number(const std::string& name, int64_t fallback, int64_t lo, int64_t hi) const {
    auto it = values.find(name);
    if (it == values.end()) return fallback;
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(it->second, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (used != it->second.size() || v < lo || v > hi)
      throw std::invalid_argument("--" + name + " wants a number in " + std::to_string(lo) + ".." +
                                  std::to_string(hi));
    return v;
  }
};

Args parse_args(int argc, char** argv) {
  if (argc < 2)
    throw std::invalid_argument(
        "usage: queue_bench lifecycle|scale|fsync-probe --option value ...");
  Args args;
  args.mode = argv[1];
  for (int i = 2; i < argc; i += 2) {
    std::string name = argv[i];
    if (name.rfind("--", 0) != 0 || i + 1 >= argc)
      throw std::invalid_argument("expected --option value, got " + name);
    name = name.substr(2);
    std::string value = argv[i + 1];
    if (name == "tag") {
      auto eq = value.find('=');
      if (eq == std::string::npos) throw std::invalid_argument("--tag wants key=value");
      args.tags[value.substr(0, eq)] = value.substr(eq + 1);
    } else {
      args.values[name] = value;
    }
  }
  return args;
}

// ---- payload
// ---------------------------------------------------------------------------------------

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch())
      .count();
}

// {"i":SEQ,"t":ADDED_NS,"pad":"xx..."} of exactly `size` bytes (when size allows).
std::string make_payload(int64_t seq, int64_t added_ns, size_t size) {
  std::string head =
      "{\"i\":" + std::to_string(seq) + ",\"t\":" + std::to_string(added_ns) + ",\"pad\":\"";
  const size_t tail = 2;  // "}
  head.append(size > head.size() + tail ? size - head.size() - tail : 0, 'x');
  head += "\"}";
  return head;
}

// The "t" field, wherever a system's JSON round trip put it; -1 if absent.
int64_t added_ns_of(const std::string& payload) {
  auto at = payload.find("\"t\":");
  if (at == std::string::npos) return -1;
  return std::strtoll(payload.c_str() + at + 4, nullptr, 10);
}

// ---- statistics
// ------------------------------------------------------------------------------------

double percentile(std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  const size_t rank = static_cast<size_t>(p / 100.0 * static_cast<double>(sorted.size() - 1) + 0.5);
  return sorted[std::min(rank, sorted.size() - 1)];
}

// ---- shared run state
// --------------------------------------------------------------------------------

enum Phase : int { kWarmup, kMeasure, kDrain };

struct Run {
  size_t payload = 200;
  // The batched path (--batch N --take M): producers add N jobs a call, workers take up to M a
  // call and finish them together (QueueClient::add_batch, reserve_batch, finish_batch). 0: one
  // job a call.
  int64_t batch = 0;
  int64_t take = 0;
  int64_t window = 0;      // 0: unlimited
  int64_t add_limit = -1;  // -1: until the phase is kDrain
  std::atomic<int> phase{kWarmup};
  std::atomic<int64_t> next_seq{0};
  std::atomic<int64_t> adds_started{0};
  std::atomic<int64_t> added{0};  // acknowledged
  std::atomic<int64_t> finished{0};
  std::atomic<int64_t> measured{0};
  std::atomic<int> producers_left{0};
  std::atomic<bool> failed{false};
  std::mutex mu;
  std::string error;
  std::vector<double> latencies_ms;

  void fail(const std::string& message) {
    std::lock_guard lock(mu);
    if (error.empty()) error = message;
    failed = true;
    finished.notify_all();
  }
  bool producers_done() const { return producers_left.load() == 0; }
};

void producer(Run& run, std::unique_ptr<QueueClient> client) {
  try {
    while (!run.failed && run.phase.load() != kDrain) {
      if (run.window > 0) {
        for (;;) {
          const int64_t done = run.finished.load();
          if (run.adds_started.load() - done < run.window || run.failed ||
              run.phase.load() == kDrain)
            break;
          run.finished.wait(done);
        }
        if (run.failed || run.phase.load() == kDrain) break;
      }
      if (run.batch > 0) {
        const int64_t first = run.next_seq.fetch_add(run.batch);
        std::vector<std::string> payloads;
        const int64_t added_at = now_ns();
        for (int64_t i = 0; i < run.batch; ++i)
          payloads.push_back(make_payload(first + i, added_at, run.payload));
        run.adds_started += run.batch;
        client->add_batch(first, payloads);
        run.added += run.batch;
        continue;
      }
      const int64_t seq = run.next_seq.fetch_add(1);
      if (run.add_limit >= 0 && seq >= run.add_limit) break;
      ++run.adds_started;
      client->add(seq, make_payload(seq, now_ns(), run.payload));
      ++run.added;
    }
  } catch (const std::exception& e) {
    run.fail(std::string("add: ") + e.what());
  }
  --run.producers_left;
}

// Checks that `job` came back with its payload and, in the measured seconds, records its
// add->accept latency (accepted at `accepted_ns`).
void measure(Run& run, const Reserved& job, int64_t accepted_ns, std::vector<double>& latencies) {
  const int64_t added = added_ns_of(job.payload);
  if (added < 0)
    throw std::runtime_error("a job came back without its payload: " + job.payload.substr(0, 80));
  if (run.phase.load() == kMeasure) {
    latencies.push_back(static_cast<double>(accepted_ns - added) / 1e6);
    ++run.measured;
  }
}

// The batched worker: takes up to run.take jobs a call and finishes them together.
void batch_worker(Run& run, QueueClient& client, std::vector<double>& latencies) {
  std::vector<Reserved> jobs;
  while (!run.failed) {
    if (run.phase.load() == kDrain && run.producers_done() &&
        run.finished.load() >= run.added.load())
      break;
    client.reserve_batch(jobs, static_cast<size_t>(run.take), milliseconds(200));
    if (jobs.empty()) continue;
    const int64_t accepted = now_ns();
    client.finish_batch(jobs);
    for (const auto& job : jobs) measure(run, job, accepted, latencies);
    run.finished += static_cast<int64_t>(jobs.size());
    run.finished.notify_all();
  }
}

void worker(Run& run, std::unique_ptr<QueueClient> client) {
  std::vector<double> latencies;
  try {
    if (run.take > 0) batch_worker(run, *client, latencies);
    Reserved job, next;
    bool held = false;  // `job` came with the last finish
    int64_t accepted = 0;
    while (run.take == 0 && !run.failed) {  // the one-job worker
      if (!held) {
        if (run.phase.load() == kDrain && run.producers_done() &&
            run.finished.load() >= run.added.load())
          break;
        if (!client->reserve(job, milliseconds(200))) continue;
        accepted = now_ns();
      }
      held = client->finish_and_reserve(job, next);
      const int64_t next_accepted = now_ns();
      measure(run, job, accepted, latencies);
      ++run.finished;
      run.finished.notify_all();
      if (held) {
        std::swap(job, next);
        accepted = next_accepted;
      }
    }
  } catch (const std::exception& e) {
    run.fail(std::string("worker: ") + e.what());
  }
  std::lock_guard lock(run.mu);
  run.latencies_ms.insert(run.latencies_ms.end(), latencies.begin(), latencies.end());
}

// Takes every job a previous run left behind, so a run starts from an empty queue.
int64_t empty_queue(QueueSystem& system) {
  auto client = system.connect();
  Reserved job;
  int64_t n = 0;
  while (client->reserve(job, milliseconds(0))) {
    client->finish(job);
    ++n;
  }
  return n;
}

std::unique_ptr<QueueSystem> open_from(const Args& args) {
  SystemOptions options;
  options.system = args.get("system");
  options.address = args.get("address");
  options.durable = args.get("durability", "durable") == "durable";
  options.data_dir = args.get("data-dir");
  if (options.address.empty()) throw std::invalid_argument("--address is required");
  return open_system(options);
}

// Waits for the drain: every acknowledged add finished. Fails the run after `limit`.
void wait_for_drain(Run& run, std::chrono::seconds limit) {
  const auto give_up = Clock::now() + limit;
  while (!run.failed && !(run.producers_done() && run.finished.load() >= run.added.load())) {
    if (Clock::now() > give_up) {
      run.fail("drain: " + std::to_string(run.added.load() - run.finished.load()) +
               " acknowledged adds never came back");
      break;
    }
    std::this_thread::sleep_for(milliseconds(20));
  }
}

// The system's commit count, or -1 (not counted, or unreadable: `error` says why).
int64_t read_commits(QueueSystem& system, std::string& error) {
  try {
    return system.commits();
  } catch (const std::exception& e) {
    error = e.what();
    return -1;
  }
}

// What the run spent per finished job: round trips and store commits, from readings taken
// before the first client connected and after the last one closed.
json cost_per_job(int64_t jobs, int64_t requests, int64_t commits_before, int64_t commits_after,
                  const std::string& commits_error) {
  json cost = {{"jobs", jobs}, {"requests", requests}};
  cost["requests_per_job"] = jobs > 0 ? static_cast<double>(requests) / jobs : 0.0;
  if (commits_before >= 0 && commits_after >= 0) {
    cost["commits"] = commits_after - commits_before;
    cost["commits_per_job"] =
        jobs > 0 ? static_cast<double>(commits_after - commits_before) / jobs : 0.0;
  } else {
    cost["commits"] = nullptr;
    cost["commits_per_job"] = nullptr;
  }
  if (!commits_error.empty()) cost["commits_error"] = commits_error;
  return cost;
}

// CPU time and context switches a process used so far (every thread's, those that ended
// included: /proc/PID/stat's utime and stime count them; the switches are summed over the
// threads alive now, so a thread that ended before the reading drops out of both readings
// only if it ended before the first).
struct ProcessUse {
  double cpu_seconds = 0;
  int64_t context_switches = 0;
};
ProcessUse process_use(pid_t pid) {
  ProcessUse use;
  const std::string dir = "/proc/" + std::to_string(pid);
  std::ifstream stat(dir + "/stat");
  std::string line;
  if (std::getline(stat, line)) {
    const auto close = line.rfind(')');
    if (close != std::string::npos) {
      std::vector<std::string> fields;
      std::string field;
      for (char c : line.substr(close + 2)) {
        if (c == ' ') {
          fields.push_back(field);
          field.clear();
        } else {
          field += c;
        }
      }
      // Fields 14 and 15 (utime, stime) are the 12th and 13th after the command's ')'.
      if (fields.size() > 12)
        use.cpu_seconds = static_cast<double>(std::stoll(fields[11]) + std::stoll(fields[12])) /
                          static_cast<double>(sysconf(_SC_CLK_TCK));
    }
  }
  std::error_code ec;
  for (const auto& task : std::filesystem::directory_iterator(dir + "/task", ec)) {
    std::ifstream status(task.path() / "status");
    std::string key;
    int64_t count = 0;
    while (status >> key) {
      if ((key == "voluntary_ctxt_switches:" || key == "nonvoluntary_ctxt_switches:") &&
          status >> count)
        use.context_switches += count;
      status.ignore(1 << 20, '\n');
    }
  }
  return use;
}

// Per measured job, what `before` to `after` used: {"cpu_us": ..., "context_switches": ...}.
json use_per_job(const ProcessUse& before, const ProcessUse& after, int64_t jobs) {
  const double n = jobs > 0 ? static_cast<double>(jobs) : 1.0;
  return {{"cpu_us", (after.cpu_seconds - before.cpu_seconds) * 1e6 / n},
          {"context_switches",
           static_cast<double>(after.context_switches - before.context_switches) / n}};
}

json lifecycle(const Args& args) {
  const int64_t workers = args.number("workers", 4, 1, 1024);
  const int64_t producers = args.number("producers", 4, 1, 1024);
  const int64_t seconds = args.number("seconds", 5, 1, 3600);
  const int64_t warmup = args.number("warmup", 1, 0, 3600);
  const pid_t server = static_cast<pid_t>(args.number("server-pid", 0, 0, 1 << 30));
  auto system = open_from(args);
  system->prepare();
  const int64_t leftovers = empty_queue(*system);

  Run run;
  run.payload = static_cast<size_t>(args.number("payload", 200, 40, 1 << 20));
  run.batch = args.number("batch", 0, 0, 1000);
  run.take = run.batch > 0 ? args.number("take", 16, 1, 100) : 0;
  // Batched, room for every worker's take twice and a batch of each producer's.
  run.window = args.number(
      "window", run.batch > 0 ? 2 * workers * run.take + producers * run.batch : 2 * workers, 0,
      1 << 30);
  run.producers_left = static_cast<int>(producers);
  std::string commits_error;
  const int64_t commits_before = read_commits(*system, commits_error);
  const int64_t requests_before = requests_sent();

  // Connect everyone before the clock starts.
  std::vector<std::unique_ptr<QueueClient>> worker_clients, producer_clients;
  for (int64_t i = 0; i < workers; ++i) worker_clients.push_back(system->connect());
  for (int64_t i = 0; i < producers; ++i) producer_clients.push_back(system->connect());
  std::vector<std::thread> threads;
  for (auto& c : worker_clients) threads.emplace_back(worker, std::ref(run), std::move(c));
  for (auto& c : producer_clients) threads.emplace_back(producer, std::ref(run), std::move(c));

  std::this_thread::sleep_for(std::chrono::seconds(warmup));
  const ProcessUse self_before = process_use(getpid());
  const ProcessUse server_before = server > 0 ? process_use(server) : ProcessUse{};
  const int64_t finished_before = run.finished.load();
  run.phase = kMeasure;
  const auto measure_start = Clock::now();
  std::this_thread::sleep_for(std::chrono::seconds(seconds));
  run.phase = kDrain;
  const auto measure_end = Clock::now();
  const int64_t measured = run.measured.load();
  const int64_t finished_in_window = run.finished.load() - finished_before;
  const ProcessUse self_after = process_use(getpid());
  const ProcessUse server_after = server > 0 ? process_use(server) : ProcessUse{};
  run.finished.notify_all();  // wakes producers waiting for window room
  wait_for_drain(run, std::chrono::seconds(60));
  for (auto& t : threads) t.join();  // each thread closes its connection as it ends
  const int64_t requests = requests_sent() - requests_before;
  // PostgreSQL counts a backend's last commits when it exits, a moment after its client left.
  std::this_thread::sleep_for(milliseconds(300));
  const int64_t commits_after = commits_before < 0 ? -1 : read_commits(*system, commits_error);

  json out = args.tags;
  out["kind"] = "lifecycle";
  out["system"] = args.get("system");
  out["workers"] = workers;
  out["producers"] = producers;
  out["window"] = run.window;
  if (run.batch > 0) {
    out["batch"] = run.batch;
    out["take"] = run.take;
  }
  if (run.failed) {
    out["error"] = run.error;
    return out;
  }
  std::sort(run.latencies_ms.begin(), run.latencies_ms.end());
  const double elapsed = std::chrono::duration<double>(measure_end - measure_start).count();
  out["seconds"] = elapsed;
  out["jobs"] = measured;
  out["jobs_per_s"] = static_cast<double>(measured) / elapsed;
  out["latency_ms"] = {{"p50", percentile(run.latencies_ms, 50)},
                       {"p99", percentile(run.latencies_ms, 99)}};
  out["total_added"] = run.added.load();
  out["leftovers"] = leftovers;
  out["errors"] = 0;
  out["stats"] = system->stats();
  out["cost"] =
      cost_per_job(run.finished.load(), requests, commits_before, commits_after, commits_error);
  // Per job finished in the measured seconds (`measured` counts those whose accept fell in
  // them: nearly the same number).
  out["use"] = {{"client", use_per_job(self_before, self_after, finished_in_window)}};
  if (server > 0)
    out["use"]["server"] = use_per_job(server_before, server_after, finished_in_window);
  return out;
}

// ---- scale
// ----------------------------------------------------------------------------------------

// Proportional set size of `pid` and its descendants, in KiB (shared pages split fairly).
int64_t pss_kib(pid_t root) {
  std::map<pid_t, pid_t> parent;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string name = entry.path().filename();
    if (name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream stat(entry.path() / "stat");
    std::string line;
    if (!std::getline(stat, line)) continue;
    auto close = line.rfind(')');
    if (close == std::string::npos) continue;
    char state = 0;
    int ppid = 0;
    if (std::sscanf(line.c_str() + close + 1, " %c %d", &state, &ppid) == 2)
      parent[std::stoi(name)] = ppid;
  }
  int64_t total = 0;
  for (const auto& [pid, ppid] : parent) {
    bool in_tree = false;
    for (pid_t p = pid; p > 1 && !in_tree; p = parent.count(p) ? parent[p] : 0)
      in_tree = (p == root);
    if (!in_tree) continue;
    std::ifstream rollup("/proc/" + std::to_string(pid) + "/smaps_rollup");
    std::string key;
    int64_t kib = 0;
    while (rollup >> key) {
      if (key == "Pss:" && rollup >> kib) {
        total += kib;
        break;
      }
      rollup.ignore(1 << 20, '\n');
    }
  }
  return total;
}

// Bytes the directory's files occupy on disk (allocated blocks: LMDB's file is sparse).
int64_t disk_bytes(const std::string& dir) {
  int64_t total = 0;
  std::error_code ec;
  for (auto it = std::filesystem::recursive_directory_iterator(dir, ec);
       !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec)) {
    struct stat st {};
    if (::lstat(it->path().c_str(), &st) == 0 && S_ISREG(st.st_mode))
      total += static_cast<int64_t>(st.st_blocks) * 512;
  }
  return total;
}

json scale(const Args& args) {
  const int64_t jobs = args.number("jobs", 1'000'000, 1, 100'000'000);
  const int64_t workers = args.number("workers", 16, 1, 1024);
  const int64_t producers = args.number("producers", 16, 1, 1024);
  const pid_t server = static_cast<pid_t>(args.number("server-pid", getpid(), 1, 1 << 30));
  auto system = open_from(args);
  system->prepare();
  const int64_t leftovers = empty_queue(*system);

  Run run;
  run.payload = static_cast<size_t>(args.number("payload", 200, 40, 1 << 20));
  run.add_limit = jobs;
  run.phase = kMeasure;
  run.producers_left = static_cast<int>(producers);
  json out = args.tags;
  out["kind"] = "scale";
  out["system"] = args.get("system");
  out["jobs"] = jobs;
  out["workers"] = workers;
  out["producers"] = producers;

  std::vector<std::thread> threads;
  const auto add_start = Clock::now();
  for (int64_t i = 0; i < producers; ++i)
    threads.emplace_back(producer, std::ref(run), system->connect());
  for (auto& t : threads) t.join();
  const double add_seconds = std::chrono::duration<double>(Clock::now() - add_start).count();
  threads.clear();
  if (run.failed) {
    out["error"] = run.error;
    return out;
  }
  std::this_thread::sleep_for(std::chrono::seconds(2));  // let background flushes settle
  out["memory_mb"] = static_cast<double>(pss_kib(server)) / 1024.0;
  if (!args.get("data-dir").empty())
    out["disk_mb"] = static_cast<double>(disk_bytes(args.get("data-dir"))) / (1 << 20);

  run.phase = kDrain;
  const auto accept_start = Clock::now();
  for (int64_t i = 0; i < workers; ++i)
    threads.emplace_back(worker, std::ref(run), system->connect());
  wait_for_drain(run, std::chrono::seconds(3600));
  for (auto& t : threads) t.join();
  const double accept_seconds = std::chrono::duration<double>(Clock::now() - accept_start).count();
  if (run.failed) {
    out["error"] = run.error;
    return out;
  }
  out["add_per_s"] = static_cast<double>(jobs) / add_seconds;
  out["accept_per_s"] = static_cast<double>(run.finished.load()) / accept_seconds;
  out["leftovers"] = leftovers;
  return out;
}

// ---- fsync probe
// -------------------------------------------------------------------------------------

json fsync_probe(const Args& args) {
  const std::string dir = args.get("data-dir");
  if (dir.empty()) throw std::invalid_argument("--data-dir is required");
  const int64_t seconds = args.number("seconds", 2, 1, 60);
  const std::string file = dir + "/fsync-probe";
  int fd = ::open(file.c_str(), O_CREAT | O_WRONLY | O_TRUNC, 0644);
  if (fd < 0) throw std::runtime_error("open " + file + ": " + std::strerror(errno));
  char block[4096];
  std::memset(block, 'x', sizeof block);
  int64_t n = 0;
  const auto start = Clock::now(), end = start + std::chrono::seconds(seconds);
  while (Clock::now() < end) {
    if (::pwrite(fd, block, sizeof block, 0) != static_cast<ssize_t>(sizeof block) ||
        ::fdatasync(fd) != 0) {
      ::close(fd);
      throw std::runtime_error(std::string("write/fdatasync: ") + std::strerror(errno));
    }
    ++n;
  }
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  ::close(fd);
  ::unlink(file.c_str());
  json out = args.tags;
  out["kind"] = "fsync";
  out["fsync_per_s"] = static_cast<double>(n) / elapsed;
  return out;
}

}  // namespace
}  // namespace kvq::peers

int main(int argc, char** argv) {
  using namespace kvq::peers;
  try {
    Args args = parse_args(argc, argv);
    nlohmann::json out;
    if (args.mode == "lifecycle")
      out = lifecycle(args);
    else if (args.mode == "scale")
      out = scale(args);
    else if (args.mode == "fsync-probe")
      out = fsync_probe(args);
    else
      throw std::invalid_argument("unknown mode '" + args.mode +
                                  "' (lifecycle, scale, fsync-probe)");
    std::printf("%s\n", out.dump().c_str());
    return out.contains("error") ? 1 : 0;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "queue_bench: %s\n", e.what());
    return 2;
  } catch (const std::exception& e) {
    std::printf("%s\n", nlohmann::json{{"error", e.what()}}.dump().c_str());
    return 1;
  }
}
