// tests/support/kv_helpers.h — one-line reads and writes for tests, each in its own transaction.
#pragma once

#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "kvq/kv.h"

namespace kvq::testing {

inline void put(kv::Store& store, const std::string& key, const std::string& value) {
  Status s = kv::run(store, [&](kv::Transaction& txn) {
    txn.set(key, value);
    return Status::OK();
  });
  ASSERT_TRUE(s.ok()) << s.to_string();
}

inline std::optional<std::string> read(kv::Store& store, const std::string& key) {
  auto value = kv::run(store, [&](kv::Transaction& txn) { return txn.get(key); });
  EXPECT_TRUE(value.ok()) << value.status().to_string();
  return value.ok() ? *value : std::nullopt;
}

inline std::unique_ptr<kv::Transaction> begin(kv::Store& store) {
  auto txn = store.begin();
  EXPECT_TRUE(txn.ok()) << txn.status().to_string();
  return txn.ok() ? std::move(*txn) : nullptr;
}

}  // namespace kvq::testing
