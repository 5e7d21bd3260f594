// A worker in its own OS process, for the workers tests:
//   workers_test_process DIR WORKER_ID HEALTH_TIMEOUT_MS
// registers WORKER_ID (type "w"), prints the ids it sees ("members a,b"), accepts one job of
// type "work" under its id, prints "ready JOB_ID LOCK", and then heartbeats until killed.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "kvq/workers.h"

using namespace kvq;

static int fail(const char* what, const Status& s) {
  std::fprintf(stderr, "workers_test_process: %s: %s\n", what, s.to_string().c_str());
  return 1;
}

int main(int argc, char** argv) {
  if (argc != 4) return 2;
  auto store = open_lmdb_store({.path = argv[1], .durability = Durability::kNoSync});
  if (!store.ok()) return fail("open", store.status());
  auto jobs = jobs::Jobs::open(*store);
  if (!jobs.ok()) return fail("jobs", jobs.status());
  jobs::Jobs& j = **jobs;
  auto workers = workers::Workers::open(
      *store,
      {.on_departure = [&](kv::Transaction& txn, const std::string& type, const std::string& id) {
        return j.release_worker(txn, type, id).status();
      }});
  if (!workers.ok()) return fail("workers", workers.status());
  const std::string id = argv[2];
  auto reg = (*workers)->register_worker(
      "w", id, {.health_timeout = std::chrono::milliseconds(std::atoi(argv[3]))});
  if (!reg.ok()) return fail("register", reg.status());
  auto members = (*workers)->workers("w");
  if (!members.ok()) return fail("workers", members.status());
  std::string ids;
  for (const auto& w : members->workers) ids += (ids.empty() ? "" : ",") + w.id;
  std::printf("members %s\n", ids.c_str());
  std::fflush(stdout);
  auto job =
      j.accept("work", {.timeout = std::chrono::seconds(10), .worker = id, .worker_type = "w"});
  if (!job.ok()) return fail("accept", job.status());
  std::printf("ready %s %s\n", job->id.c_str(), job->lock.c_str());
  std::fflush(stdout);
  for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}
