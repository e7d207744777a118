// The adaptive monitoring period (paper 001 section IV.B): the AdaptivePeriod
// rule on its own, then the monitor's schedule driven through Monitor::Step
// with a FakeClock and a directory laid out like /proc whose counters the test
// advances (the host runs at a chosen load between two samples). No threads,
// no sleeps: each Step takes the sample due and says when the next one is.
#include "services/monitor/adaptive_period.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "gtest/gtest.h"
#include "models/availability/state.h"
#include "services/monitor/monitor.h"
#include "services/monitor/proc_sampler.h"
#include "services/monitor/sample_sender.h"
#include "tests/test_util.h"

namespace sojourn::monitor {
namespace {

using sojourn::testing::MetricValue;

constexpr int64_t kStart = 1'700'000'000;  // FakeClock's default start
constexpr double kIdle = 0.05;             // S1, below Th1 = 0.2
constexpr double kBusy = 0.4;              // S2
constexpr double kSpike = 0.9;             // above Th2 = 0.6

AdaptivePeriodConfig Config() {
  AdaptivePeriodConfig c;
  c.min_period = absl::Seconds(1);
  c.max_period = absl::Seconds(30);
  c.stable = absl::Seconds(60);
  c.extra_samples_above = absl::Seconds(6);  // main.cc: the nominal --period_seconds
  return c;  // the classifier's defaults: Th1 0.2, Th2 0.6, grace 60 s
}

HostSample At(int64_t t, double load) {
  HostSample s;
  s.unix_seconds = t;
  s.cpu_load = load;
  s.free_mem_mb = 4096;
  return s;
}

int64_t Secs(absl::Duration d) { return absl::ToInt64Seconds(d); }

// Feeds regular samples of `load`, one period apart, from `*t` until the
// period is the maximum; `*t` ends at the last sample's time.
void RunToMax(AdaptivePeriod& p, int64_t* t, double load) {
  for (int i = 0; i < 10000 && p.period() < p.config().max_period; ++i) {
    *t += Secs(p.period());
    ASSERT_FALSE(p.Observe(At(*t, load), AdaptivePeriod::Kind::kRegular));
  }
  ASSERT_EQ(p.period(), p.config().max_period);
}

// The period doubles at the first regular sample at least `stable` after the
// previous doubling, never exceeds the maximum and stays there.
TEST(AdaptivePeriodTest, DoublesAfterStableTimeUpToMax) {
  const AdaptivePeriodConfig cfg = Config();
  AdaptivePeriod p(cfg, /*seed=*/1);
  int64_t t = kStart;
  EXPECT_FALSE(p.Observe(At(t, kIdle), AdaptivePeriod::Kind::kRegular));
  EXPECT_EQ(p.period(), cfg.min_period);
  int64_t level_since = t;
  std::vector<int64_t> levels = {Secs(p.period())};
  while (t < kStart + 3600) {
    const absl::Duration before = p.period();
    t += Secs(before);
    ASSERT_FALSE(p.Observe(At(t, kIdle), AdaptivePeriod::Kind::kRegular)) << t;
    if (p.period() != before) {
      EXPECT_EQ(p.period(), std::min(2 * before, cfg.max_period)) << t;
      EXPECT_GE(t - level_since, Secs(cfg.stable)) << "doubled too early at " << t;
      // ... and at the first sample that far: the previous one was not.
      EXPECT_LT(t - Secs(before) - level_since, Secs(cfg.stable)) << "doubled late at " << t;
      level_since = t;
      levels.push_back(Secs(p.period()));
    }
    ASSERT_LE(p.period(), cfg.max_period);
  }
  // 1, 2, 4, 8, 16, then capped at 30.
  EXPECT_EQ(levels, (std::vector<int64_t>{1, 2, 4, 8, 16, 30}));
  EXPECT_EQ(p.period(), cfg.max_period);
}

// A change of state at a regular sample drops the period to its minimum and
// the stable time starts again from there.
TEST(AdaptivePeriodTest, StateChangeAtRegularSampleResetsToMin) {
  const AdaptivePeriodConfig cfg = Config();
  AdaptivePeriod p(cfg, 1);
  int64_t t = kStart;
  p.Observe(At(t, kIdle), AdaptivePeriod::Kind::kRegular);
  RunToMax(p, &t, kIdle);
  t += Secs(p.period());
  EXPECT_TRUE(p.Observe(At(t, kBusy), AdaptivePeriod::Kind::kRegular));  // S1 -> S2
  EXPECT_EQ(p.period(), cfg.min_period);
  EXPECT_EQ(p.condition(), "S2 (load mid)");
  const int64_t changed_at = t;
  while (t + 1 - changed_at < Secs(cfg.stable)) {
    ++t;
    EXPECT_FALSE(p.Observe(At(t, kBusy), AdaptivePeriod::Kind::kRegular));
    EXPECT_EQ(p.period(), cfg.min_period) << t - changed_at << " s after the change";
  }
  ++t;
  EXPECT_FALSE(p.Observe(At(t, kBusy), AdaptivePeriod::Kind::kRegular));
  EXPECT_EQ(p.period(), 2 * cfg.min_period);
}

// A transient spike above Th2 keeps the classifier's state (S1) but is a
// change for the period: the gateway suspends the guests during it, and its
// end and a turn into S3 must be seen at the minimum period.
TEST(AdaptivePeriodTest, SpikeStartAndEndAreChanges) {
  const AdaptivePeriodConfig cfg = Config();
  AdaptivePeriod p(cfg, 1);
  int64_t t = kStart;
  p.Observe(At(t, kIdle), AdaptivePeriod::Kind::kRegular);
  RunToMax(p, &t, kIdle);
  availability::StateClassifier classifier(cfg.classifier);
  ASSERT_EQ(classifier.Add(At(t, kIdle)), availability::HostState::kS1);
  t += Secs(p.period());
  // The classifier alone sees no state change here...
  EXPECT_EQ(classifier.Add(At(t, kSpike)), availability::HostState::kS1);
  EXPECT_TRUE(classifier.in_spike());
  // ... the adaptive period does.
  EXPECT_TRUE(p.Observe(At(t, kSpike), AdaptivePeriod::Kind::kRegular));
  EXPECT_EQ(p.period(), cfg.min_period);
  EXPECT_EQ(p.condition(), "S1 (load high: spike)");
  ++t;
  EXPECT_FALSE(p.Observe(At(t, kSpike), AdaptivePeriod::Kind::kRegular));
  ++t;
  EXPECT_TRUE(p.Observe(At(t, kIdle), AdaptivePeriod::Kind::kRegular));  // the spike ends
  EXPECT_EQ(p.condition(), "S1 (load low)");
}

// A random extra sample that shows a change drops the period to the minimum;
// one that shows none leaves it, and extra samples never double it.
TEST(AdaptivePeriodTest, ExtraSampleDecreasesOnlyOnChange) {
  const AdaptivePeriodConfig cfg = Config();
  AdaptivePeriod p(cfg, 1);
  int64_t t = kStart;
  p.Observe(At(t, kIdle), AdaptivePeriod::Kind::kRegular);
  // Only extra samples, for far longer than the stable time: no doubling.
  for (int i = 0; i < 300; ++i) {
    ++t;
    EXPECT_FALSE(p.Observe(At(t, kIdle), AdaptivePeriod::Kind::kExtra));
  }
  EXPECT_EQ(p.period(), cfg.min_period);
  RunToMax(p, &t, kIdle);
  t += 7;
  EXPECT_FALSE(p.Observe(At(t, kIdle), AdaptivePeriod::Kind::kExtra));
  EXPECT_EQ(p.period(), cfg.max_period);
  t += 5;
  EXPECT_TRUE(p.Observe(At(t, kBusy), AdaptivePeriod::Kind::kExtra));
  EXPECT_EQ(p.period(), cfg.min_period);
}

// The extra sample's offset is uniform over the whole seconds strictly inside
// the period, reproducible from the seed, and absent at the minimum period and
// at periods up to extra_samples_above.
TEST(AdaptivePeriodTest, ExtraOffsetsUniformInsideThePeriod) {
  const AdaptivePeriodConfig cfg = Config();
  // Climbs to the maximum period on an idle host, drawing an offset after
  // each regular sample as the monitor does; sorts the periods by whether an
  // offset came.
  auto climb = [&](AdaptivePeriod& a, std::set<int64_t>* with, std::set<int64_t>* without) {
    int64_t t = kStart;
    a.Observe(At(t, kIdle), AdaptivePeriod::Kind::kRegular);
    for (int i = 0; i < 10000 && a.period() < cfg.max_period; ++i) {
      (a.DrawExtraOffset().has_value() ? with : without)->insert(Secs(a.period()));
      t += Secs(a.period());
      ASSERT_FALSE(a.Observe(At(t, kIdle), AdaptivePeriod::Kind::kRegular));
    }
    ASSERT_EQ(a.period(), cfg.max_period);
  };
  AdaptivePeriod p(cfg, 42);
  EXPECT_FALSE(p.DrawExtraOffset().has_value());  // at the minimum period
  std::set<int64_t> with_extra, without_extra;
  climb(p, &with_extra, &without_extra);
  EXPECT_EQ(without_extra, (std::set<int64_t>{1, 2, 4}));  // up to the nominal 6 s
  EXPECT_EQ(with_extra, (std::set<int64_t>{8, 16}));
  const int64_t period = Secs(p.period());
  std::map<int64_t, int> seen;
  std::vector<int64_t> first;
  double sum = 0;
  constexpr int kDraws = 3000;
  for (int i = 0; i < kDraws; ++i) {
    std::optional<absl::Duration> o = p.DrawExtraOffset();
    ASSERT_TRUE(o.has_value());
    ASSERT_EQ(*o, absl::Seconds(Secs(*o))) << "not a whole second";
    ASSERT_GE(Secs(*o), 1);
    ASSERT_LE(Secs(*o), period - 1);
    ++seen[Secs(*o)];
    sum += static_cast<double>(Secs(*o));
    if (first.size() < 20) first.push_back(Secs(*o));
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(period - 1));  // every second 1..29 drawn
  for (const auto& [offset, n] : seen) {
    // Expected ~103 each; a uniform draw stays well within [40, 200].
    EXPECT_GT(n, 40) << offset;
    EXPECT_LT(n, 200) << offset;
  }
  EXPECT_NEAR(sum / kDraws, period / 2.0, 0.6);
  // The same seed draws the same offsets.
  AdaptivePeriod again(cfg, 42);
  std::set<int64_t> ignored;
  climb(again, &ignored, &ignored);
  std::vector<int64_t> replay;
  for (int i = 0; i < 20; ++i) replay.push_back(Secs(*again.DrawExtraOffset()));
  EXPECT_EQ(replay, first);
}

// A directory laid out like /proc whose CPU counters advance as a host at a
// given load would (1000 ticks a second in all).
class FakeProc {
 public:
  explicit FakeProc(int64_t start_unix) : t_(start_unix) { Write(); }

