#include "services/broker/host_registry.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

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

// ForgetSilent drops the hosts without a heartbeat, or without a sample, for
// longer than set_forget_after's (never a live one for a shorter time than
// the TTL); Count sorts the live hosts by their reported state and counts the
// expired ones.
TEST(HostRegistryTest, ForgetsHostsSilentForLongAndCountsTheRest) {
  FakeClock clock;
  HostRegistry registry(clock, absl::Seconds(60));
  // Registered now with a sample now, in `state`.
  auto reg = [&](const std::string& host, sojourn::v1::HostState state,
                 int64_t last_sample = -1) {
    sojourn::v1::RegisterHostRequest r = Req(host, "127.0.0.1:1");
    r.mutable_condition()->set_state(state);
    r.set_last_sample_unix_seconds(last_sample >= 0 ? last_sample
                                                    : absl::ToUnixSeconds(clock.Now()));
    return registry.Register(r);
  };
  const int64_t t0 = absl::ToUnixSeconds(clock.Now());
  ASSERT_THAT(reg("gone", sojourn::v1::HOST_STATE_S1_IDLE), IsOk());
  ASSERT_THAT(reg("stale", sojourn::v1::HOST_STATE_S1_IDLE), IsOk());
  clock.Advance(absl::Hours(2));
  ASSERT_THAT(reg("quiet", sojourn::v1::HOST_STATE_S1_IDLE), IsOk());
  clock.Advance(absl::Minutes(30));
  ASSERT_THAT(reg("idle", sojourn::v1::HOST_STATE_S1_IDLE), IsOk());
  // stale's state manager still registers it, with its sample of t0: S5.
  ASSERT_THAT(reg("stale", sojourn::v1::HOST_STATE_S5_REVOKED, t0), IsOk());
  ASSERT_THAT(registry.Register(Req("old-statemgr", "127.0.0.1:1")), IsOk());
  HostRegistry::Census c = registry.Count();
  EXPECT_EQ(c.live[1], 1);
  EXPECT_EQ(c.live[5], 1);
  EXPECT_EQ(c.live[0], 1);
  EXPECT_EQ(c.expired, 2);
  EXPECT_TRUE(registry.ForgetSilent().empty());  // never, by default
  // Silent for 2.5 h (gone: no heartbeat; stale: no sample) and 30 min: an
  // hour forgets the first two.
  registry.set_forget_after(absl::Hours(1));
  EXPECT_EQ(registry.ForgetSilent(), (std::vector<std::string>{"gone", "stale"}));
  EXPECT_TRUE(absl::IsNotFound(registry.Get("gone").status()));
  EXPECT_EQ(registry.Count().expired, 1);
  // stale's state manager registering it again is refused, and stores nothing.
  absl::Status refused = reg("stale", sojourn::v1::HOST_STATE_S5_REVOKED, t0);
  EXPECT_TRUE(absl::IsFailedPrecondition(refused)) << refused;
  EXPECT_NE(refused.message().find("--forget_hosts_after_seconds"), std::string::npos) << refused;
  EXPECT_TRUE(absl::IsNotFound(registry.Get("stale").status()));
  // Less than the TTL is the TTL: only expired hosts go.
  registry.set_forget_after(absl::Seconds(1));
  EXPECT_EQ(registry.ForgetSilent(), std::vector<std::string>{"quiet"});
  EXPECT_EQ(registry.List().size(), 2u);
  EXPECT_EQ(registry.forgotten(), 0);  // that counts the room made at max_hosts
  // A host that samples again registers as new.
  ASSERT_THAT(reg("stale", sojourn::v1::HOST_STATE_S1_IDLE), IsOk());
  EXPECT_EQ(registry.Get("stale")->registered_unix_seconds(), absl::ToUnixSeconds(clock.Now()));
}

