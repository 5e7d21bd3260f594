// A worker that registers with the workers layer, so that if it dies its jobs go back to
// pending at once. Built with the project (docs/library.md and docs/api.md show it).
//   ./build/release/examples/registered_worker [DATA_DIR]
#include <cstdio>

#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "kvq/workers.h"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  auto store = kvq::open_lmdb_store({.path = argc > 1 ? argv[1] : "./kvq-data"});
  if (!store.ok()) return std::fprintf(stderr, "%s\n", store.status().to_string().c_str()), 1;
  auto opened_jobs = kvq::jobs::Jobs::open(*store);
  if (!opened_jobs.ok()) return 1;
  auto& jobs = *opened_jobs;  // std::unique_ptr<Jobs>
  auto opened_workers = kvq::workers::Workers::open(
      *store,
      {// Runs inside the transaction that removes a worker: its jobs go back to pending at once.
       .on_departure = [&](kvq::kv::Transaction& txn, const std::string& type,
                           const std::string& id) {
         return jobs->release_worker(txn, type, id).status();
       }});
  if (!opened_workers.ok()) return 1;
  auto& workers = *opened_workers;

  auto me = workers->register_worker("thumbnailer", "host-a/1",
                                     {.info = R"({"host": "host-a"})", .health_timeout = 10s});
  if (!me.ok()) return std::fprintf(stderr, "%s\n", me.status().to_string().c_str()), 1;
  auto sub = workers->subscribe("thumbnailer", [](const kvq::workers::Membership& m) {
    std::printf("membership version %llu: %zu worker(s) alive\n",
                static_cast<unsigned long long>(m.version), m.workers.size());
  });
  if (!sub.ok()) return 1;

  if (!jobs->set_type_timeout("thumbnail", 30s).ok() ||
      !jobs->add("thumbnail", "img-9", R"({"src": "img-9.png"})").ok()) {
    return 1;
  }
  auto job = jobs->accept("thumbnail",
                          {.timeout = 5s, .worker = (*me)->id(), .worker_type = "thumbnailer"});
  if (!job.ok()) return std::fprintf(stderr, "%s\n", job.status().to_string().c_str()), 1;
  kvq::Status done = jobs->finish(*job, R"({"thumb": "img-9-t.png"})");
  std::printf("finished %s as %s: %s\n", job->id.c_str(), (*me)->id().c_str(),
              done.to_string().c_str());
  return done.ok() ? 0 : 1;
}