  // The host ran at `load` from the last time to `unix_seconds`.
  void RunUntil(int64_t unix_seconds, double load) {
    const int64_t dt = unix_seconds - t_;
    const int64_t busy = std::llround(load * 1000);
    busy_ += static_cast<uint64_t>(busy * dt);
    idle_ += static_cast<uint64_t>((1000 - busy) * dt);
    t_ = unix_seconds;
    Write();
  }
  // Reads of /proc fail until Repair().
  void Break() {
    broken_ = true;
    std::filesystem::remove(dir_.File("stat"));
  }
  void Repair() {
    broken_ = false;
    Write();
  }
  std::string root() const { return dir_.path(); }

 private:
  void Write() {
    if (broken_) return;
    std::ofstream(dir_.File("stat")) << "cpu  " << busy_ << " 0 0 " << idle_
                                     << " 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n";
    std::ofstream(dir_.File("meminfo")) << "MemTotal:       8388608 kB\n"
                                           "MemAvailable:   4194304 kB\n";
    std::ofstream(dir_.File("vmstat")) << "pswpin 0\npswpout 0\n";
  }
  sojourn::testing::TempDir dir_;
  int64_t t_;
  uint64_t busy_ = 1000;
  uint64_t idle_ = 1000;
  bool broken_ = false;
};

// One monitor on a fake /proc and a FakeClock, its state manager unreachable
// (the samples stay buffered), driven one Step at a time.
class Host {
 public:
  // Without `adaptive`, the fixed period.
  explicit Host(std::optional<AdaptivePeriodConfig> adaptive, uint64_t seed = 7,
                absl::Duration period = absl::Seconds(6))
      : proc_(kStart), sampler_(proc_.root()), metrics_("monitor-test") {
    SenderConfig sc;
    sc.host = "adaptive-host";
    sc.statemgr_address = "127.0.0.1:1";
    sc.period_seconds = 6;
    sender_ = std::make_unique<SampleSender>(sc, clock_);
    if (adaptive.has_value()) adaptive_.emplace(*adaptive, seed);
    monitor_ = std::make_unique<Monitor>(sampler_, *sender_, clock_, metrics_, period, nullptr,
                                         adaptive_.has_value() ? &*adaptive_ : nullptr);
    next_ = {clock_.Now(), false};
  }

