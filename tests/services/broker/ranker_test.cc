// The broker's ranker: policies on fake predictions (TR(t) = 1 - t / life,
// so every figure is derived by hand), the reasons for hosts that cannot take
// the job, the prediction cache and its invalidation, and the fan-out.
#include "services/broker/ranker.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <thread>
#include <utility>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "common/metrics.h"
#include "tests/services/broker/fake_backends.h"
#include "tests/test_util.h"

namespace sojourn::broker {
namespace {

using sojourn::broker::testing::FakeHost;
using sojourn::broker::testing::FakeHosts;
using sojourn::broker::testing::FakeLoadSource;
using sojourn::broker::testing::FakeTrSource;
using sojourn::testing::IsOk;

sojourn::v1::RegisteredHost Host(const std::string& name, double mhz = 0, bool live = true,
                                 double mem = 0, int cores = 0) {
  sojourn::v1::RegisteredHost h;
  h.set_host(name);
  h.set_statemgr_address("sm-" + name);
  h.set_live(live);
  h.mutable_attributes()->set_cpu_mhz(mhz);
  h.mutable_attributes()->set_total_mem_mb(mem);
  h.mutable_attributes()->set_cpu_cores(cores);
  return h;
}

sojourn::v1::RankHostsRequest Job(int64_t seconds, const std::string& policy = "",
                                  double mem = 0, double cpu = 0) {
  sojourn::v1::RankHostsRequest r;
  r.mutable_job()->set_duration_seconds(seconds);
  r.mutable_job()->set_memory_mb(mem);
  r.mutable_job()->set_cpu_share_ratio(cpu);
  r.set_policy(policy);
  return r;
}

// x with x - x^2 / (2 life) = work (the integral of 1 - t / life reaching work).
double LinearJctf(double life, double work) { return life - std::sqrt(life * life - 2 * life * work); }

class RankerTest : public ::testing::Test {
 protected:
  RankerTest() {
    hosts_.Set("a", FakeHost{36000});
    hosts_.Set("b", FakeHost{72000});
  }
  // Entries live the TTL from their fetch here and are fetched by the
  // ranking after it, so that the tests of the TTL and of the keying can
  // count in whole seconds; the spread of the refreshes over the TTL and the
  // refreshes ahead in the background (both the default) have their own
  // tests below.
  RankerConfig Config(int fanout = 0) {
    RankerConfig c;
    c.fanout_threads = fanout;
    c.spread_cache_refreshes = false;
    c.refresh_threads = 0;
    return c;
  }
  FakeHosts hosts_;
  FakeTrSource tr_{hosts_};
  FakeLoadSource load_{hosts_};
  FakeClock clock_;
};

// a: 2000 MHz, life 10 h; b: 1000 MHz, life 20 h; reference = mean 1500 MHz,
// so CR a = 4/3, b = 2/3. Job 1 h, no load:
//   JCT a = 2700, b = 5400; MTTF (= life / 2 within the 24 h horizon) a =
//   18000, b = 36000 >= JCT -> rule jctf; JCTF solves CR I(x) = 3600:
//   a: I = 2700, b: I = 5400; ETL a = 18000 * 4/3 = b = 36000 * 2/3 = 24000.
TEST_F(RankerTest, ProactiveFiguresByHand) {
  Ranker ranker(tr_, nullptr, clock_, Config());
  auto r = ranker.Rank(Job(3600), {Host("a", 2000), Host("b", 1000)});
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->policy(), "proactive");
  EXPECT_EQ(r->rule(), "jctf");
  EXPECT_EQ(r->horizon_seconds(), 86400);
  ASSERT_EQ(r->hosts_size(), 2);
  const auto& a = r->hosts(0);
  const auto& b = r->hosts(1);
  EXPECT_EQ(a.host(), "a");
  EXPECT_EQ(a.rank(), 1);
  EXPECT_EQ(b.rank(), 2);
  EXPECT_EQ(a.rule(), "jctf");
  EXPECT_NEAR(a.relative_speed_ratio(), 4.0 / 3, 1e-12);
  EXPECT_NEAR(a.jct_seconds(), 2700, 1e-6);
  EXPECT_NEAR(b.jct_seconds(), 5400, 1e-6);
  EXPECT_NEAR(a.mttf_seconds(), 18000, 1e-6);
  EXPECT_NEAR(b.mttf_seconds(), 36000, 1e-6);
  EXPECT_NEAR(a.etl_seconds(), 24000, 1e-6);
  EXPECT_NEAR(b.etl_seconds(), 24000, 1e-6);
  EXPECT_NEAR(a.jctf_seconds(), LinearJctf(36000, 2700), 1e-3);
  EXPECT_NEAR(b.jctf_seconds(), LinearJctf(72000, 5400), 1e-3);
  EXPECT_NEAR(a.tr_ratio(), 0.9, 1e-12);   // 1 - 3600 / 36000
  EXPECT_NEAR(b.tr_ratio(), 0.95, 1e-12);  // 1 - 3600 / 72000
  EXPECT_FALSE(a.has_predicted_load_ratio());  // no load source
  EXPECT_EQ(a.current_state(), sojourn::v1::HOST_STATE_S1_IDLE);
  EXPECT_NE(a.reason().find("JCTF"), std::string::npos);
  // One prediction per host over the horizon, with the state manager address.
  ASSERT_EQ(tr_.requests.size(), 2u);
  for (const auto& req : tr_.requests) {
    EXPECT_EQ(req.window_seconds(), 86400);
    EXPECT_EQ(req.curve_points(), 288);
    EXPECT_EQ(req.statemgr_address(), "sm-" + req.host());
  }
}

// Other policies on the same hosts: condor by clock rate (a), tr by TR (b),
// round robin rotates; omniscient is refused outside simulation.
TEST_F(RankerTest, EveryPolicyGivesFigures) {
  Ranker ranker(tr_, nullptr, clock_, Config());
  std::vector<sojourn::v1::RegisteredHost> hosts = {Host("a", 2000), Host("b", 1000)};
  auto c = ranker.Rank(Job(3600, "condor"), hosts);
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_EQ(c->rule(), "clock_rate");
  EXPECT_EQ(c->hosts(0).host(), "a");
  auto t = ranker.Rank(Job(3600, "tr"), hosts);
  ASSERT_THAT(t.status(), IsOk());
  EXPECT_EQ(t->hosts(0).host(), "b");
  auto r1 = ranker.Rank(Job(3600, "round_robin"), hosts);
  auto r2 = ranker.Rank(Job(3600, "round_robin"), hosts);
  ASSERT_TRUE(r1.ok() && r2.ok());
  EXPECT_NE(r1->hosts(0).host(), r2->hosts(0).host());
  for (const auto* r : {&*c, &*t, &*r1}) {
    for (const auto& h : r->hosts()) {
      EXPECT_TRUE(h.eligible());
      EXPECT_TRUE(h.has_tr_ratio() && h.has_mttf_seconds() && h.has_jct_seconds() &&
                  h.has_jctf_seconds() && h.has_etl_seconds())
          << r->policy() << " " << h.host();
    }
  }
  EXPECT_TRUE(absl::IsInvalidArgument(ranker.Rank(Job(3600, "omniscient"), hosts).status()));
}

// TL = 30 h: horizon 3 days (2 x 30 h rounded up to days). a: MTTF 18000,
// JCT 81000; b: MTTF 36000, JCT 162000 -> every JCT > MTTF -> largest ETL
// (equal: 24000) -> by name.
TEST_F(RankerTest, LongJobsUseEtl) {
  Ranker ranker(tr_, nullptr, clock_, Config());
  auto r = ranker.Rank(Job(30 * 3600), {Host("b", 1000), Host("a", 2000)});
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->horizon_seconds(), 3 * 86400);
  EXPECT_EQ(r->rule(), "etl");
  EXPECT_EQ(r->hosts(0).host(), "a");
  EXPECT_FALSE(r->hosts(0).has_jctf_seconds());  // beyond the horizon
  EXPECT_NEAR(r->hosts(1).etl_seconds(), 24000, 1e-6);
}

