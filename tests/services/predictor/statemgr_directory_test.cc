// Tests of the predictor's StatemgrDirectory: one channel per state manager
// address, bounded by an LRU. Channels are lazy, so no server is needed.
#include "services/predictor/statemgr_directory.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace sojourn::predictor {
namespace {

// Requests naming thousands of addresses keep at most max_channels channels;
// the most recently used survive, the others are rebuilt on demand, and a
// stub held by a caller stays usable after its channel was evicted.
TEST(StatemgrDirectoryTest, KeepsAtMostMaxChannels) {
  StatemgrDirectory directory("", absl::Seconds(1), /*max_channels=*/3);
  auto first = directory.Find("h", "127.0.0.1:1001");
  ASSERT_TRUE(first.ok()) << first.status();
  for (int i = 0; i < 3000; ++i) {
    ASSERT_TRUE(directory.Find("h", absl::StrCat("127.0.0.1:", 2000 + i)).ok());
    ASSERT_LE(directory.channels(), 3u);
  }
  EXPECT_EQ(directory.channels(), 3u);
  // The newest address is kept: the same stub again.
  auto newest = directory.Find("h", "127.0.0.1:4999");
  auto again = directory.Find("h", "127.0.0.1:4999");
  ASSERT_TRUE(newest.ok() && again.ok());
  EXPECT_EQ(newest->get(), again->get());
  // The first was evicted: a new stub, while the old one is still held.
  auto rebuilt = directory.Find("h", "127.0.0.1:1001");
  ASSERT_TRUE(rebuilt.ok());
  EXPECT_NE(rebuilt->get(), first->get());
  EXPECT_EQ(first->use_count(), 1);  // only this test holds the evicted stub
  EXPECT_EQ(directory.channels(), 3u);
}

// Malformed hosts and addresses are refused before any channel is made.
TEST(StatemgrDirectoryTest, RefusesMalformedNames) {
  StatemgrDirectory directory("", absl::Seconds(1));
  EXPECT_TRUE(absl::IsInvalidArgument(directory.Find("", "127.0.0.1:1").status()));
  EXPECT_TRUE(
      absl::IsInvalidArgument(directory.Find("h", std::string(100000, 'a')).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(directory.Find("h", "127.0.0.1:1\n").status()));
  EXPECT_TRUE(absl::IsFailedPrecondition(directory.Find("h", "").status()));  // no broker
  EXPECT_EQ(directory.channels(), 0u);
}

}  // namespace
}  // namespace sojourn::predictor