// At most max_hosts hosts: a new one replaces the expired host silent the
// longest, and is refused while every host is live (20,000 registrations
// used to make ListHosts too large for a default gRPC client, forever).
TEST(HostRegistryTest, KeepsAtMostMaxHosts) {
  FakeClock clock;
  HostRegistry registry(clock, absl::Seconds(60), kDefaultMaxSampleSkewSeconds, /*max_hosts=*/3);
  for (const char* h : {"a", "b", "c"}) {
    ASSERT_THAT(registry.Register(Req(h, "127.0.0.1:1")), IsOk());
    clock.Advance(absl::Seconds(10));
  }
  absl::Status full = registry.Register(Req("d", "127.0.0.1:1"));
  EXPECT_TRUE(absl::IsResourceExhausted(full)) << full;
  EXPECT_NE(full.message().find("--max_hosts"), std::string::npos) << full;
  EXPECT_EQ(registry.List().size(), 3u);
  EXPECT_THAT(registry.Register(Req("b", "127.0.0.1:2")), IsOk());  // known hosts re-register
  // a expires first (heartbeat at 0 s), then c (20 s); b re-registered at 30 s.
  clock.Advance(absl::Seconds(55));  // now 85 s: a and c expired
  ASSERT_THAT(registry.Register(Req("d", "127.0.0.1:1")), IsOk());
  EXPECT_TRUE(absl::IsNotFound(registry.Get("a").status()));
  EXPECT_TRUE(registry.Get("c").ok());
  ASSERT_THAT(registry.Register(Req("e", "127.0.0.1:1")), IsOk());
  EXPECT_TRUE(absl::IsNotFound(registry.Get("c").status()));
  EXPECT_EQ(registry.forgotten(), 2);
  std::vector<std::string> names;
  for (const auto& h : registry.List()) names.push_back(h.host());
  EXPECT_EQ(names, (std::vector<std::string>{"b", "d", "e"}));
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

// statemgr_address must be HOST:PORT with a numeric port in [1, 65535]:
// "localhost" used to be stored and later dialled on port 443. A refused
// re-registration leaves the stored address as it was.
TEST(HostRegistryTest, RejectsStatemgrAddressesThatAreNotHostPort) {
  FakeClock clock;
  HostRegistry registry(clock, absl::Seconds(60));
  ASSERT_THAT(registry.Register(Req("a", "127.0.0.1:7403")), IsOk());
  for (const char* bad : {"localhost", "::::", "h:abc", "h:-1", "h:+1", "h:", "h:1:2", "[::1]",
                          "unix:", "unix:/tmp/sm.sock", "h:0", "h:65536", "h:99999", ":7403",
                          "[]:7403", "[::1:7403", "[x::1]:7403", "h/x:7403", "dns:///h"}) {
    absl::Status s = registry.Register(Req("a", bad));
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << ": " << s;
    EXPECT_NE(s.message().find("statemgr_address"), std::string::npos) << s;
    EXPECT_EQ(s.message().find('\n'), std::string::npos) << s;
    EXPECT_EQ(registry.Get("a")->statemgr_address(), "127.0.0.1:7403") << bad;
  }
  EXPECT_EQ(registry.List().size(), 1u);
  for (const char* good : {"sm-1.example.com:7403", "h:1", "h:65535", "10.0.0.7:7403",
                           "[::1]:7403", "[fe80::1%eth0]:7403", "dns:///sm1:7403", "h_x:07403"}) {
    EXPECT_THAT(registry.Register(Req("a", good)), IsOk()) << good;
    EXPECT_EQ(registry.Get("a")->statemgr_address(), good);
  }
}

// last_sample_unix_seconds is in [0, clock + skew] (0 = no sample yet) for
// RegisterHost and Heartbeat; anything else is refused with the field named
// and changes nothing: INT64_MAX used to stick as the host's newest sample,
// after which newer history could never invalidate its cached predictions.
TEST(HostRegistryTest, RejectsLastSampleTimesOutsideTheClock) {
  FakeClock clock;  // 1,700,000,000
  const int64_t now = absl::ToUnixSeconds(clock.Now());
  HostRegistry registry(clock, absl::Seconds(60), /*max_clock_skew_seconds=*/600);
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  for (int64_t bad : {int64_t{-5}, int64_t{-1}, kMin, kMax, now + 601}) {
    sojourn::v1::RegisterHostRequest r = Req("a", "h:1");
    r.set_last_sample_unix_seconds(bad);
    absl::Status s = registry.Register(r);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << ": " << s;
    EXPECT_NE(s.message().find("last_sample_unix_seconds"), std::string::npos) << s;
  }
  EXPECT_TRUE(registry.List().empty());  // nothing stored
  // 0 (no sample yet) and up to the clock + skew are fine.
  {
    sojourn::v1::RegisterHostRequest r = Req("a", "h:1");
    r.set_last_sample_unix_seconds(0);
    ASSERT_THAT(registry.Register(r), IsOk());
    EXPECT_EQ(registry.Get("a")->last_sample_unix_seconds(), 0);
    r.set_last_sample_unix_seconds(now - 100);
    ASSERT_THAT(registry.Register(r), IsOk());
    EXPECT_EQ(registry.Get("a")->last_sample_unix_seconds(), now - 100);
  }
  // A refused heartbeat is not counted: the host still expires on time and
  // keeps its last sample.
  clock.Advance(absl::Seconds(61));
  for (int64_t bad : {int64_t{-5}, kMin, kMax, now + 61 + 601}) {
    absl::Status s = registry.Heartbeat("a", bad);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << bad << ": " << s;
    EXPECT_NE(s.message().find("last_sample_unix_seconds"), std::string::npos) << s;
    EXPECT_FALSE(registry.Get("a")->live()) << bad;
    EXPECT_EQ(registry.Get("a")->last_sample_unix_seconds(), now - 100) << bad;
  }
  // Newer valid history still moves it forward (the ranker's cache key), up
  // to the clock + skew; an older one or 0 does not move it back.
  ASSERT_THAT(registry.Heartbeat("a", now + 61 + 600), IsOk());
  EXPECT_TRUE(registry.Get("a")->live());
  EXPECT_EQ(registry.Get("a")->last_sample_unix_seconds(), now + 661);
  ASSERT_THAT(registry.Heartbeat("a", 0), IsOk());
  ASSERT_THAT(registry.Heartbeat("a", now), IsOk());
  EXPECT_EQ(registry.Get("a")->last_sample_unix_seconds(), now + 661);
  // The bound follows the clock.
  clock.Advance(absl::Seconds(100));
  EXPECT_THAT(registry.Heartbeat("a", now + 761), IsOk());
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Heartbeat("a", now + 762)));
  // The argument is judged before the host is looked up.
  EXPECT_TRUE(absl::IsInvalidArgument(registry.Heartbeat("ghost", -1)));
  EXPECT_TRUE(absl::IsNotFound(registry.Heartbeat("ghost", 1)));
}