// With load 0.5 everywhere (fake state manager series): JCT doubles and the
// predicted load is reported.
TEST_F(RankerTest, LoadForecastSlowsTheJob) {
  hosts_.Set("a", FakeHost{36000, sojourn::v1::HOST_STATE_S1_IDLE, 0.5});
  Ranker ranker(tr_, &load_, clock_, Config());
  auto r = ranker.Rank(Job(3600), {Host("a", 2000), Host("b", 1000)});
  ASSERT_THAT(r.status(), IsOk());
  std::map<std::string, sojourn::v1::HostRank> by;
  for (const auto& h : r->hosts()) by[h.host()] = h;
  EXPECT_NEAR(by["a"].predicted_load_ratio(), 0.5, 1e-12);
  EXPECT_NEAR(by["a"].jct_seconds(), 5400, 1e-6);       // 3600 / (4/3 * 0.5)
  EXPECT_NEAR(by["a"].etl_seconds(), 12000, 1e-6);      // 18000 * 4/3 * 0.5
  EXPECT_NEAR(by["b"].predicted_load_ratio(), 0.0, 1e-12);
  EXPECT_NEAR(by["b"].jct_seconds(), 5400, 1e-6);
}

// Every host appears; those that cannot take the job say why.
TEST_F(RankerTest, ExplainsEveryIneligibleHost) {
  hosts_.Set("ok", FakeHost{36000});
  hosts_.Set("down", FakeHost{36000, sojourn::v1::HOST_STATE_S5_REVOKED});
  hosts_.Set("small", FakeHost{36000});
  Ranker ranker(tr_, nullptr, clock_, Config());
  auto r = ranker.Rank(Job(3600, "", /*mem=*/2048),
                       {Host("ok"), Host("down"), Host("expired", 0, false),
                        Host("small", 0, true, 1024), Host("broken")});
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->hosts_size(), 5);
  EXPECT_EQ(r->hosts(0).host(), "ok");
  EXPECT_TRUE(r->hosts(0).eligible());
  std::map<std::string, std::string> reasons;
  for (int i = 1; i < 5; ++i) {
    EXPECT_FALSE(r->hosts(i).eligible());
    EXPECT_EQ(r->hosts(i).rank(), 0);
    EXPECT_TRUE(r->hosts(i).rule().empty());
    reasons[r->hosts(i).host()] = r->hosts(i).reason();
  }
  EXPECT_NE(reasons["down"].find("S5"), std::string::npos);
  EXPECT_NE(reasons["expired"].find("heartbeat"), std::string::npos);
  EXPECT_NE(reasons["small"].find("MiB"), std::string::npos);
  EXPECT_NE(reasons["broken"].find("statemgr down"), std::string::npos);
  // The expired host was not asked about.
  for (const auto& req : tr_.requests) EXPECT_NE(req.host(), "expired");
}

// A job nobody can run still gets a ranking listing every host with a reason.
TEST_F(RankerTest, NoHostCanRunTheJob) {
  Ranker ranker(tr_, nullptr, clock_, Config());
  auto r = ranker.Rank(Job(3600, "", 0, /*cpu=*/8), {Host("a", 0, true, 0, 2), Host("b", 0, true, 0, 4)});
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->hosts_size(), 2);
  for (const auto& h : r->hosts()) {
    EXPECT_FALSE(h.eligible());
    EXPECT_NE(h.reason().find("CPUs"), std::string::npos);
  }
  auto req = Job(3600, "condor");
  req.mutable_job()->set_min_cpu_mhz(5000);
  r = ranker.Rank(req, {Host("a", 2000), Host("b")});
  ASSERT_THAT(r.status(), IsOk());
  for (const auto& h : r->hosts()) {
    EXPECT_FALSE(h.eligible());
    EXPECT_NE(h.reason().find("MHz"), std::string::npos);
  }
}

// The cache: a second ranking reuses the predictions; a host reporting newer
// history is fetched again; the TTL expires everything; another horizon is
// another entry.
TEST_F(RankerTest, CacheIsInvalidatedByNewHistoryAndTtl) {
  RankerConfig c = Config();
  c.cache_ttl = absl::Seconds(60);
  Ranker ranker(tr_, nullptr, clock_, c);
  std::vector<sojourn::v1::RegisteredHost> hosts = {Host("a", 2000), Host("b", 1000)};
  hosts[0].set_last_sample_unix_seconds(1000);
  auto r = ranker.Rank(Job(3600), hosts);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->predictions_fetched(), 2);
  EXPECT_EQ(r->predictions_cached(), 0);
  r = ranker.Rank(Job(7200, "condor"), hosts);  // same horizon: cached
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->predictions_fetched(), 0);
  EXPECT_EQ(r->predictions_cached(), 2);
  EXPECT_EQ(hosts_.predict_calls.load(), 2);
  hosts[0].set_last_sample_unix_seconds(1006);  // new history for a
  clock_.Advance(absl::Seconds(30));
  r = ranker.Rank(Job(3600), hosts);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->predictions_fetched(), 1);
  EXPECT_EQ(r->predictions_cached(), 1);
  EXPECT_EQ(tr_.requests.back().host(), "a");
  clock_.Advance(absl::Seconds(31));  // b's entry is now 61 s old
  r = ranker.Rank(Job(3600), hosts);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->predictions_fetched(), 1);
  EXPECT_EQ(tr_.requests.back().host(), "b");
  r = ranker.Rank(Job(20 * 3600), hosts);  // horizon 2 days: new entries
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->predictions_fetched(), 2);
  EXPECT_EQ(ranker.cache().size(), 4u);
  // Failures are not cached.
  r = ranker.Rank(Job(3600), {Host("ghost")});
  r = ranker.Rank(Job(3600), {Host("ghost")});
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->predictions_fetched(), 1);
  EXPECT_FALSE(r->hosts(0).eligible());
}

