// What a store handle remembers between transactions (kv/etcd/remembered.h): bounded, the
// least recently used key going first.
#include "kv/etcd/remembered.h"

#include <gtest/gtest.h>

#include <string>

namespace kvq::kv::etcd {
namespace {

// A key found often (a type's settings, found by every add) outlives any number of keys
// remembered once (the rows of jobs that came and went).
TEST(RememberedTest, AFullMemoryForgetsTheLeastRecentlyUsedKey) {
  Remembered remembered;
  remembered.remember("a/settings", Remembered::Value{1, "s"});
  for (size_t i = 0; i < 3 * Remembered::kMaxKeys; ++i) {
    remembered.remember("row/" + std::to_string(i), Remembered::Value{2, "r"});
    if (i % 100 == 0) {
      ASSERT_TRUE(remembered.find("a/settings")) << "forgotten at row " << i;
    }
  }
  auto settings = remembered.find("a/settings");
  ASSERT_TRUE(settings && *settings);
  EXPECT_EQ((*settings)->value, "s");
  EXPECT_FALSE(remembered.find("row/0")) << "the oldest row was kept";
  EXPECT_TRUE(remembered.find("row/" + std::to_string(3 * Remembered::kMaxKeys - 1)));
  size_t kept = 0;
  for (size_t i = 0; i < 3 * Remembered::kMaxKeys; ++i)
    kept += remembered.find("row/" + std::to_string(i)) ? 1 : 0;
  EXPECT_EQ(kept, Remembered::kMaxKeys - 1) << "the memory is bounded, and full";
}

// Remembering a key again, or a commit's value, replaces its value; forgetting frees its place.
TEST(RememberedTest, AKeyHoldsTheLatestValueUntilForgotten) {
  Remembered remembered;
  EXPECT_FALSE(remembered.knows("k"));
  remembered.remember("k", std::nullopt);
  EXPECT_TRUE(remembered.knows("k")) << "remembered as absent is remembered";
  auto absent = remembered.find("k");
  ASSERT_TRUE(absent);
  EXPECT_FALSE(*absent) << "remembered as absent";
  remembered.committed("k", std::string("v"), 7);
  auto found = remembered.find("k");
  ASSERT_TRUE(found && *found);
  EXPECT_EQ((*found)->mod_revision, 7);
  EXPECT_EQ((*found)->value, "v");
  remembered.committed("unknown", std::string("v"), 8);
  EXPECT_FALSE(remembered.find("unknown")) << "a commit remembers only keys remembered";
  remembered.forget("k");
  EXPECT_FALSE(remembered.find("k"));
  EXPECT_FALSE(remembered.knows("k"));
  for (size_t i = 0; i < Remembered::kMaxKeys; ++i)
    remembered.remember("row/" + std::to_string(i), std::nullopt);
  size_t kept = 0;
  for (size_t i = 0; i < Remembered::kMaxKeys; ++i)
    kept += remembered.find("row/" + std::to_string(i)) ? 1 : 0;
  EXPECT_EQ(kept, Remembered::kMaxKeys) << "the forgotten key's place was not freed";
}

}  // namespace
}  // namespace kvq::kv::etcd
