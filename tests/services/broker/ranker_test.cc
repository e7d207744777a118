// The broker's ranker: policies on fake predictions (TR(t) = 1 - t / life,
// so every figure is derived by hand), the reasons for hosts that cannot take
// the job, the prediction cache and its invalidation, and the fan-out.
#include "services/broker/ranker.h"

#include <cmath>
#include <map>
#include <set>
#include <utility>

#include "gtest/gtest.h"
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
  RankerConfig Config(int fanout = 0) {
    RankerConfig c;
    c.fanout_threads = fanout;
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
  EXPECT_TRUE(absl::IsInvalidArgument(ranker.Rank(Job(60, "", 0, 1e6 + 1), {Host("a")}).status()));
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