// A host whose state manager reports its condition (state, since when, load
// band) keeps its cached prediction through newer samples in the same
// condition, as a live monitor sends them every few seconds, and loses it at
// a change of any of the three or at the TTL. A host that stops reporting a
// condition is keyed on its last sample again. Before, every newer sample
// recomputed every curve, so a live cluster's rankings were always cold.
TEST_F(RankerTest, CacheIsKeyedOnTheReportedCondition) {
  RankerConfig c = Config();
  c.cache_ttl = absl::Seconds(60);
  Ranker ranker(tr_, nullptr, clock_, c);
  std::vector<sojourn::v1::RegisteredHost> hosts = {Host("a", 2000), Host("b", 1000)};
  for (auto& h : hosts) {
    h.set_last_sample_unix_seconds(1000);
    h.mutable_condition()->set_state(sojourn::v1::HOST_STATE_S1_IDLE);
    h.mutable_condition()->set_state_since_unix_seconds(400);
    h.mutable_condition()->set_load_band(0);
  }
  auto rank = [&](int fetched, int cached) {
    auto r = ranker.Rank(Job(3600), hosts);
    ASSERT_THAT(r.status(), IsOk());
    EXPECT_EQ(r->predictions_fetched(), fetched);
    EXPECT_EQ(r->predictions_cached(), cached);
  };
  rank(2, 0);
  for (int i = 1; i <= 5; ++i) {  // a heartbeat every 10 s, newer samples, same condition
    clock_.Advance(absl::Seconds(10));
    for (auto& h : hosts) h.set_last_sample_unix_seconds(1000 + 10 * i);
    rank(0, 2);
  }
  EXPECT_EQ(hosts_.predict_calls.load(), 2);
  // Each part of the condition invalidates a's entry alone.
  hosts[0].mutable_condition()->set_load_band(1);
  rank(1, 1);
  EXPECT_EQ(tr_.requests.back().host(), "a");
  hosts[0].mutable_condition()->set_state_since_unix_seconds(1040);
  rank(1, 1);
  hosts[0].mutable_condition()->set_state(sojourn::v1::HOST_STATE_S2_BUSY);
  rank(1, 1);
  EXPECT_EQ(tr_.requests.back().host(), "a");
  // No condition any more (an older state manager): keyed on the last
  // sample, which is the one a's entry was fetched at, then a newer one.
  hosts[0].clear_condition();
  rank(0, 2);
  hosts[0].set_last_sample_unix_seconds(1060);
  rank(1, 1);
  EXPECT_EQ(tr_.requests.back().host(), "a");
  rank(0, 2);
  // The TTL still bounds every entry: b's was fetched 50 s ago.
  clock_.Advance(absl::Seconds(11));
  rank(1, 1);
  EXPECT_EQ(tr_.requests.back().host(), "b");
}

// An entry is keyed on the condition its prediction was computed in when the
// prediction says (the state manager's, which the registration may lag by a
// period): a host whose registration still shows the old condition is
// fetched until it shows the new one, and a change that is undone before
// the next registration does not leave the changed prediction keyed on the
// old condition.
TEST_F(RankerTest, CacheIsKeyedOnThePredictionsOwnCondition) {
  RankerConfig c = Config();
  c.cache_ttl = absl::Seconds(60);
  Ranker ranker(tr_, nullptr, clock_, c);
  auto cond = [](int band) {
    sojourn::v1::HostCondition k;
    k.set_state(sojourn::v1::HOST_STATE_S1_IDLE);
    k.set_state_since_unix_seconds(400);
    k.set_load_band(band);
    k.set_step_seconds(6);
    return k;
  };
  std::vector<sojourn::v1::RegisteredHost> hosts = {Host("a", 2000)};
  hosts[0].set_last_sample_unix_seconds(1000);
  *hosts[0].mutable_condition() = cond(0);
  FakeHost a{36000};
  a.condition = cond(1);  // the state manager has seen the band change already
  hosts_.Set("a", a);
  auto rank = [&](int fetched) {
    auto r = ranker.Rank(Job(3600), hosts);
    ASSERT_THAT(r.status(), IsOk());
    EXPECT_EQ(r->predictions_fetched(), fetched);
  };
  rank(1);
  rank(1);  // the registration still says band 0
  *hosts[0].mutable_condition() = cond(1);
  rank(0);  // now it matches
  rank(0);
  // The band goes back to 0: the registration then says so, and the band-1
  // prediction is not served for it.
  a.condition = cond(0);
  hosts_.Set("a", a);
  *hosts[0].mutable_condition() = cond(0);
  rank(1);
  rank(0);
  // A new grid step (a new sampling period) is another condition.
  sojourn::v1::HostCondition six = cond(0);
  six.set_step_seconds(12);
  a.condition = six;
  hosts_.Set("a", a);
  *hosts[0].mutable_condition() = six;
  rank(1);
  rank(0);
}

// A cached entry keeps its curve once, as the ranker's TrCurve: the
// response it keeps holds no curve points, not even cleared ones kept for
// reuse (clear_curve() kept them: about 100 kB for a 7-day curve).
TEST_F(RankerTest, CachedEntriesHoldNoCurvePoints) {
  Ranker ranker(tr_, nullptr, clock_, Config());
  auto r = ranker.Rank(Job(3 * 86400), {Host("a", 2000)});  // horizon 6 days
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->predictions_fetched(), 1);
  ASSERT_EQ(tr_.requests.back().curve_points(), 6 * 86400 / 300);
  auto e = ranker.cache().Get("a", 6 * 86400, {});
  ASSERT_NE(e, nullptr);
  EXPECT_EQ(e->tr->values().size(), 6u * 86400 / 300);
  EXPECT_EQ(e->response.curve_size(), 0);
  EXPECT_EQ(e->response.curve().ClearedCount(), 0);
  EXPECT_EQ(e->response.curve().Capacity(), 0);
}

