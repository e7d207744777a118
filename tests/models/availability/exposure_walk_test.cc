// CountFailureExposure (frailty.h) and CountBandExposure (load_band.h) walk a
// host's grid hour by hour and run by run, doing the clock arithmetic once
// per local hour. These tests hold them to the point-by-point counts they
// replaced (kept here as the reference), on random series with grid steps
// that do and do not divide an hour, steps longer than an hour, time zones
// off the whole hour, excluded points and every kind of history end.
#include <algorithm>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "models/availability/frailty.h"
#include "models/availability/load_band.h"
#include "models/availability/sojourn_stats.h"
#include "models/availability/window.h"

namespace sojourn::availability {
namespace {

FailureExposure ReferenceFailureExposure(const StateSeries& series, int64_t end_unix,
                                         int utc_offset_seconds,
                                         const std::function<bool(size_t t)>& exclude) {
  FailureExposure out;
  const int64_t step = series.step_seconds;
  const int64_t first_day =
      (LocalMidnight(series.start_unix, utc_offset_seconds) + utc_offset_seconds) / 86400;
  const int64_t span_end = std::min<int64_t>(
      end_unix, series.start_unix + static_cast<int64_t>(series.states.size()) * step);
  const int64_t last_day =
      (LocalMidnight(span_end - 1, utc_offset_seconds) + utc_offset_seconds) / 86400;
  const int64_t mid_day = first_day + (last_day - first_day + 1) / 2;
  for (size_t t = 0; t + 1 < series.states.size(); ++t) {
    const int64_t t_unix = series.start_unix + static_cast<int64_t>(t) * step;
    if (t_unix + step > end_unix) break;
    if (IsFailure(series.states[t])) continue;
    if (exclude && exclude(t)) continue;
    const int64_t midnight = LocalMidnight(t_unix, utc_offset_seconds);
    const int k = (midnight + utc_offset_seconds) / 86400 < mid_day ? 0 : 1;
    const int d = DayTypeOf(t_unix, utc_offset_seconds) == DayType::kWeekend ? 1 : 0;
    const int h = static_cast<int>((t_unix - midnight) / 3600);
    out.up_steps[k][d][h] += 1;
    if (IsFailure(series.states[t + 1])) out.failures[k][d][h] += 1;
  }
  return out;
}

BandExposure ReferenceBandExposure(const StateSeries& series, int64_t end_unix,
                                   int utc_offset_seconds, int64_t cap_steps,
                                   int64_t recent_seconds, int64_t long_seconds,
                                   const std::function<bool(size_t t)>& exclude) {
  struct Stratum {
    double exposure[2] = {0, 0};
    double exits[2][2] = {{0, 0}, {0, 0}};
  };
  BandExposure out;
  const auto& st = series.states;
  const int64_t n = static_cast<int64_t>(st.size());
  const int64_t step = series.step_seconds;
  if (n == 0 || end_unix < series.start_unix) return out;
  const int64_t last_ok = std::min(n - 1, (end_unix - series.start_unix) / step);
  if (cap_steps > last_ok) return out;
  std::vector<int64_t> change_next(n);
  change_next[n - 1] = n;
  for (int64_t t = n - 2; t >= 0; --t) {
    change_next[t] = st[t + 1] != st[t] ? t + 1 : change_next[t + 1];
  }
  const std::vector<int64_t> ages = StateAges(st);
  const int64_t recent_steps = recent_seconds > 0 ? (recent_seconds + step - 1) / step : 0;
  const int64_t long_steps =
      recent_steps > 0 && long_seconds > recent_seconds ? (long_seconds + step - 1) / step : 0;
  std::vector<Stratum> strata(2 * 24 * 2 * 4);
  for (int64_t t = 0; t + cap_steps <= last_ok; ++t) {
    const HostState s = st[t];
    const uint8_t band = series.load_band[t];
    if (IsFailure(s) || band > 1) continue;
    if (exclude && exclude(static_cast<size_t>(t))) continue;
    const int64_t at = series.start_unix + t * step;
    const int hour = static_cast<int>((at - LocalMidnight(at, utc_offset_seconds)) / 3600);
    const int dt = DayTypeOf(at, utc_offset_seconds) == DayType::kWeekend ? 1 : 0;
    int cls = 0;
    if (ages[t] < 0) {
      cls = 3;
    } else if (recent_steps > 0) {
      cls = AgeClassOf(ages[t], recent_steps, long_steps);
    }
    Stratum& z = strata[((dt * 24 + hour) * 2 + (StateIndex(s) - 1)) * 4 + cls];
    const int64_t x = change_next[t] - t;
    if (x <= cap_steps) {
      z.exposure[band] += static_cast<double>(x);
      z.exits[band][IsFailure(st[change_next[t]]) ? 1 : 0] += 1;
    } else {
      z.exposure[band] += static_cast<double>(cap_steps);
    }
  }
  for (int dt = 0; dt < 2; ++dt) {
    for (int hour = 0; hour < 24; ++hour) {
      for (int s = 0; s < 2; ++s) {
        for (int cls = 0; cls < 4; ++cls) {
          const Stratum& z = strata[((dt * 24 + hour) * 2 + s) * 4 + cls];
          const double total = z.exposure[0] + z.exposure[1];
          if (total <= 0) continue;
          for (int c = 0; c < 2; ++c) {
            const double rate = (z.exits[0][c] + z.exits[1][c]) / total;
            for (int b = 0; b < 2; ++b) {
              out.observed[dt][s][b][c] += z.exits[b][c];
              out.expected[dt][s][b][c] += z.exposure[b] * rate;
            }
          }
        }
      }
    }
  }
  return out;
}

// Runs of S1, S2, S3 and S5 with geometric lengths; bands 0, 1 or unknown.
StateSeries RandomSeries(std::mt19937_64& rng, int64_t step, size_t n) {
  StateSeries s;
  s.step_seconds = step;
  // A Thursday 17:23:10 UTC: neither midnight nor an hour boundary.
  s.start_unix = 1700438400 + 3 * 86400 + 17 * 3600 + 23 * 60 + 10;
  const HostState kinds[] = {HostState::kS1, HostState::kS1, HostState::kS2, HostState::kS3,
                             HostState::kS5};
  std::uniform_int_distribution<int> kind(0, 4), band(0, 5);
  std::geometric_distribution<int> run(0.05);
  while (s.states.size() < n) {
    const HostState k = kinds[kind(rng)];
    for (int i = run(rng) + 1; i > 0 && s.states.size() < n; --i) {
      s.states.push_back(k);
      const int b = band(rng);
      s.load_band.push_back(IsFailure(k) ? kLoadBandUnknown : b < 3 ? 0 : b < 5 ? 1 : kLoadBandUnknown);
    }
  }
  return s;
}

void ExpectSame(const FailureExposure& a, const FailureExposure& b) {
  for (int k = 0; k < 2; ++k)
    for (int d = 0; d < 2; ++d)
      for (int h = 0; h < 24; ++h) {
        ASSERT_EQ(a.up_steps[k][d][h], b.up_steps[k][d][h]) << k << " " << d << " " << h;
        ASSERT_EQ(a.failures[k][d][h], b.failures[k][d][h]) << k << " " << d << " " << h;
      }
}

void ExpectSame(const BandExposure& a, const BandExposure& b) {
  for (int d = 0; d < 2; ++d)
    for (int s = 0; s < 2; ++s)
      for (int band = 0; band < 2; ++band)
        for (int c = 0; c < 2; ++c) {
          ASSERT_EQ(a.observed[d][s][band][c], b.observed[d][s][band][c]);
          ASSERT_EQ(a.expected[d][s][band][c], b.expected[d][s][band][c]);
        }
}

struct Case {
  int64_t step;
  size_t n;
};

TEST(ExposureWalkTest, MatchesThePointByPointCounts) {
  std::mt19937_64 rng(20261123);
  // Steps dividing an hour, not dividing it, and longer than it.
  const Case cases[] = {{300, 9000}, {6, 60000}, {7, 40000}, {3600, 2000}, {5400, 1500},
                        {1, 30000}};
  const int offsets[] = {0, 7200, -19800, 20700, -36000};
  int checked_failures = 0, checked_exits = 0;
  for (const Case& c : cases) {
    const StateSeries series = RandomSeries(rng, c.step, c.n);
    const int64_t last = series.start_unix + static_cast<int64_t>(c.n - 1) * c.step;
    const int64_t ends[] = {std::numeric_limits<int64_t>::max(), last, last - 1,
                            series.start_unix + (last - series.start_unix) / 3,
                            series.start_unix + c.step, series.start_unix, series.start_unix - 1};
    const std::function<bool(size_t)> none;
    const std::function<bool(size_t)> some = [](size_t t) { return t % 97 < 11; };
    for (int offset : offsets) {
      for (int64_t end : ends) {
        for (const auto* exclude : {&none, &some}) {
          SCOPED_TRACE(testing::Message() << "step " << c.step << " offset " << offset
                                          << " end " << end << " exclude " << (exclude == &some));
          const FailureExposure f = CountFailureExposure(series, end, offset, *exclude);
          ExpectSame(f, ReferenceFailureExposure(series, end, offset, *exclude));
          checked_failures += f.total_failures() > 0;
          for (int64_t cap : {int64_t{1}, int64_t{24}, int64_t{700}}) {
            for (auto [recent, long_age] : {std::pair<int64_t, int64_t>{6 * 3600, 24 * 3600},
                                            {6 * 3600, 0}, {0, 0}}) {
              const BandExposure e =
                  CountBandExposure(series, end, offset, cap, recent, long_age, *exclude);
              ExpectSame(e, ReferenceBandExposure(series, end, offset, cap, recent, long_age,
                                                  *exclude));
              checked_exits += e.observed[0][0][0][1] + e.observed[1][0][1][1] > 0;
            }
          }
        }
      }
    }
  }
  // The comparisons were not all of empty tables.
  EXPECT_GT(checked_failures, 100);
  EXPECT_GT(checked_exits, 300);
}

// The counters of a growing grid (FailureExposureCounter,
// BandExposureCounter) against counting anew: a grid that grows in batches
// of any size, whose last point is redone now and then (a sample with its
// time follows, state.h GridBuilder) and whose start is trimmed now and then
// (a bounded grid), asked for histories that end at its last point or later,
// and now and then for an earlier end or by an older snapshot.
TEST(ExposureCounterTest, AGrowingGridIsCountedAsAnew) {
  std::mt19937_64 rng(20261127);
  const Case cases[] = {{300, 6000}, {7, 20000}, {3600, 1500}};
  int checked_failures = 0, checked_exits = 0, trims = 0;
  for (const Case& c : cases) {
    const StateSeries whole = RandomSeries(rng, c.step, c.n);
    for (int offset : {0, -19800}) {
      SCOPED_TRACE(testing::Message() << "step " << c.step << " offset " << offset);
      FailureExposureCounter failures(offset);
      std::vector<BandExposureCounter> bands;
      for (int64_t cap : {int64_t{1}, int64_t{24}, int64_t{700}}) {
        bands.emplace_back(offset, cap, 6 * 3600, 24 * 3600);
        bands.emplace_back(offset, cap, 0, 0);
      }
      std::uniform_int_distribution<int> percent(0, 99);
      std::geometric_distribution<size_t> batch(0.02);
      size_t dropped = 0, m = 0;
      // The last three grids asked for: the oldest is an older snapshot than
      // the last counted.
      std::vector<StateSeries> earlier;
      while (m < c.n) {
        m = std::min(c.n, m + 1 + (percent(rng) < 5 ? c.n / 10 : batch(rng)));
        if (percent(rng) < 8 && m > dropped + 10) {
          dropped += (m - dropped) / 3;
          ++trims;
        }
        StateSeries grid;
        grid.step_seconds = c.step;
        grid.start_unix = whole.start_unix + static_cast<int64_t>(dropped) * c.step;
        grid.states.assign(whole.states.begin() + dropped, whole.states.begin() + m);
        grid.load_band.assign(whole.load_band.begin() + dropped, whole.load_band.begin() + m);
        if (percent(rng) < 30) {  // the last point, to be redone
          grid.states.back() = percent(rng) < 50 ? HostState::kS2 : HostState::kS3;
          grid.load_band.back() = IsFailure(grid.states.back()) ? kLoadBandUnknown : 1;
        }
        const int64_t last =
            grid.start_unix + static_cast<int64_t>(grid.states.size() - 1) * c.step;
        std::vector<int64_t> ends = {last, last + c.step / 2,
                                     std::numeric_limits<int64_t>::max()};
        if (percent(rng) < 10) ends.push_back(last - c.step);
        const bool old_snapshot = percent(rng) < 10 && earlier.size() == 3;
        const StateSeries& asked = old_snapshot ? earlier.front() : grid;
        for (int64_t end : ends) {
          const FailureExposure f = failures.Count(asked, end);
          ExpectSame(f, CountFailureExposure(asked, end, offset));
          checked_failures += f.total_failures() > 0;
          for (int i = 0; i < static_cast<int>(bands.size()); ++i) {
            const int64_t cap = i / 2 == 0 ? 1 : i / 2 == 1 ? 24 : 700;
            const int64_t recent = i % 2 == 0 ? 6 * 3600 : 0;
            const int64_t long_age = i % 2 == 0 ? 24 * 3600 : 0;
            ASSERT_TRUE(bands[i].Counts(offset, cap, recent, long_age));
            const BandExposure e = bands[i].Count(asked, end);
            ExpectSame(e, CountBandExposure(asked, end, offset, cap, recent, long_age));
            checked_exits += e.observed[0][0][0][1] + e.observed[1][0][1][1] > 0;
          }
          if (HasFatalFailure()) return;
        }
        if (!old_snapshot) {
          earlier.push_back(std::move(grid));
          if (earlier.size() > 3) earlier.erase(earlier.begin());
        }
      }
    }
  }
  EXPECT_GT(checked_failures, 500);
  EXPECT_GT(checked_exits, 2000);
  EXPECT_GT(trims, 10);
}

}  // namespace
}  // namespace sojourn::availability
