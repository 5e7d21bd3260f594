#include "beanstalk/tubes.h"

#include <gtest/gtest.h>

namespace kvq::beanstalk {
namespace {

TEST(TubesTest, PlainNamesAreTheirOwnType) {
  EXPECT_EQ(type_of_tube("default"), "default");
  EXPECT_EQ(type_of_tube("emails_v2.high-1"), "emails_v2.high-1");
  EXPECT_EQ(tube_of_type("emails_v2.high-1"), "emails_v2.high-1");
}

TEST(TubesTest, CharactersTypesCannotHoldAreEscapedBothWays) {
  EXPECT_EQ(type_of_tube("a+b/c;d$e(f)"), "a:2Bb:2Fc:3Bd:24e:28f:29");
  EXPECT_EQ(tube_of_type("a:2Bb:2Fc:3Bd:24e:28f:29"), "a+b/c;d$e(f)");
}

TEST(TubesTest, TypesThatAreNoTubesMapToNone) {
  for (const char* type : {"a:b", "a:2b", "a:2", "a:", ":41", "-leading", "a:3A"}) {
    EXPECT_EQ(tube_of_type(type), std::nullopt) << type;
  }
}

TEST(TubesTest, ATubeOf200BytesHasATypeButNotOneTooLongOnceEscaped) {
  EXPECT_EQ(type_of_tube(std::string(200, 'a')), std::string(200, 'a'));  // beanstalkd's longest
  EXPECT_EQ(tube_of_type(std::string(200, 'a')), std::string(200, 'a'));
  EXPECT_EQ(type_of_tube(std::string(201, 'a')), std::nullopt);
  EXPECT_TRUE(type_of_tube(std::string(66, '+')).has_value());   // 198 bytes
  EXPECT_FALSE(type_of_tube(std::string(67, '+')).has_value());  // 201 bytes
}

TEST(TubesTest, ATubesTypeRetriesForEverAndKeepsItsJobs) {
  const jobs::TypeSettings settings = tube_type_settings();
  EXPECT_GT(settings.timeout.count(), 0);
  EXPECT_EQ(settings.retry.max_attempts, jobs::kMaxAttemptsLimit);
  EXPECT_FALSE(settings.max_lost_runs.has_value());
  EXPECT_FALSE(settings.finished_retention.has_value());
}

}  // namespace
}  // namespace kvq::beanstalk