// The cache drops the entries past the TTL, once per TTL (a host gone from
// the registry, a horizon no one asks for any more). Before, they stayed for
// good. An entry past its valid_until is not returned (the host fell silent)
// but stays until the TTL: a host that kept sampling may still use it.
TEST_F(RankerTest, CacheDropsStaleEntries) {
  auto entry = [&](int64_t valid_until) {
    auto e = std::make_shared<HostPrediction>();
    e->fetched = clock_.Now();
    e->response.set_valid_until_unix_seconds(valid_until);
    return e;
  };
  PredictionCache cache(clock_, absl::Seconds(60));
  cache.Put("a", 86400, entry(0));
  cache.Put("b", 86400, entry(0));
  cache.Put("b", 7 * 86400, entry(0));
  clock_.Advance(absl::Seconds(30));
  cache.Put("c", 86400, entry(0));
  EXPECT_EQ(cache.size(), 4u);
  clock_.Advance(absl::Seconds(31));  // a and b are 61 s old, c 31 s
  cache.Put("d", 86400, entry(0));
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.Get("a", 86400, {}), nullptr);
  EXPECT_NE(cache.Get("c", 86400, {}), nullptr);
  EXPECT_NE(cache.Get("d", 86400, {}), nullptr);
  // Past its valid_until (the host fell silent), within the TTL.
  PredictionCache slow(clock_, absl::Seconds(600));
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  slow.Put("x", 86400, entry(now + 10));
  slow.Put("y", 86400, entry(0));
  clock_.Advance(absl::Seconds(11));
  EXPECT_EQ(slow.Get("x", 86400, {}), nullptr);
  EXPECT_NE(slow.Get("y", 86400, {}), nullptr);
  clock_.Advance(absl::Seconds(590));
  slow.Put("z", 86400, entry(0));
  EXPECT_EQ(slow.size(), 1u);
  EXPECT_NE(slow.Get("z", 86400, {}), nullptr);
}

// An entry's valid_until (its newest sample + the revocation gap) moves on
// with the samples registered since: a host sampled every 6 s (gap 60 s)
// kept an entry for 60 s whatever the TTL; one that falls silent still
// loses it at its gap after its last registered sample.
TEST_F(RankerTest, CachedPredictionLivesWhileTheHostKeepsSampling) {
  PredictionCache cache(clock_, absl::Seconds(300));
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  auto e = std::make_shared<HostPrediction>();
  e->fetched = clock_.Now();
  e->response.set_last_sample_unix_seconds(now - 2);
  e->response.set_valid_until_unix_seconds(now - 2 + 60);
  e->version.has_condition = true;
  e->version.state = 1;
  cache.Put("a", 86400, e);
  HistoryVersion v = e->version;
  v.last_sample_unix = now - 2;
  clock_.Advance(absl::Seconds(58));
  EXPECT_NE(cache.Get("a", 86400, v), nullptr);
  clock_.Advance(absl::Seconds(1));  // past now - 2 + 60: silent since
  EXPECT_EQ(cache.Get("a", 86400, v), nullptr);
  v.last_sample_unix = now + 50;  // but it registered newer samples
  EXPECT_NE(cache.Get("a", 86400, v), nullptr);
  clock_.Advance(absl::Seconds(51));  // now + 110: the gap after now + 50
  EXPECT_NE(cache.Get("a", 86400, v), nullptr);
  clock_.Advance(absl::Seconds(1));
  EXPECT_EQ(cache.Get("a", 86400, v), nullptr);
}

// A host that falls silent: its cached prediction (valid until its newest
// sample plus its revocation gap) is dropped once that time has passed, long
// before the TTL, though no newer history was reported; a prediction without
// the bound lives out its TTL.
TEST_F(RankerTest, CachedPredictionOfASilentHostExpiresAtItsRevocation) {
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  hosts_.Set("a", FakeHost{36000, sojourn::v1::HOST_STATE_S1_IDLE, 0, now + 20});
  RankerConfig c = Config();
  c.cache_ttl = absl::Seconds(60);
  Ranker ranker(tr_, nullptr, clock_, c);
  std::vector<sojourn::v1::RegisteredHost> hosts = {Host("a", 2000), Host("b", 1000)};
  hosts[0].set_last_sample_unix_seconds(now - 10);
  hosts[1].set_last_sample_unix_seconds(now - 10);
  auto r = ranker.Rank(Job(3600), hosts);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->predictions_fetched(), 2);
  clock_.Advance(absl::Seconds(20));  // at valid_until: still holds
  r = ranker.Rank(Job(3600), hosts);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->predictions_cached(), 2);
  clock_.Advance(absl::Seconds(1));  // past it: a is fetched again, b is not
  r = ranker.Rank(Job(3600), hosts);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->predictions_fetched(), 1);
  EXPECT_EQ(r->predictions_cached(), 1);
  EXPECT_EQ(tr_.requests.back().host(), "a");
}

