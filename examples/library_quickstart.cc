// The library example of docs/library.md, built with the project so it stays true.
//   ./build/release/examples/library_quickstart [DATA_DIR]
#include <cstdio>

#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  auto store = kvq::open_lmdb_store({.path = argc > 1 ? argv[1] : "./kvq-data"});
  if (!store.ok()) return std::fprintf(stderr, "%s\n", store.status().to_string().c_str()), 1;
  auto opened = kvq::jobs::Jobs::open(*store);  // starts the activity monitor
  if (!opened.ok()) return std::fprintf(stderr, "%s\n", opened.status().to_string().c_str()), 1;
  kvq::jobs::Jobs& jobs = **opened;

  kvq::Status s = jobs.set_type_timeout("thumbnail", 30s);
  if (s.ok()) s = jobs.add("thumbnail", "img-17", R"({"src": "img-17.png"})").status();
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;

  auto job = jobs.accept("thumbnail", {.timeout = 30s, .worker = "host-a"});
  if (!job.ok()) return std::fprintf(stderr, "%s\n", job.status().to_string().c_str()), 1;
  auto progress = jobs.update(*job, {.progress = R"({"percent": 50})"});  // heartbeat
  s = progress.ok() ? jobs.finish(*job, {.result = R"({"thumb": "img-17-t.png"})"})
                    : progress.status();
  if (s.code() == kvq::Code::kFailedPrecondition) {
    std::puts("fenced out: another worker has the job now; stop");
    return 0;
  }
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;

  // A job added atomically with the application's own data.
  s = kvq::kv::run(**store, [&](kvq::kv::Transaction& txn) -> kvq::Status {
    txn.set("orders/7", R"({"total": 12})");
    return jobs.add(txn, "thumbnail", "order-7", R"({"src": "order-7.png"})").status();
  });
  if (!s.ok()) return std::fprintf(stderr, "%s\n", s.to_string().c_str()), 1;
  std::printf("finished %s; added order-7 with its order\n", job->id.c_str());
  return 0;
}
