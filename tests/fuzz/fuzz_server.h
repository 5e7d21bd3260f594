// tests/fuzz/fuzz_server.h — what `kvq serve --data DIR --durability nosync` builds (store, jobs,
// workers, the API's routes), for the fuzz targets, once per fuzzing process.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "kvq/workers.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/router.h"

namespace kvq::server::fuzz {

// Reports a finding: libFuzzer saves the input when the process aborts.
[[noreturn]] inline void finding(std::string_view fuzzer, const std::string& what,
                                 std::string_view input) {
  std::fprintf(stderr, "%.*s: %s (input '%.*s')\n", static_cast<int>(fuzzer.size()), fuzzer.data(),
               what.c_str(), static_cast<int>(std::min<size_t>(input.size(), 200)), input.data());
  std::abort();
}

struct Backend {
  explicit Backend(std::string_view fuzzer) : name(fuzzer) {
    using namespace std::chrono_literals;
    dir =
        std::filesystem::temp_directory_path() / ("kvq-" + name + "-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    store = check(open_lmdb_store({.path = dir.string(), .durability = Durability::kNoSync}));
    jobs = check(jobs::Jobs::open(store));
    workers = check(workers::Workers::open(
        store, {.on_departure = [this](kv::Transaction& txn, const std::string& type,
                                       const std::string& id) {
          return jobs->release_worker(txn, type, id).status();
        }}));
    api.reset(new Api{*jobs, *workers, *store, metrics});  // an aggregate: no make_unique
    // Types the seed inputs use, so that more of them get past "no such type".
    for (const char* type : {"t", "email"}) {
      if (!jobs->set_type_timeout(type, 30s).ok()) finding(name, "setting up a type failed", type);
    }
  }
  ~Backend() {
    api->end_all_waiting();
    api.reset();
    workers.reset();
    jobs.reset();
    store.reset();
    std::filesystem::remove_all(dir);
  }

  Router routes() {
    Router router;
    add_api_routes(router, *api);
    return router;
  }

  template <typename T>
  T check(Result<T> r) {
    if (!r.ok()) finding(name, "setting up: " + r.status().to_string(), "");
    return std::move(*r);
  }

  std::string name;
  std::filesystem::path dir;
  std::shared_ptr<kv::Store> store;
  std::unique_ptr<jobs::Jobs> jobs;
  std::unique_ptr<workers::Workers> workers;
  Metrics metrics;
  std::unique_ptr<Api> api;
};

}  // namespace kvq::server::fuzz