// With spread refreshes (the default), an entry expires at the first of its
// key's refresh times phase + k x TTL after its fetch: never later than the
// TTL, exactly the TTL for an entry fetched again at its refresh time, the
// phase the same for a key whenever it is fetched, and the phases of many
// keys spread over the TTL. Without, the TTL from the fetch.
TEST_F(RankerTest, SpreadRefreshTimesAreEachKeysPhaseOfTheTtl) {
  const absl::Duration ttl = absl::Seconds(60);
  PredictionCache spread(clock_, ttl, /*spread_refreshes=*/true);
  PredictionCache plain(clock_, ttl);
  const absl::Time t0 = clock_.Now();
  std::vector<int> per_second(60, 0);
  for (int i = 0; i < 600; ++i) {
    const std::string host = absl::StrCat("host-", i);
    for (int64_t horizon : {int64_t{86400}, int64_t{7 * 86400}}) {
      const absl::Time e = spread.ExpiryOf(host, horizon, t0);
      ASSERT_GT(e, t0) << host;
      ASSERT_LE(e, t0 + ttl) << host;
      // Fetched again just after its refresh time: the TTL to the next one.
      EXPECT_EQ(spread.ExpiryOf(host, horizon, e + absl::Milliseconds(1500)), e + ttl) << host;
      // Fetched at any time, it keeps its phase.
      const absl::Time later = t0 + absl::Seconds(1000 + 7 * i);
      const absl::Time e2 = spread.ExpiryOf(host, horizon, later);
      ASSERT_GT(e2, later);
      ASSERT_LE(e2, later + ttl);
      EXPECT_EQ((e2 - e) % ttl, absl::ZeroDuration()) << host;
      EXPECT_EQ(plain.ExpiryOf(host, horizon, t0), t0 + ttl);
      ++per_second[absl::ToInt64Seconds(absl::Ceil(e - t0, absl::Seconds(1))) - 1];
    }
  }
  // 1,200 keys over 60 s: 20 a second on average.
  EXPECT_LE(*std::max_element(per_second.begin(), per_second.end()), 45);
  EXPECT_GE(*std::min_element(per_second.begin(), per_second.end()), 5);
  // Get holds an entry up to its expiry and not after it.
  auto e = std::make_shared<HostPrediction>();
  e->fetched = t0;
  spread.Put("host-7", 86400, e);
  const absl::Time expiry = spread.ExpiryOf("host-7", 86400, t0);
  clock_.Set(expiry);
  EXPECT_NE(spread.Get("host-7", 86400, {}), nullptr);
  clock_.Set(expiry + absl::Nanoseconds(1));
  EXPECT_EQ(spread.Get("host-7", 86400, {}), nullptr);
  // No TTL, no cache: an entry expires when fetched.
  PredictionCache none(clock_, absl::ZeroDuration(), true);
  EXPECT_EQ(none.ExpiryOf("host-7", 86400, t0), t0);
}

// The ranker with spread refreshes: 300 hosts fetched by one ranking are not
// all fetched again by one ranking a TTL later (without the spread, every
// one was: a cold ranking each TTL); each is fetched again within the TTL
// and then every TTL exactly (without the spread, every TTL plus the time to
// the next ranking), so the refreshes cost no more than they did.
TEST_F(RankerTest, TtlRefreshesSpreadOverTheTtl) {
  hosts_.fallback = [](const std::string&, FakeHost*) { return true; };
  std::vector<sojourn::v1::RegisteredHost> hosts;
  for (int i = 0; i < 300; ++i) hosts.push_back(Host(absl::StrCat("h", i)));
  for (bool spread : {false, true}) {
    SCOPED_TRACE(spread ? "spread" : "plain");
    RankerConfig c = Config();
    c.cache_ttl = absl::Seconds(60);
    c.spread_cache_refreshes = spread;
    Ranker ranker(tr_, nullptr, clock_, c);
    const absl::Time t0 = clock_.Now();
    tr_.requests.clear();
    auto r = ranker.Rank(Job(3600), hosts);
    ASSERT_THAT(r.status(), IsOk());
    ASSERT_EQ(r->predictions_fetched(), 300);
    tr_.requests.clear();
    std::map<std::string, std::vector<absl::Duration>> fetched_at;  // after t0
    int max_fetched = 0;
    for (int k = 1; k <= 100; ++k) {  // a ranking every 2 s for 200 s
      clock_.Advance(absl::Seconds(2));
      r = ranker.Rank(Job(3600), hosts);
      ASSERT_THAT(r.status(), IsOk());
      ASSERT_EQ(r->predictions_fetched() + r->predictions_cached(), 300);
      max_fetched = std::max(max_fetched, r->predictions_fetched());
      for (const auto& q : tr_.requests) fetched_at[q.host()].push_back(clock_.Now() - t0);
      tr_.requests.clear();
    }
    ASSERT_EQ(fetched_at.size(), 300u);
    for (const auto& [host, at] : fetched_at) {
      ASSERT_GE(at.size(), 3u) << host;
      EXPECT_LE(at[0], absl::Seconds(62)) << host;  // the TTL, and the ranking after it
      // Spread: at the host's refresh time each TTL. Plain: the TTL after
      // the ranking that fetched it, so at the ranking after that.
      const absl::Duration every = spread ? absl::Seconds(60) : absl::Seconds(62);
      for (size_t j = 1; j < at.size(); ++j) EXPECT_EQ(at[j] - at[j - 1], every) << host;
    }
    if (spread) {
      EXPECT_LE(max_fetched, 30);  // 10 a ranking on average
    } else {
      EXPECT_EQ(max_fetched, 300);
    }
    clock_.Advance(absl::Hours(1));
  }
}

// Refreshes ahead (the default): a ranking that finds an entry in the last
// sixth of its life uses it and has it fetched again in the background, so
// after the first (cold) ranking and the next (hosts whose refresh time
// fell between them) no ranking of hosts that keep their condition waits
// for the predictor, while no prediction a ranking uses is
// older than the TTL, each host is fetched again at most once per 5/6 of
// the TTL, and the refreshes stay spread over the TTL. A host reporting new
// history is still fetched by the ranking. Without refreshes ahead the
// rankings after each host's expiry wait for it.
TEST_F(RankerTest, RefreshesAheadKeepRankingsFromWaiting) {
  hosts_.fallback = [](const std::string&, FakeHost*) { return true; };
  std::vector<sojourn::v1::RegisteredHost> hosts;
  for (int i = 0; i < 300; ++i) hosts.push_back(Host(absl::StrCat("h", i)));
  const absl::Duration ttl = absl::Seconds(60);
  const int64_t horizon = 86400;
  for (int threads : {0, 2}) {
    SCOPED_TRACE(absl::StrCat(threads, " refresh threads"));
    RankerConfig c = Config(4);
    c.cache_ttl = ttl;
    c.spread_cache_refreshes = true;
    c.refresh_threads = threads;
    auto ranker = std::make_unique<Ranker>(tr_, nullptr, clock_, c);
    auto r = ranker->Rank(Job(3600), hosts);
    ASSERT_THAT(r.status(), IsOk());
    ASSERT_EQ(r->predictions_fetched(), 300);
    EXPECT_EQ(r->predictions_refreshing(), 0);
    tr_.requests.clear();
    int first_waited = 0, waited = 0, refreshing = 0, max_refreshing = 0;
    for (int k = 1; k <= 100; ++k) {  // a ranking every 2 s for 200 s
      clock_.Advance(absl::Seconds(2));
      r = ranker->Rank(Job(3600), hosts);
      ASSERT_THAT(r.status(), IsOk());
      ASSERT_EQ(r->predictions_fetched() + r->predictions_cached(), 300);
      // The first ranking after the cold one fetches the hosts whose refresh
      // time fell before it (their first life, at most the TTL, is shorter
      // than the gap); no ranking waits for any after that.
      (k == 1 ? first_waited : waited) += r->predictions_fetched();
      refreshing += r->predictions_refreshing();
      max_refreshing = std::max(max_refreshing, r->predictions_refreshing());
      ranker->WaitForRefreshes();
      for (const auto& h : hosts) {  // what the next ranking would use
        auto e = ranker->cache().Get(h.host(), horizon, {});
        ASSERT_NE(e, nullptr) << h.host();
        ASSERT_LE(clock_.Now() - e->fetched, ttl) << h.host();
      }
    }
    std::map<std::string, int> fetches;
    for (const auto& q : tr_.requests) ++fetches[q.host()];
    EXPECT_EQ(ranker->refreshes(), refreshing);
    if (threads == 0) {
      EXPECT_EQ(refreshing, 0);
      EXPECT_GE(first_waited + waited, 900);  // every host at least 3 times in 200 s
    } else {
      EXPECT_LE(first_waited, 30);  // 10 on average: 300 hosts x 2 s / 60 s
      EXPECT_EQ(waited, 0);
      EXPECT_EQ(first_waited + refreshing, static_cast<int>(tr_.requests.size()));
      EXPECT_LE(max_refreshing, 30);  // 300 hosts over 60 s, 10 a ranking on average
      ASSERT_EQ(fetches.size(), 300u);
      for (const auto& [host, n] : fetches) {
        EXPECT_GE(n, 3) << host;  // within the first TTL, then every <= 60 s
        EXPECT_LE(n, 5) << host;  // at most every 50 s after the first
      }
      // New history for one host: the ranking fetches it, the others are cached.
      hosts[7].set_last_sample_unix_seconds(absl::ToUnixSeconds(clock_.Now()));
      clock_.Advance(absl::Seconds(2));
      r = ranker->Rank(Job(3600), hosts);
      ASSERT_THAT(r.status(), IsOk());
      EXPECT_EQ(r->predictions_fetched(), 1);
      EXPECT_EQ(r->predictions_cached(), 299);
    }
    ranker->WaitForRefreshes();
    tr_.requests.clear();
    ranker.reset();
    clock_.Advance(absl::Hours(1));
  }
}

