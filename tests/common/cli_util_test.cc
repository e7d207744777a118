#include "common/cli_util.h"

#include "gtest/gtest.h"

namespace sojourn {
namespace {

// Human durations parse to the right number of seconds.
TEST(ParsePositiveDurationTest, AcceptsUnitsAndBareSeconds) {
  EXPECT_EQ(*ParsePositiveDuration("2h"), absl::Hours(2));
  EXPECT_EQ(*ParsePositiveDuration("90m"), absl::Minutes(90));
  EXPECT_EQ(*ParsePositiveDuration("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParsePositiveDuration("45"), absl::Seconds(45));
  EXPECT_EQ(*ParsePositiveDuration("1.5h"), absl::Minutes(90));
}

// Negative, zero and garbage durations are rejected with a reason.
TEST(ParsePositiveDurationTest, RejectsNonPositiveAndGarbage) {
  EXPECT_FALSE(ParsePositiveDuration("-2h").ok());
  EXPECT_FALSE(ParsePositiveDuration("0").ok());
  auto bad = ParsePositiveDuration("soon");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("soon"), absl::string_view::npos);
}

}  // namespace
}  // namespace sojourn
