#include "services/broker/host_registry.h"

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace sojourn::broker {
namespace {

using sojourn::testing::IsOk;

sojourn::v1::RegisterHostRequest Req(const std::string& host, const std::string& addr) {
  sojourn::v1::RegisterHostRequest r;
  r.set_host(host);
  r.set_statemgr_address(addr);
  return r;
}

// A host expires when its heartbeat is older than the TTL and comes back with
// the next heartbeat.
TEST(HostRegistryTest, ExpiresWithoutHeartbeat) {
  FakeClock clock;
  HostRegistry registry(clock, absl::Seconds(60));
  ASSERT_THAT(registry.Register(Req("a", "127.0.0.1:1")), IsOk());
  EXPECT_TRUE(registry.Get("a")->live());
  clock.Advance(absl::Seconds(61));
  EXPECT_FALSE(registry.Get("a")->live());
  ASSERT_THAT(registry.Heartbeat("a"), IsOk());
  EXPECT_TRUE(registry.Get("a")->live());
  EXPECT_EQ(registry.List().size(), 1u);
}

// Bad registrations and heartbeats of unknown hosts are refused with a reason.
TEST(HostRegistryTest, RejectsBadInput) {
  FakeClock clock;
  HostRegistry registry(clock, absl::Seconds(60));
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(Req("", "x:1"))));
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(Req("a", ""))));
  // The statemgr's rules for names; a bounded address without whitespace.
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(Req(std::string(256, 'h'), "x:1"))));
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(Req(std::string("a\0b", 3), "x:1"))));
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(Req("a\nb", "x:1"))));
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(Req("  ", "x:1"))));
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(Req("a", std::string(20000, 'a')))));
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(Req("a", "host :1"))));
  EXPECT_TRUE(registry.List().empty());  // nothing bad was stored
  EXPECT_TRUE(absl::IsNotFound(registry.Heartbeat("ghost")));
  EXPECT_TRUE(absl::IsNotFound(registry.Get("ghost").status()));
}

// Re-registering keeps the first registration time and updates the address.
TEST(HostRegistryTest, ReRegistrationUpdates) {
  FakeClock clock;
  HostRegistry registry(clock, absl::Seconds(60));
  ASSERT_THAT(registry.Register(Req("a", "127.0.0.1:1")), IsOk());
  const int64_t first = registry.Get("a")->registered_unix_seconds();
  clock.Advance(absl::Seconds(10));
  ASSERT_THAT(registry.Register(Req("a", "127.0.0.1:2")), IsOk());
  EXPECT_EQ(registry.Get("a")->registered_unix_seconds(), first);
  EXPECT_EQ(registry.Get("a")->statemgr_address(), "127.0.0.1:2");
}

}  // namespace
}  // namespace sojourn::broker