// Refreshes ahead that cannot help do not ask the predictor: once stopped
// (the broker shutting down) the queued ones return and only those already
// running finish; a refresh whose entry a ranking replaced meanwhile is
// skipped; a refresh that fails is not tried again by each later ranking
// (the entry lives to its expiry, and the ranking after that fetches the
// host and reports the error). Every outcome is counted.
TEST_F(RankerTest, RefreshesAheadThatCannotHelpDoNotAskThePredictor) {
  std::atomic<bool> down{false};
  hosts_.fallback = [&down](const std::string&, FakeHost*) { return !down.load(); };
  std::vector<sojourn::v1::RegisteredHost> hosts;
  for (int i = 0; i < 20; ++i) hosts.push_back(Host(absl::StrCat("h", i)));
  RankerConfig c = Config(0);  // misses fetched on this thread
  c.cache_ttl = absl::Seconds(60);
  c.refresh_threads = 2;  // entries live 60 s from their fetch, due from 50 s
  // sojourn_broker_prediction_refreshes_total{outcome} in `m`; -1 if missing.
  auto refreshes = [](const Metrics& m, const std::string& outcome) {
    return sojourn::testing::MetricValue(m.Render(), "sojourn_broker_prediction_refreshes_total",
                                         {{"outcome", outcome}});
  };
  {
    Metrics metrics("broker");
    Ranker ranker(tr_, nullptr, clock_, c);
    ranker.ExportMetrics(metrics);
    EXPECT_EQ(refreshes(metrics, "ok"), 0);
    EXPECT_EQ(refreshes(metrics, "error"), 0);
    ASSERT_EQ(ranker.Rank(Job(3600), hosts)->predictions_fetched(), 20);
    // Stopped while both refresh threads are asking the predictor.
    const std::thread::id me = std::this_thread::get_id();
    absl::Mutex mu;
    int entered = 0;
    absl::Notification release;
    hosts_.on_predict = [&](const std::string&) {
      if (std::this_thread::get_id() == me) return;
      {
        absl::MutexLock l(&mu);
        ++entered;
      }
      release.WaitForNotification();
    };
    const int before = hosts_.predict_calls.load();
    clock_.Advance(absl::Seconds(55));
    auto r = ranker.Rank(Job(3600), hosts);
    ASSERT_THAT(r.status(), IsOk());
    EXPECT_EQ(r->predictions_cached(), 20);
    EXPECT_EQ(r->predictions_refreshing(), 20);
    {
      absl::MutexLock l(&mu);
      mu.Await(absl::Condition(+[](int* n) { return *n == 2; }, &entered));
    }
    ranker.StopRefreshes();
    release.Notify();
    ranker.WaitForRefreshes();
    hosts_.on_predict = nullptr;
    EXPECT_EQ(hosts_.predict_calls.load() - before, 2);
    EXPECT_EQ(ranker.refreshes(), 2);
    EXPECT_EQ(refreshes(metrics, "ok"), 2);
    EXPECT_EQ(refreshes(metrics, "skipped"), 18);
  }
  clock_.Advance(absl::Hours(1));
  {
    Metrics m2("broker");
    Ranker ranker(tr_, nullptr, clock_, c);
    ranker.ExportMetrics(m2);
    ASSERT_EQ(ranker.Rank(Job(3600), hosts)->predictions_fetched(), 20);
    // The predictor is down: each due entry is tried once, not by every
    // ranking; they serve to their expiry, then the ranking fetches them.
    down = true;
    const int before = hosts_.predict_calls.load();
    for (int k = 0; k < 5; ++k) {  // at 51..55 s
      clock_.Advance(absl::Seconds(k == 0 ? 51 : 1));
      auto r = ranker.Rank(Job(3600), hosts);
      ASSERT_THAT(r.status(), IsOk());
      EXPECT_EQ(r->predictions_cached(), 20);
      EXPECT_EQ(r->predictions_refreshing(), k == 0 ? 20 : 0) << k;
      ranker.WaitForRefreshes();
    }
    EXPECT_EQ(hosts_.predict_calls.load() - before, 20);
    EXPECT_EQ(refreshes(m2, "error"), 20);
    clock_.Advance(absl::Seconds(6));  // 61 s: expired
    auto r = ranker.Rank(Job(3600), hosts);
    ASSERT_THAT(r.status(), IsOk());
    EXPECT_EQ(r->predictions_fetched(), 20);
    for (const auto& h : r->hosts()) EXPECT_FALSE(h.eligible()) << h.host();
    EXPECT_EQ(hosts_.predict_calls.load() - before, 40);
    down = false;
    r = ranker.Rank(Job(3600), hosts);
    ASSERT_THAT(r.status(), IsOk());
    EXPECT_EQ(r->predictions_fetched(), 20);
    // A refresh queued behind a ranking that fetched the host is skipped.
    const absl::Time fetched = clock_.Now();
    clock_.Advance(absl::Seconds(52));
    absl::Notification hold;
    absl::Mutex mu;
    int held = 0;
    const std::thread::id me = std::this_thread::get_id();
    hosts_.on_predict = [&](const std::string&) {
      if (std::this_thread::get_id() == me) return;
      {
        absl::MutexLock l(&mu);
        if (++held > 2) return;
      }
      hold.WaitForNotification();
    };
    r = ranker.Rank(Job(3600), hosts);  // 20 refreshes, 2 held running
    ASSERT_THAT(r.status(), IsOk());
    EXPECT_EQ(r->predictions_refreshing(), 20);
    {
      absl::MutexLock l(&mu);
      mu.Await(absl::Condition(+[](int* n) { return *n == 2; }, &held));
    }
    clock_.Advance(absl::Seconds(10));  // all expired: this ranking fetches them
    const absl::Time refetched = clock_.Now();
    r = ranker.Rank(Job(3600), hosts);
    ASSERT_THAT(r.status(), IsOk());
    EXPECT_EQ(r->predictions_fetched(), 20);
    hold.Notify();
    ranker.WaitForRefreshes();
    hosts_.on_predict = nullptr;
    EXPECT_EQ(ranker.refreshes(), 20 + 2);  // the failed ones and the two held
    EXPECT_EQ(refreshes(m2, "ok"), 2);
    EXPECT_EQ(refreshes(m2, "skipped"), 18);
    // The two held refreshes asked before the ranking did: they did not
    // replace its entries.
    EXPECT_LT(fetched, refetched);
    for (const auto& h : hosts) {
      auto e = ranker.cache().Get(h.host(), 86400, {});
      ASSERT_NE(e, nullptr) << h.host();
      EXPECT_EQ(e->fetched, refetched) << h.host();
    }
  }
}

