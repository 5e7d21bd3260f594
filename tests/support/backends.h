// tests/support/backends.h — the real stores every conformance suite runs against.
//
// A suite is a gtest TEST_P over Backend; INSTANTIATE it with KVQ_INSTANTIATE_FOR_BACKENDS so a
// new backend joins every suite at once.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include <cstdlib>
#include <fstream>

#include "kvq/etcd_store.h"
#include "kvq/kv.h"
#include "kvq/lmdb_store.h"
#include "support/etcd_process.h"
#include "support/temp_dir.h"

namespace kvq::testing {

struct Backend {
  std::string name;
  // Opens a store whose state lives in `dir` (a directory the test owns).
  std::function<Result<std::shared_ptr<kv::Store>>(const std::string& dir)> open;
};

// The etcd every test of this process uses: the ctest fixture's (its endpoint in the file
// $KVQ_TEST_ETCD_FILE), or one started here on first use and killed when the process exits.
inline std::string test_etcd_endpoint() {
  static const std::string endpoint = [] {
    if (const char* file = std::getenv("KVQ_TEST_ETCD_FILE")) {
      std::string e;
      std::ifstream in(file);
      in >> e;
      if (!e.empty()) return e;
    }
    static TempDir dir;
    static EtcdProcess etcd(dir.sub("etcd"));
    return etcd.endpoint();
  }();
  return endpoint;
}

inline std::vector<Backend> all_backends() {
  auto lmdb = [](Durability durability) {
    return [durability](const std::string& dir) {
      LmdbOptions options;
      options.path = dir + "/lmdb";
      options.durability = durability;
      return open_lmdb_store(options);
    };
  };
  return {
      {"lmdb_sync", lmdb(Durability::kSync)},
      {"lmdb_nosync", lmdb(Durability::kNoSync)},
      // One etcd for the whole run; each test's directory name keeps its keys apart.
      {"etcd",
       [](const std::string& dir) {
         return open_etcd_store({.endpoints = {test_etcd_endpoint()}, .key_prefix = dir + "/"});
       }},
  };
}

inline void PrintTo(const Backend& backend, std::ostream* os) { *os << backend.name; }

inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return info.param.name;
}

#define KVQ_INSTANTIATE_FOR_BACKENDS(suite)                                                      \
  INSTANTIATE_TEST_SUITE_P(Backends, suite, ::testing::ValuesIn(::kvq::testing::all_backends()), \
                           ::kvq::testing::backend_name)

// A fixture that opens the parameter's store in a fresh directory.
class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    auto opened = GetParam().open(dir_.path());
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    store_ = *opened;
  }

  kv::Store& store() { return *store_; }
  std::shared_ptr<kv::Store> store_ptr() { return store_; }
  const TempDir& dir() const { return dir_; }
  // Drops this fixture's handle and opens the same state again.
  void reopen() {
    store_.reset();
    auto opened = GetParam().open(dir_.path());
    ASSERT_TRUE(opened.ok()) << opened.status().to_string();
    store_ = *opened;
  }

 private:
  TempDir dir_;
  std::shared_ptr<kv::Store> store_;
};

}  // namespace kvq::testing
