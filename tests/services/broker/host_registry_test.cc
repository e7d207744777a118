#include "services/broker/host_registry.h"

#include <cmath>

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
  // Attributes the ranking divides by or sorts on: NaN, infinite, negative or
  // absurd values would reorder every other host.
  for (double mhz : {std::nan(""), 1e308, -1.0, 2e6}) {
    sojourn::v1::RegisterHostRequest r = Req("a", "x:1");
    r.mutable_attributes()->set_cpu_mhz(mhz);
    EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(r))) << mhz;
  }
  {
    sojourn::v1::RegisterHostRequest r = Req("a", "x:1");
    r.mutable_attributes()->set_cpu_cores(-4);
    EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(r)));
    r.mutable_attributes()->set_cpu_cores(8);
    r.mutable_attributes()->set_total_mem_mb(INFINITY);
    EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(r)));
  }
  EXPECT_TRUE(registry.List().empty());  // nothing bad was stored
  {
    sojourn::v1::RegisterHostRequest r = Req("a", "x:1");
    r.mutable_attributes()->set_cpu_mhz(3000);
    r.mutable_attributes()->set_cpu_cores(8);
    r.mutable_attributes()->set_total_mem_mb(16384);
    EXPECT_THAT(registry.Register(r), IsOk());
  }
  EXPECT_TRUE(absl::IsNotFound(registry.Heartbeat("ghost")));
  EXPECT_EQ(registry.List().size(), 1u);
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