// Misses fetched concurrently give the same ranking as one by one.
TEST_F(RankerTest, FanOutMatchesSequential) {
  hosts_.fallback = [](const std::string& name, FakeHost* h) {
    const int i = std::stoi(name.substr(1));
    h->life_seconds = 3600.0 * (2 + i % 17);
    h->state = i % 11 == 0 ? sojourn::v1::HOST_STATE_S3_OVERLOADED : sojourn::v1::HOST_STATE_S1_IDLE;
    return true;
  };
  std::vector<sojourn::v1::RegisteredHost> hosts;
  for (int i = 0; i < 60; ++i) hosts.push_back(Host(absl::StrCat("h", i), 1000 + 37 * i));
  Ranker sequential(tr_, nullptr, clock_, Config(0));
  Ranker parallel(tr_, nullptr, clock_, Config(8));
  auto a = sequential.Rank(Job(4 * 3600), hosts);
  auto b = parallel.Rank(Job(4 * 3600), hosts);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->hosts_size(), 60);
  ASSERT_EQ(b->hosts_size(), 60);
  EXPECT_EQ(b->predictions_fetched(), 60);
  for (int i = 0; i < 60; ++i) {
    EXPECT_EQ(a->hosts(i).host(), b->hosts(i).host());
    EXPECT_EQ(a->hosts(i).rank(), b->hosts(i).rank());
  }
}

// Hosts outside the job's only_hosts are explained without a prediction: a
// ranking restricted to one host of 60 asks the predictor once, under every
// policy, and the rest say why they were left out.
TEST_F(RankerTest, OnlyHostsAreAskedFor) {
  hosts_.fallback = [](const std::string&, FakeHost*) { return true; };
  std::vector<sojourn::v1::RegisteredHost> hosts;
  for (int i = 0; i < 60; ++i) hosts.push_back(Host(absl::StrCat("h", i)));
  for (const char* policy : {"proactive", "tr", "condor", "round_robin"}) {
    Ranker ranker(tr_, nullptr, clock_, Config(8));
    auto req = Job(3600, policy);
    req.mutable_job()->add_only_hosts("h7");
    const int before = hosts_.predict_calls.load();
    auto r = ranker.Rank(req, hosts);
    ASSERT_THAT(r.status(), IsOk()) << policy;
    EXPECT_EQ(r->predictions_fetched(), 1) << policy;
    EXPECT_EQ(hosts_.predict_calls.load() - before, 1) << policy;
    ASSERT_EQ(r->hosts_size(), 60);
    int eligible = 0;
    for (const auto& h : r->hosts()) {
      if (h.eligible()) {
        ++eligible;
        EXPECT_EQ(h.host(), "h7");
        EXPECT_GT(h.tr_ratio(), 0) << policy;
      } else {
        EXPECT_EQ(h.reason(), "not among the job's allowed hosts") << policy << " " << h.host();
      }
    }
      EXPECT_EQ(eligible, 1) << policy;
  }
}

// A caller that went away (or whose deadline passed) stops the fan-out: no
// prediction is fetched after `stop` turns true, and the answer is
// DEADLINE_EXCEEDED, sequentially and with the fan-out pool.
TEST_F(RankerTest, AbandonedRankingStopsFetching) {
  hosts_.fallback = [](const std::string&, FakeHost*) { return true; };
  std::vector<sojourn::v1::RegisteredHost> hosts;
  for (int i = 0; i < 200; ++i) hosts.push_back(Host(absl::StrCat("h", i)));
  for (int fanout : {0, 8}) {
    Ranker ranker(tr_, nullptr, clock_, Config(fanout));
    const int before = hosts_.predict_calls.load();
    auto r = ranker.Rank(Job(3600), hosts, [] { return true; });
    EXPECT_TRUE(absl::IsDeadlineExceeded(r.status())) << r.status();
    EXPECT_EQ(hosts_.predict_calls.load() - before, 0) << fanout;

    // Turns true after the 10th question: at most the fetches already
    // started (one per pool thread) follow.
    std::atomic<int> asked{0};
    auto r2 = ranker.Rank(Job(3600), hosts, [&] { return asked.fetch_add(1) >= 10; });
    EXPECT_TRUE(absl::IsDeadlineExceeded(r2.status())) << r2.status();
    const int fetched = hosts_.predict_calls.load() - before;
    EXPECT_GE(fetched, 10) << fanout;
    EXPECT_LE(fetched, 10 + std::max(fanout, 1)) << fanout;

    // Never true: the whole ranking, the rest fetched now.
    auto r3 = ranker.Rank(Job(3600), hosts, [] { return false; });
    ASSERT_THAT(r3.status(), IsOk());
    EXPECT_EQ(r3->predictions_fetched() + r3->predictions_cached(), 200);
  }
}

