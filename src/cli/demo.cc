// kvq demo: shows the library at work on a real data directory — transactional
// read-modify-write through the retry loop, tuple-encoded keys, a conflict, a watch, and a job's
// life from add to finish.
#include <cstdio>
#include <string>
#include <thread>

#include "commands.h"
#include "kvq/jobs.h"
#include "kvq/kv.h"
#include "kvq/lmdb_store.h"
#include "kvq/tuple.h"

namespace kvq::cli {
namespace {

using namespace std::chrono_literals;

int fail(const char* what, const Status& s) {
  std::fprintf(stderr, "kvq demo: %s: %s\n", what, s.to_string().c_str());
  return 1;
}

}  // namespace

int run_demo(int argc, char** argv) {
  std::string data = "./kvq-data";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--data" && i + 1 < argc) {
      data = argv[++i];
    } else if (arg == "--help" || arg == "-h") {
      std::puts(
          "usage: kvq demo [--data DIR]\n\nA short tour of the storage and jobs layers on DIR.");
      return 0;
    } else {
      std::fprintf(stderr, "kvq demo: unknown option '%s'\n", arg.c_str());
      return 2;
    }
  }
  std::printf(
      "kvq demo — a tour of the kvq library on a data directory (kvq serve is the server).\n");
  auto store = open_lmdb_store({.path = data});
  if (!store.ok()) return fail("opening the store", store.status());
  std::printf("store: %s\n", (*store)->describe().c_str());

  const Subspace demo(Tuple{"demo"});
  const std::string runs_key = demo.pack({"runs"});
  auto runs = kv::run(**store, [&](kv::Transaction& txn) -> Result<long long> {
    KVQ_ASSIGN_OR_RETURN(auto value, txn.get(runs_key));
    const long long next = value ? std::stoll(*value) + 1 : 1;
    txn.set(runs_key, std::to_string(next));
    return next;
  });
  if (!runs.ok()) return fail("counting runs", runs.status());
  std::printf("1. transactional increment: this demo has run %lld time(s) on this directory\n",
              *runs);

  auto first = (*store)->begin();
  auto second = (*store)->begin();
  if (!first.ok() || !second.ok())
    return fail("begin", first.ok() ? second.status() : first.status());
  (void)(*first)->get(runs_key);
  (void)(*second)->get(runs_key);
  (*first)->set(runs_key, std::to_string(*runs));
  (*second)->set(runs_key, std::to_string(*runs));
  Status a = (*first)->commit(), b = (*second)->commit();
  std::printf("2. two transactions read and wrote one key: first -> %s, second -> %s\n",
              a.to_string().c_str(), b.to_string().c_str());

  const std::string bell = demo.pack({"bell"});
  auto watcher = (*store)->begin();
  if (!watcher.ok()) return fail("begin", watcher.status());
  auto watch = (*watcher)->watch(bell);
  if (!watch.ok()) return fail("watch", watch.status());
  std::thread ringer([&] {
    std::this_thread::sleep_for(100ms);
    kv::run(**store, [&](kv::Transaction& txn) {
      txn.set(bell, std::to_string(*runs));
      return Status::OK();
    }).ignore();
  });
  const auto started = kv::Clock::now();
  Status fired = watch->wait_until(started + 5s);
  ringer.join();
  std::printf(
      "3. a watch on %s fired after another thread's commit: %s (%.0f ms)\n",
      Tuple::unpack(bell.substr(demo.prefix().size())).value_or(Tuple{}).debug_string().c_str(),
      fired.to_string().c_str(),
      std::chrono::duration<double, std::milli>(kv::Clock::now() - started).count());

  // 4. The jobs layer: a producer adds a job, a worker accepts, heartbeats and finishes it,
  // and a subscriber watches it happen.
  auto jobs = jobs::Jobs::open(*store);
  if (!jobs.ok()) return fail("opening jobs", jobs.status());
  if (Status s = (*jobs)->set_type_timeout("demo", std::chrono::seconds(30)); !s.ok())
    return fail("timeout", s);
  const std::string id = "greeting-" + std::to_string(*runs);
  if (Status s = (*jobs)->add("demo", id, R"({"to": "world"})").status(); !s.ok())
    return fail("add", s);
  auto sub = (*jobs)->subscribe("demo", id);
  if (!sub.ok()) return fail("subscribe", sub.status());
  auto job = (*jobs)->accept("demo", {.timeout = std::chrono::seconds(5), .worker = "demo-worker"});
  if (!job.ok()) return fail("accept", job.status());
  auto progress = (*jobs)->update(*job, R"({"to": "world", "progress": 50})");
  if (!progress.ok()) return fail("update", progress.status());
  if (Status s = (*jobs)->finish(*job, R"({"greeting": "hello, world"})"); !s.ok())
    return fail("finish", s);
  auto done = (*sub)->wait(jobs::State::kFinished, kv::Clock::now() + 5s);
  if (!done.ok()) return fail("wait", done.status());
  std::printf(
      "4. job %s of type demo: added, accepted by %s, updated, finished; a subscriber saw it\n"
      "   finish with %s\n",
      id.c_str(), job->worker.c_str(), done->data.c_str());
  std::printf("done. Run `make test` for the full suite.\n");
  return fired.ok() && a.ok() && b.code() == Code::kAborted ? 0 : 1;
}

}  // namespace kvq::cli
