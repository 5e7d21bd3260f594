// An application outside kvq's tree, built against an installed kvq (find_package or
// pkg-config; tests/packaging/install_test.py): on an LMDB data directory, or on etcd when given
// an endpoint, it adds a job, accepts it, finishes it with a result and reads it back.
//   consumer lmdb DATA_DIR
//   consumer etcd HOST:PORT KEY_PREFIX
#include <cstdio>
#include <cstring>
#include <string>

#include "kvq/etcd_store.h"
#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"

namespace {

int fail(const kvq::Status& s, const char* what) {
  std::fprintf(stderr, "consumer: %s: %s\n", what, s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace std::chrono_literals;
  if (argc < 3 || (std::strcmp(argv[1], "lmdb") != 0 && std::strcmp(argv[1], "etcd") != 0) ||
      (std::strcmp(argv[1], "etcd") == 0 && argc < 4)) {
    std::fprintf(stderr, "usage: consumer lmdb DATA_DIR | consumer etcd HOST:PORT KEY_PREFIX\n");
    return 2;
  }
  const bool etcd = std::strcmp(argv[1], "etcd") == 0;
  auto store = etcd ? kvq::open_etcd_store({.endpoints = {argv[2]}, .key_prefix = argv[3]})
                    : kvq::open_lmdb_store({.path = argv[2]});
  if (!store.ok()) return fail(store.status(), "open store");
  auto opened = kvq::jobs::Jobs::open(*store);
  if (!opened.ok()) return fail(opened.status(), "open jobs");
  kvq::jobs::Jobs& jobs = **opened;

  kvq::Status s = jobs.set_type_timeout("resize", 30s);
  if (!s.ok()) return fail(s, "set_type_timeout");
  auto added = jobs.add("resize", "photo-1", R"({"width": 640})");
  if (!added.ok()) return fail(added.status(), "add");
  auto job = jobs.accept("resize", {.timeout = 5s, .worker = "consumer"});
  if (!job.ok()) return fail(job.status(), "accept");
  s = jobs.finish(*job, {.result = R"({"done": true})"});
  if (!s.ok()) return fail(s, "finish");
  auto info = jobs.get("resize", "photo-1");
  if (!info.ok()) return fail(info.status(), "get");
  std::printf("%s %s %s result=%s\n", argv[1], info->id.c_str(),
              std::string(kvq::jobs::state_name(info->state)).c_str(),
              info->result.value_or("none").c_str());
  return info->state == kvq::jobs::State::kFinished ? 0 : 1;
}