  struct Taken {
    int64_t at = 0;
    bool extra = false;
    std::optional<HostSample> sample;  // what the monitor sampled, if anything
  };
  // Moves the clock to the next due sample, the host having run at `load`
  // since the previous one, and lets the monitor take it.
  Taken Step(double load) {
    Taken taken;
    taken.at = absl::ToUnixSeconds(next_.at);
    taken.extra = next_.extra;
    clock_.Set(next_.at);
    proc_.RunUntil(taken.at, load);
    const double before = MetricValue(metrics_.Render(), "sojourn_monitor_samples_total");
    next_ = monitor_->Step();
    if (MetricValue(metrics_.Render(), "sojourn_monitor_samples_total") > before) {
      taken.sample = monitor_->last_sample();
      EXPECT_EQ(taken.sample->unix_seconds, taken.at);
    }
    EXPECT_GT(next_.at, clock_.Now()) << "the next sample must be in the future";
    return taken;
  }
  // Steps at `load` until a regular sample is taken at the maximum period;
  // returns that step.
  Taken StepToMax(double load) {
    Taken last;
    for (int i = 0; i < 10000; ++i) {
      last = Step(load);
      if (!last.extra && last.sample.has_value() &&
          monitor_->period() == adaptive_->config().max_period) {
        break;
      }
    }
    EXPECT_EQ(monitor_->period(), adaptive_->config().max_period);
    return last;
  }