sojourn::v1::HostCondition Condition(sojourn::v1::HostState state, int64_t since, int band,
                                     int64_t step = 300) {
  sojourn::v1::HostCondition c;
  c.set_state(state);
  c.set_state_since_unix_seconds(since);
  c.set_load_band(band);
  c.set_step_seconds(step);
  return c;
}

// The host's condition (the ranker's cache key when present): stored by a
// registration that has one and forgotten by one without; a heartbeat with
// one replaces it, and one without keeps it unless it reports newer history.
// A bad condition is refused and changes nothing.
TEST(HostRegistryTest, KeepsTheReportedCondition) {
  FakeClock clock;
  const int64_t now = absl::ToUnixSeconds(clock.Now());
  HostRegistry registry(clock, absl::Seconds(60), /*max_clock_skew_seconds=*/600);
  sojourn::v1::RegisterHostRequest r = Req("a", "h:1");
  r.set_last_sample_unix_seconds(now - 10);
  *r.mutable_condition() = Condition(sojourn::v1::HOST_STATE_S2_BUSY, now - 100, 1);
  ASSERT_THAT(registry.Register(r), IsOk());
  ASSERT_TRUE(registry.Get("a")->has_condition());
  EXPECT_EQ(registry.Get("a")->condition().state(), sojourn::v1::HOST_STATE_S2_BUSY);
  EXPECT_EQ(registry.Get("a")->condition().state_since_unix_seconds(), now - 100);
  EXPECT_EQ(registry.Get("a")->condition().load_band(), 1);
  EXPECT_TRUE(registry.List()[0].has_condition());

  // Refused: unknown states, a start outside the clock, a band outside [-1, 1].
  clock.Advance(absl::Seconds(61));
  const sojourn::v1::HostCondition bad[] = {
      Condition(sojourn::v1::HOST_STATE_UNSPECIFIED, now, 0),
      Condition(static_cast<sojourn::v1::HostState>(6), now, 0),
      Condition(sojourn::v1::HOST_STATE_S1_IDLE, -1, 0),
      Condition(sojourn::v1::HOST_STATE_S1_IDLE, now + 61 + 601, 0),
      Condition(sojourn::v1::HOST_STATE_S1_IDLE, now, 2),
      Condition(sojourn::v1::HOST_STATE_S1_IDLE, now, -2),
      Condition(sojourn::v1::HOST_STATE_S1_IDLE, now, 0, -300)};
  for (const auto& c : bad) {
    absl::Status s = registry.Heartbeat("a", now, &c);
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << c.ShortDebugString() << ": " << s;
    EXPECT_NE(s.message().find("condition."), std::string::npos) << s;
    EXPECT_EQ(s.message().find("last_sample_unix_seconds"), std::string::npos) << s;
    sojourn::v1::RegisterHostRequest rr = r;
    *rr.mutable_condition() = c;
    EXPECT_TRUE(absl::IsInvalidArgument(registry.Register(rr))) << c.ShortDebugString();
    EXPECT_FALSE(registry.Get("a")->live());  // not counted as a heartbeat
    EXPECT_EQ(registry.Get("a")->condition().state(), sojourn::v1::HOST_STATE_S2_BUSY);
  }

  // A heartbeat with a condition replaces it.
  const sojourn::v1::HostCondition s1 = Condition(sojourn::v1::HOST_STATE_S1_IDLE, now + 50, -1);
  ASSERT_THAT(registry.Heartbeat("a", now + 55, &s1), IsOk());
  EXPECT_EQ(registry.Get("a")->condition().state(), sojourn::v1::HOST_STATE_S1_IDLE);
  EXPECT_EQ(registry.Get("a")->condition().load_band(), -1);
  // Without one: kept when the history is not newer, forgotten when it is.
  ASSERT_THAT(registry.Heartbeat("a", now + 55), IsOk());
  ASSERT_THAT(registry.Heartbeat("a", 0), IsOk());
  EXPECT_TRUE(registry.Get("a")->has_condition());
  ASSERT_THAT(registry.Heartbeat("a", now + 60), IsOk());
  EXPECT_FALSE(registry.Get("a")->has_condition());
  // A registration with one sets it again, one without forgets it.
  r.set_last_sample_unix_seconds(now + 60);
  ASSERT_THAT(registry.Register(r), IsOk());
  EXPECT_EQ(registry.Get("a")->condition().state(), sojourn::v1::HOST_STATE_S2_BUSY);
  r.clear_condition();
  ASSERT_THAT(registry.Register(r), IsOk());
  EXPECT_FALSE(registry.Get("a")->has_condition());
  // Older news (a late call, reporting an older last sample) changes neither.
  *r.mutable_condition() = s1;
  r.set_last_sample_unix_seconds(now + 70);
  ASSERT_THAT(registry.Register(r), IsOk());
  r.set_last_sample_unix_seconds(now + 65);
  r.clear_condition();
  ASSERT_THAT(registry.Register(r), IsOk());
  EXPECT_EQ(registry.Get("a")->condition().state(), sojourn::v1::HOST_STATE_S1_IDLE);
  const sojourn::v1::HostCondition s2 = Condition(sojourn::v1::HOST_STATE_S2_BUSY, now + 62, 0);
  ASSERT_THAT(registry.Heartbeat("a", now + 66, &s2), IsOk());
  EXPECT_EQ(registry.Get("a")->condition().state(), sojourn::v1::HOST_STATE_S1_IDLE);
  EXPECT_EQ(registry.Get("a")->last_sample_unix_seconds(), now + 70);
}

}  // namespace
}  // namespace sojourn::broker