// Malformed jobs and unknown policies are INVALID_ARGUMENT, before any call.
TEST_F(RankerTest, RejectsMalformedJobs) {
  Ranker ranker(tr_, nullptr, clock_, Config());
  EXPECT_TRUE(absl::IsInvalidArgument(ranker.Rank(Job(-5), {Host("a")}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ranker.Rank(Job(0), {Host("a")}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ranker.Rank(Job(60, "", -1), {Host("a")}).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ranker.Rank(Job(60, "astrology"), {Host("a")}).status()));
  // Beyond any registrable host (a gRPC audit: 1e308 ranked hosts of unknown
  // size first with an infinite completion time).
  EXPECT_TRUE(absl::IsInvalidArgument(ranker.Rank(Job(60, "", 0, 1e308), {Host("a")}).status()));
  const absl::Status above = ranker.Rank(Job(60, "", 0, 1e6 + 1), {Host("a")}).status();
  EXPECT_TRUE(absl::IsInvalidArgument(above));
  EXPECT_THAT(std::string(above.message()), ::testing::HasSubstr("got 1000001, 0, 0")) << above;
  auto big_mhz = Job(60);
  big_mhz.mutable_job()->set_min_cpu_mhz(1e308);
  EXPECT_TRUE(absl::IsInvalidArgument(ranker.Rank(big_mhz, {Host("a")}).status()));
  auto big_mem = Job(60);
  big_mem.mutable_job()->set_memory_mb(2e12);
  EXPECT_TRUE(absl::IsInvalidArgument(ranker.Rank(big_mem, {Host("a")}).status()));
  EXPECT_TRUE(tr_.requests.empty());
  EXPECT_TRUE(ranker.Rank(Job(60, "", 0, 1e6), {Host("a")}).ok());
}

// A TrSource whose predictor cannot be reached for the hosts in `down`
// (PredictorUnreachableError); the others are answered by FakeHosts.
class PartlyUnreachableTrSource final : public TrSource {
 public:
  PartlyUnreachableTrSource(FakeHosts& hosts, std::set<std::string> down)
      : hosts_(hosts), down_(std::move(down)) {}
  absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request) override {
    if (down_.count(request.host()) > 0) {
      return PredictorUnreachableError("127.0.0.1:7502", "failed to connect to all addresses");
    }
    return hosts_.Predict(request);
  }

 private:
  FakeHosts& hosts_;
  std::set<std::string> down_;
};

// The predictor unreachable for every host: UNAVAILABLE naming it, not a
// ranking saying "0 of 2 hosts can run it" (an outage is not "no host
// fits"). Failure-oblivious policies need no prediction and still rank.
TEST_F(RankerTest, PredictorUnreachableForEveryHostIsUnavailable) {
  PartlyUnreachableTrSource source(hosts_, {"a", "b"});
  Ranker ranker(source, nullptr, clock_, Config());
  for (const std::string policy : {"", "proactive", "tr"}) {
    auto r = ranker.Rank(Job(3600, policy), {Host("a", 2000), Host("b", 1000)});
    EXPECT_TRUE(absl::IsUnavailable(r.status())) << policy << ": " << r.status();
    EXPECT_NE(r.status().message().find("predictor 127.0.0.1:7502 unreachable"), std::string::npos)
        << r.status();
  }
  for (const std::string policy : {"condor", "round_robin"}) {
    auto r = ranker.Rank(Job(3600, policy), {Host("a", 2000), Host("b", 1000)});
    ASSERT_THAT(r.status(), IsOk()) << policy;
    EXPECT_TRUE(r->hosts(0).eligible()) << policy;
  }
  // An expired host needs no prediction: still an outage for the live one.
  auto r = ranker.Rank(Job(3600), {Host("a", 2000), Host("gone", 1000, /*live=*/false)});
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
}

// Only some hosts without a prediction: a ranking, with a per-host reason
// that names the predictor.
TEST_F(RankerTest, PredictorUnreachableForSomeHostsKeepsPerHostReasons) {
  PartlyUnreachableTrSource source(hosts_, {"b"});
  Ranker ranker(source, nullptr, clock_, Config());
  auto r = ranker.Rank(Job(3600), {Host("a", 2000), Host("b", 1000)});
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->hosts_size(), 2);
  EXPECT_EQ(r->hosts(0).host(), "a");
  EXPECT_TRUE(r->hosts(0).eligible());
  EXPECT_FALSE(r->hosts(1).eligible());
  EXPECT_NE(r->hosts(1).reason().find("no prediction: predictor 127.0.0.1:7502 unreachable"),
            std::string::npos)
      << r->hosts(1).reason();
  // Errors the predictor answers (a host's state manager down) are per host
  // even when every host has one: the predictor itself is up.
  Ranker answering(tr_, nullptr, clock_, Config());
  auto all_broken = answering.Rank(Job(3600), {Host("broken1"), Host("broken2")});
  ASSERT_THAT(all_broken.status(), IsOk());
  for (const auto& h : all_broken->hosts()) {
    EXPECT_NE(h.reason().find("statemgr down"), std::string::npos) << h.reason();
  }
}

// The outage check looks at the hosts the job may use: the predictor
// unreachable for the one allowed host is UNAVAILABLE, not a ranking in which
// every host is ineligible.
TEST_F(RankerTest, PredictorUnreachableForTheOnlyAllowedHostIsUnavailable) {
  PartlyUnreachableTrSource source(hosts_, {"a"});
  Ranker ranker(source, nullptr, clock_, Config());
  auto req = Job(3600);
  req.mutable_job()->add_only_hosts("a");
  auto r = ranker.Rank(req, {Host("a"), Host("b")});
  EXPECT_TRUE(absl::IsUnavailable(r.status())) << r.status();
}

// The one-shot helper keeps working (no cache, no load).
TEST_F(RankerTest, OneShotHelper) {
  auto r = RankHosts(Job(3600, "tr"), {Host("a"), Host("b")}, tr_);
  ASSERT_THAT(r.status(), IsOk());
  EXPECT_EQ(r->hosts(0).host(), "b");
}

}  // namespace
}  // namespace sojourn::broker