  const Monitor::NextSample& next() const { return next_; }
  Monitor& monitor() { return *monitor_; }
  FakeProc& proc() { return proc_; }
  double metric(const std::string& name) const { return MetricValue(metrics_.Render(), name); }

 private:
  FakeClock clock_;
  FakeProc proc_;
  ProcSampler sampler_;
  Metrics metrics_;
  std::unique_ptr<SampleSender> sender_;
  std::optional<AdaptivePeriod> adaptive_;
  std::unique_ptr<Monitor> monitor_;
  Monitor::NextSample next_;
};

// Without --adaptive_period the monitor samples exactly every period from its
// start, as it always did, whatever the load does, and never takes an extra
// sample; the loads are those of Tick() called every period by hand.
TEST(AdaptiveMonitorTest, DefaultOffKeepsTheFixedSchedule) {
  Host host(std::nullopt);
  const std::vector<double> loads = {kIdle, kIdle, kSpike, kBusy, kIdle, kIdle, kSpike,
                                     kSpike, kIdle, kBusy, kIdle, kIdle};
  for (size_t k = 0; k < loads.size(); ++k) {
    const Host::Taken taken = host.Step(loads[k]);
    EXPECT_EQ(taken.at, kStart + 6 * static_cast<int64_t>(k));
    EXPECT_FALSE(taken.extra);
    EXPECT_FALSE(host.next().extra);
    EXPECT_EQ(host.next().at, absl::FromUnixSeconds(kStart + 6 * static_cast<int64_t>(k + 1)));
    EXPECT_EQ(taken.sample.has_value(), k > 0);  // the first reading starts the interval
    if (k > 0) {
      EXPECT_NEAR(taken.sample->cpu_load, loads[k], 1e-9);
    }
    EXPECT_EQ(host.monitor().period(), absl::Seconds(6));
  }
  EXPECT_EQ(host.metric("sojourn_monitor_samples_total"), static_cast<double>(loads.size() - 1));
  EXPECT_EQ(host.metric("sojourn_monitor_period_seconds"), 6);
  EXPECT_EQ(host.metric("sojourn_monitor_extra_samples_total"), -1);  // not exported
}

// With it: regular samples 1, 2, 4, 8, 16 and then 30 s apart as the host
// stays idle, each level held for the stable time, one random extra sample
// strictly inside each period longer than the nominal 6 s, the gauge
// following. Once at 30 s, fewer samples than a fixed 6 s period takes.
TEST(AdaptiveMonitorTest, PeriodDoublesToMaxWithExtraSamplesInside) {
  const AdaptivePeriodConfig cfg = Config();
  Host host(cfg);
  std::vector<int64_t> regular_gaps;
  std::optional<int64_t> last_regular;
  int extras = 0, samples = 0, intervals_above_min = 0;
  int samples_at_max = 0;
  std::optional<int64_t> max_since;
  std::optional<int64_t> extra_in_interval;
  int64_t prev_at = 0;
  while (true) {
    const Host::Taken t = host.Step(kIdle);
    if (t.sample.has_value()) ++samples;
    if (t.sample.has_value() && max_since.has_value()) ++samples_at_max;
    if (prev_at != 0) {  // every sample in its own second
      EXPECT_GT(t.at, prev_at);
    }
    prev_at = t.at;
    if (t.extra) {
      ++extras;
      ASSERT_TRUE(last_regular.has_value());
      EXPECT_FALSE(extra_in_interval.has_value()) << "two extra samples in one period";
      extra_in_interval = t.at;
      EXPECT_FALSE(host.next().extra);
      continue;
    }
    if (last_regular.has_value()) {
      const int64_t gap = t.at - *last_regular;
      regular_gaps.push_back(gap);
      if (gap > Secs(cfg.extra_samples_above)) {
        ++intervals_above_min;
        ASSERT_TRUE(extra_in_interval.has_value()) << "no extra sample in a " << gap << " s period";
        EXPECT_GT(*extra_in_interval, *last_regular);
        EXPECT_LT(*extra_in_interval, t.at);
      } else {
        EXPECT_FALSE(extra_in_interval.has_value());
      }
    }
    extra_in_interval.reset();
    last_regular = t.at;
    if (!max_since.has_value() && host.monitor().period() == cfg.max_period) max_since = t.at;
    EXPECT_EQ(host.metric("sojourn_monitor_period_seconds"),
              absl::ToDoubleSeconds(host.monitor().period()));
    if (t.at > kStart + 900) break;
  }
  // The first regular gap is the retry after the first reading (no sample yet).
  ASSERT_GT(regular_gaps.size(), 10u);
  EXPECT_EQ(regular_gaps.front(), Secs(cfg.min_period));
  for (size_t i = 1; i < regular_gaps.size(); ++i) {
    EXPECT_TRUE(regular_gaps[i] == regular_gaps[i - 1] ||
                regular_gaps[i] == std::min<int64_t>(2 * regular_gaps[i - 1], 30))
        << "gap " << regular_gaps[i] << " after " << regular_gaps[i - 1];
  }
  EXPECT_EQ(regular_gaps.back(), Secs(cfg.max_period));
  EXPECT_EQ(std::set<int64_t>(regular_gaps.begin(), regular_gaps.end()),
            (std::set<int64_t>{1, 2, 4, 8, 16, 30}));
  EXPECT_EQ(extras, intervals_above_min);
  EXPECT_EQ(host.metric("sojourn_monitor_extra_samples_total"), static_cast<double>(extras));
  EXPECT_EQ(host.metric("sojourn_monitor_samples_total"), static_cast<double>(samples));
  // Every sample, extra ones too, is buffered for the (unreachable) state
  // manager: an extra sample's interval is not lost to it.
  EXPECT_EQ(host.metric("sojourn_monitor_unacknowledged_samples"), static_cast<double>(samples));
  EXPECT_EQ(host.metric("sojourn_monitor_period_seconds"), 30);
  // At the maximum: two samples (one regular, one extra) per 30 s, where a
  // fixed 6 s monitor takes five.
  ASSERT_TRUE(max_since.has_value());
  const int64_t at_max = last_regular.value() - *max_since;
  ASSERT_GE(at_max, 300);
  EXPECT_EQ(samples_at_max, 2 * at_max / Secs(cfg.max_period));
  EXPECT_LT(samples_at_max, at_max / 6);
}

// A change of state at a regular sample: the next sample is a minimum period
// later, not an extra one, and the gauge says so.
TEST(AdaptiveMonitorTest, ChangeAtRegularSampleResetsToMin) {
  const AdaptivePeriodConfig cfg = Config();
  Host host(cfg);
  host.StepToMax(kIdle);
  // Skip a pending extra sample, if any, at the same load.
  while (host.next().extra) host.Step(kIdle);
  const Host::Taken t = host.Step(kBusy);
  ASSERT_FALSE(t.extra);
  ASSERT_TRUE(t.sample.has_value());
  EXPECT_NEAR(t.sample->cpu_load, kBusy, 1e-9);
  EXPECT_EQ(host.monitor().period(), cfg.min_period);
  EXPECT_FALSE(host.next().extra);
  EXPECT_EQ(host.next().at, absl::FromUnixSeconds(t.at) + cfg.min_period);
  EXPECT_EQ(host.metric("sojourn_monitor_period_seconds"), 1);
}

// A change that only the random extra sample sees: the period drops to the
// minimum at once and the next regular sample is a minimum period after the
// extra one instead of at the end of the long period.
TEST(AdaptiveMonitorTest, ChangeSeenByExtraSampleResetsToMin) {
  const AdaptivePeriodConfig cfg = Config();
  for (uint64_t seed : {1u, 2u, 3u}) {
    Host host(cfg, seed);
    Host::Taken regular = host.StepToMax(kIdle);
    ASSERT_TRUE(host.next().extra) << "an extra sample follows a regular one at 30 s";
    const int64_t regular_due = regular.at + Secs(cfg.max_period);
    const Host::Taken extra = host.Step(kBusy);
    ASSERT_TRUE(extra.extra);
    ASSERT_LT(extra.at, regular_due);
    ASSERT_TRUE(extra.sample.has_value());
    EXPECT_NEAR(extra.sample->cpu_load, kBusy, 1e-9);
    EXPECT_EQ(host.monitor().period(), cfg.min_period) << "seed " << seed;
    EXPECT_FALSE(host.next().extra);
    EXPECT_EQ(host.next().at, absl::FromUnixSeconds(extra.at) + cfg.min_period);
    EXPECT_EQ(host.metric("sojourn_monitor_period_seconds"), 1);
  }
}

// An extra sample splits the interval: it reports the load since the previous
// regular sample, the next regular sample the load since the extra one (not
// an average that the extra sample disturbed), and the regular grid does not
// move. Both loads stay in one band, so the period is kept.
TEST(AdaptiveMonitorTest, ExtraSampleShortensIntervalsWithoutCorruptingLoad) {
  const AdaptivePeriodConfig cfg = Config();
  Host host(cfg);
  const Host::Taken r0 = host.StepToMax(kIdle);
  ASSERT_TRUE(host.next().extra);
  // A second sampler on the same /proc that reads only at the regular
  // samples: what a monitor without the extra sample would have reported.
  ProcSampler witness(host.proc().root());
  ASSERT_TRUE(witness.Sample(r0.at, {}).ok());
  const Host::Taken e = host.Step(0.02);
  ASSERT_TRUE(e.extra);
  ASSERT_TRUE(e.sample.has_value());
  EXPECT_NEAR(e.sample->cpu_load, 0.02, 1e-9);
  EXPECT_FALSE(host.next().extra);
  EXPECT_EQ(host.next().at, absl::FromUnixSeconds(r0.at) + cfg.max_period);
  const Host::Taken r1 = host.Step(0.15);
  ASSERT_FALSE(r1.extra);
  ASSERT_TRUE(r1.sample.has_value());
  EXPECT_NEAR(r1.sample->cpu_load, 0.15, 1e-9);
  EXPECT_EQ(r1.at, r0.at + Secs(cfg.max_period));
  EXPECT_EQ(host.monitor().period(), cfg.max_period);
  // Together the two carry the interval's whole load: their time-weighted
  // mean is the witness's one sample over [r0, r1].
  auto whole = witness.Sample(r1.at, {});
  ASSERT_TRUE(whole.ok() && whole->has_value());
  const double mean = (e.sample->cpu_load * static_cast<double>(e.at - r0.at) +
                       r1.sample->cpu_load * static_cast<double>(r1.at - e.at)) /
                      static_cast<double>(r1.at - r0.at);
  EXPECT_NEAR((*whole)->cpu_load, mean, 1e-9);
}

// A regular sample that gives nothing (a failed read of /proc) is retried a
// minimum period later, so one lost sample at the maximum period never makes
// a gap of two maximum periods; then the schedule goes on as before.
TEST(AdaptiveMonitorTest, LostRegularSampleRetriedAtMinPeriod) {
  const AdaptivePeriodConfig cfg = Config();
  Host host(cfg);
  host.StepToMax(kIdle);
  while (host.next().extra) host.Step(kIdle);
  int64_t last_sample = host.monitor().last_sample()->unix_seconds;
  host.proc().Break();
  const Host::Taken lost = host.Step(kIdle);
  EXPECT_FALSE(lost.sample.has_value());
  EXPECT_EQ(host.metric("sojourn_monitor_sample_errors_total"), 1);
  EXPECT_FALSE(host.next().extra);
  EXPECT_EQ(host.next().at, absl::FromUnixSeconds(lost.at) + cfg.min_period);
  host.proc().Repair();
  const Host::Taken retry = host.Step(kIdle);
  ASSERT_TRUE(retry.sample.has_value());
  EXPECT_LE(retry.at - last_sample, Secs(cfg.max_period + cfg.min_period));
  EXPECT_EQ(host.monitor().period(), cfg.max_period);  // nothing changed on the host
  // Back on the maximum period from the retry.
  Host::Taken next = host.Step(kIdle);
  if (next.extra) next = host.Step(kIdle);
  EXPECT_EQ(next.at, retry.at + Secs(cfg.max_period));
}

}  // namespace
}  // namespace sojourn::monitor
