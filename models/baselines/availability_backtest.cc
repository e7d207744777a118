#include "models/baselines/availability_backtest.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "absl/strings/str_cat.h"
#include "models/availability/frailty.h"
#include "models/availability/kernel.h"
#include "models/availability/predict.h"
#include "models/availability/sojourn_stats.h"
#include "models/availability/window.h"
#include "models/baselines/baselines.h"

namespace sojourn::backtest {
namespace {

using availability::HostState;
using availability::IsFailure;

constexpr int64_t kDay = 86400;

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

enum Method {
  kSmp,
  kSmpPaper,
  kWindowFrequency,
  kLast,
  kBm,
  kAr,
  kMa,
  kArma,
  kAvailQuantile,
  kOnFraction,
  kNumMethods
};
const char* const kMethodNames[kNumMethods] = {
    "smp", "smp_paper", "window_frequency", "last",       "bm", "ar",
    "ma",  "arma",      "avail_quantile",   "on_fraction"};

baselines::TsKind TsKindOf(int m) {
  switch (m) {
    case kLast:
      return baselines::TsKind::kLast;
    case kBm:
      return baselines::TsKind::kBm;
    case kAr:
      return baselines::TsKind::kAr;
    case kMa:
      return baselines::TsKind::kMa;
    default:
      return baselines::TsKind::kArma;
  }
}

availability::EstimatorOptions SmpPaperOptions() { return PaperLiteralOptions(); }

// One host's classified grid and everything the methods precompute on it.
struct HostGrid {
  int index = 0;
  int64_t start_unix = 0;
  availability::StateSeries series;
  std::vector<double> level;       // load level for the time-series models (1 = failure)
  std::vector<uint8_t> outage;     // global monitoring outage at this point
  std::vector<int32_t> fail_next;  // first failure index >= i (n if none)
  std::vector<int32_t> outage_next;
  std::vector<int32_t> up_since;   // steps since the current up run started
  std::vector<int64_t> state_age;  // availability::StateAges (uncapped; -1 unknown)
  std::vector<float> on_fraction;  // BOINC on-fraction after observing point i
  int64_t first_day = 0, last_day = 0, split_day = 0;
  int64_t split_idx = 0;
  bool busy = false;

  int64_t n() const { return static_cast<int64_t>(series.states.size()); }
  // The grid point at (or the last before) local midnight starting `day`.
  int64_t MidnightIdx(int64_t day, int64_t step, const availability::LocalClock& clock) const {
    return FloorDiv(clock.UnixAt(day, 0) - start_unix, step);
  }
  // Largest L (steps, <= max_steps) such that points s..s+L are inside the
  // series, before `limit` (exclusive) and not in an outage. -1 if s itself
  // is unusable.
  int64_t ValidSteps(int64_t s, int64_t max_steps, int64_t limit) const {
    if (s < 0 || s >= n() || s >= limit || outage[s]) return -1;
    int64_t last = std::min({static_cast<int64_t>(outage_next[s]) - 1, n() - 1, limit - 1});
    return std::min(max_steps, last - s);
  }
};

struct Grids {
  std::vector<HostGrid> hosts;  // only hosts with a non-empty grid
  int64_t outage_points = 0;
  int64_t few_hosts_points = 0;  // outage rule off: fewer than outage_min_hosts present
  int64_t grid_points = 0;
  std::vector<BacktestResult::GridPoint> points;  // with cfg.keep_grid_points
};

Grids BuildGrids(const std::vector<HostTrace>& traces, const BacktestConfig& cfg) {
  Grids g;
  const int64_t step = cfg.step_seconds;
  // Every host's grid is aligned to the local midnight of the trace's first
  // day (with a fixed offset, to every local midnight; with a zone whose
  // offset changes by less than the step, e.g. Australia/Lord_Howe's 30
  // minutes at a 3600 s step, the local hours of the other season fall
  // between grid points, for every host alike).
  int64_t first_sample = std::numeric_limits<int64_t>::max();
  for (const HostTrace& t : traces) {
    if (!t.samples.empty()) first_sample = std::min(first_sample, t.samples.front().unix_seconds);
  }
  const int64_t origin = first_sample == std::numeric_limits<int64_t>::max()
                             ? 0
                             : availability::LocalMidnight(first_sample, cfg.clock);
  for (size_t h = 0; h < traces.size(); ++h) {
    if (traces[h].samples.empty()) continue;
    availability::StateSeries series =
        availability::ClassifyToGrid(traces[h].samples, cfg.classifier, step, origin);
    if (series.states.empty()) continue;
    HostGrid hg;
    hg.index = static_cast<int>(h);
    hg.start_unix = series.start_unix;
    hg.series = std::move(series);
    const int64_t n = hg.n();
    hg.level.resize(n);
    const auto& samples = traces[h].samples;
    size_t j = 0;
    for (int64_t i = 0; i < n; ++i) {
      const int64_t t = hg.start_unix + i * step;
      while (j + 1 < samples.size() && samples[j + 1].unix_seconds <= t) ++j;
      if (IsFailure(hg.series.states[i])) {
        hg.level[i] = 1.0;
      } else {
        // S1/S2 (including transient spikes kept there): at most Th2.
        const double load = std::clamp(samples[j].cpu_load, 0.0, cfg.classifier.th2);
        hg.level[i] = load;
      }
    }
    g.hosts.push_back(std::move(hg));
  }
  if (g.hosts.empty()) return g;

  // Global outages: fewer than outage_fraction of the hosts present reporting.
  // A host is present from its first grid point to its last; a host that has
  // not started yet, or has left the trace for good, is neither reporting nor
  // missing (counting it would turn the other hosts' own failures into
  // outages once it is gone). Where fewer than outage_min_hosts are present,
  // a global outage cannot be told from the hosts' own revocations, so no
  // point is one and a gap stays S5, a failure.
  int64_t gstart = g.hosts[0].start_unix, gend = gstart;
  for (const HostGrid& hg : g.hosts) {
    gstart = std::min(gstart, hg.start_unix);
    gend = std::max(gend, hg.start_unix + (hg.n() - 1) * step);
  }
  const int64_t gn = (gend - gstart) / step + 1;
  std::vector<int32_t> reporting(gn, 0);
  std::vector<int32_t> present_delta(gn + 1, 0);
  for (const HostGrid& hg : g.hosts) {
    const int64_t o = (hg.start_unix - gstart) / step;
    ++present_delta[o];
    --present_delta[o + hg.n()];
    for (int64_t i = 0; i < hg.n(); ++i) {
      if (hg.series.states[i] != HostState::kS5) ++reporting[o + i];
    }
  }
  std::vector<uint8_t> gout(gn, 0);
  if (cfg.keep_grid_points) g.points.resize(gn);
  int32_t present = 0;
  for (int64_t i = 0; i < gn; ++i) {
    present += present_delta[i];
    if (cfg.keep_grid_points) {
      g.points[i].unix_seconds = gstart + i * step;
      g.points[i].present = present;
      g.points[i].reporting = reporting[i];
    }
    if (cfg.outage_fraction <= 0) continue;
    if (present < cfg.outage_min_hosts) {
      ++g.few_hosts_points;
      continue;
    }
    gout[i] = reporting[i] < cfg.outage_fraction * static_cast<double>(present);
    g.outage_points += gout[i];
    if (cfg.keep_grid_points) g.points[i].outage = gout[i] != 0;
  }
  g.grid_points = gn;

  const double w_step = static_cast<double>(step);
  for (HostGrid& hg : g.hosts) {
    const int64_t n = hg.n();
    const int64_t o = (hg.start_unix - gstart) / step;
    hg.outage.resize(n);
    for (int64_t i = 0; i < n; ++i) hg.outage[i] = gout[o + i];
    hg.fail_next.resize(n + 1);
    hg.outage_next.resize(n + 1);
    hg.fail_next[n] = static_cast<int32_t>(n);
    hg.outage_next[n] = static_cast<int32_t>(n);
    for (int64_t i = n - 1; i >= 0; --i) {
      hg.fail_next[i] =
          IsFailure(hg.series.states[i]) ? static_cast<int32_t>(i) : hg.fail_next[i + 1];
      hg.outage_next[i] = hg.outage[i] ? static_cast<int32_t>(i) : hg.outage_next[i + 1];
    }
    hg.up_since.resize(n);
    int64_t run_start = 0;
    for (int64_t i = 0; i < n; ++i) {
      if (IsFailure(hg.series.states[i])) {
        run_start = i + 1;
        hg.up_since[i] = 0;
      } else {
        hg.up_since[i] = static_cast<int32_t>(i - run_start);
      }
    }
    hg.state_age = availability::StateAges(hg.series.states);
    hg.on_fraction.resize(n);
    baselines::OnFraction of;
    for (int64_t i = 0; i < n; ++i) {
      // BOINC only accounts time while it can observe; skip monitoring outages.
      if (i > 0 && !hg.outage[i]) of.Observe(!IsFailure(hg.series.states[i]), w_step);
      hg.on_fraction[i] = static_cast<float>(of.value());
    }
    hg.first_day = availability::LocalDayNumber(hg.start_unix, cfg.clock);
    hg.last_day = availability::LocalDayNumber(hg.start_unix + (n - 1) * step, cfg.clock);
    const int64_t ndays = hg.last_day - hg.first_day + 1;
    hg.split_day = hg.first_day +
                   static_cast<int64_t>(std::floor(static_cast<double>(ndays) * cfg.train_ratio));
    hg.split_idx = std::clamp<int64_t>(hg.MidnightIdx(hg.split_day, step, cfg.clock), 0, n);
    int64_t failures = 0;
    for (int64_t i = 1; i < n; ++i) {
      if (!IsFailure(hg.series.states[i - 1]) && IsFailure(hg.series.states[i]) && !hg.outage[i])
        ++failures;
    }
    hg.busy =
        static_cast<double>(failures) * cfg.busy_days_per_failure >= static_cast<double>(ndays);
  }
  return g;
}

// 1 for a local day (LocalDayNumber) on a weekend, else 0.
int DayTypeIndex(int64_t day) {
  return availability::DayTypeOfLocalDay(day) == availability::DayType::kWeekend ? 1 : 0;
}

// Calls f(i, failed) for every step i -> i + 1 of `hg` from an up point
// (S1/S2) with neither point in a global outage, failed = whether it ended in
// S3..S5: the steps CountDays and the population's level count.
template <typename F>
void ForEachUpStep(const HostGrid& hg, F f) {
  const auto& st = hg.series.states;
  for (int64_t i = 0; i + 1 < hg.n(); ++i) {
    if (IsFailure(st[i]) || hg.outage[i] || hg.outage[i + 1]) continue;
    f(i, IsFailure(st[i + 1]));
  }
}

// The population's level (BacktestConfig::smp_population_days): the ratio
// at the start of every hour of the trace, hours counted from `start`, a
// local hour boundary.
struct PopulationLevel {
  int64_t start = 0;
  std::vector<double> ratio;
  availability::PopulationLevelModel model;
};

PopulationLevel BuildPopulationLevel(const Grids& grids, const BacktestConfig& cfg,
                                     const availability::HostFrailtyModel& rates) {
  PopulationLevel out;
  const int64_t step = cfg.step_seconds;
  const availability::LocalClock& clock = cfg.clock;
  int64_t gs = grids.hosts[0].start_unix, ge = gs;
  for (const HostGrid& hg : grids.hosts) {
    gs = std::min(gs, hg.start_unix);
    ge = std::max(ge, hg.start_unix + hg.n() * step);
  }
  // Local hours: [start + 3600 g, start + 3600 (g + 1)) (a change to or from
  // daylight saving time moves the clock by whole hours in nearly every zone,
  // so every local hour stays one of these; after a 30-minute change,
  // Australia/Lord_Howe's, they are not, and no midnight is found there).
  out.start = gs - availability::LocalSecondOfDay(gs, clock) % 3600;
  const int64_t hours = (ge - out.start) / 3600 + 1;
  // The population's rate per up step at each day type and local hour.
  double rate[2][24];
  for (int dt = 0; dt < 2; ++dt) {
    for (int h = 0; h < 24; ++h) {
      availability::FailureExposure one;
      one.up_steps[0][dt][h] = 1;
      rate[dt][h] = rates.Expected(one, -1, dt);
    }
  }
  // Observed and expected failures by hour, over the steps CountDays counts:
  // of every host (the history a window start sees), and of the hosts'
  // training halves only (the fit).
  std::vector<double> o(hours + 1, 0), e(hours + 1, 0), o_train(hours + 1, 0),
      e_train(hours + 1, 0);
  for (const HostGrid& hg : grids.hosts) {
    availability::LocalHourCursor cursor(hg.start_unix, step, clock);
    ForEachUpStep(hg, [&](int64_t i, bool failed) {
      const int64_t t = hg.start_unix + i * step;
      const int64_t g = (t - out.start) / 3600;
      cursor.Seek(i);
      const double expected = rate[cursor.weekend()][cursor.hour()];
      e[g] += expected;
      o[g] += failed ? 1.0 : 0.0;
      if (i + 1 < hg.split_idx) {
        e_train[g] += expected;
        o_train[g] += failed ? 1.0 : 0.0;
      }
    });
  }
  // Prefix sums: po[g] = sum of o over hours < g.
  auto prefix = [hours](const std::vector<double>& v) {
    std::vector<double> p(hours + 2, 0);
    for (int64_t g = 0; g <= hours; ++g) p[g + 1] = p[g] + v[g];
    return p;
  };
  const std::vector<double> po = prefix(o), pe = prefix(e), pot = prefix(o_train),
                            pet = prefix(e_train);
  const int64_t span = int64_t{cfg.smp_population_days} * 24;
  // Training pairs: each local day with a full span of hours before it, both
  // counted over the hosts' training halves (a day late in the training
  // period weighs by the exposure of the hosts still training then).
  std::vector<availability::LevelPair> pairs;
  for (int64_t g = span; g + 24 <= hours; ++g) {
    const int64_t at = out.start + g * 3600;
    // Local midnight only: the start of its day (where a change to or from
    // daylight saving time is at midnight, America/Havana, 00:00 may come
    // twice or not at all).
    if (at != clock.UnixAt(availability::LocalDayNumber(at, clock), 0)) continue;
    // The day's hours: 24, or 23 / 25 when daylight saving time starts / ends.
    const int64_t day_hours =
        (clock.UnixAt(availability::LocalDayNumber(at, clock) + 1, 0) - at) / 3600;
    if (g + day_hours > hours) continue;
    availability::LevelPair p;
    p.o_recent = pot[g] - pot[g - span];
    p.e_recent = pet[g] - pet[g - span];
    p.o_day = pot[g + day_hours] - pot[g];
    p.e_day = pet[g + day_hours] - pet[g];
    if (p.e_recent > 0 && p.e_day > 0) pairs.push_back(p);
  }
  out.model.Fit(pairs);
  out.ratio.assign(hours + 1, 1.0);
  for (int64_t g = 0; g <= hours; ++g) {
    const int64_t from = std::max<int64_t>(0, g - span);
    out.ratio[g] = out.model.Ratio(po[g] - po[from], pe[g] - pe[from]);
  }
  return out;
}

std::vector<DayCount> CountDays(const Grids& grids, const BacktestConfig& cfg) {
  if (grids.hosts.empty()) return {};
  const int64_t step = cfg.step_seconds;
  int64_t first = grids.hosts[0].first_day, last = grids.hosts[0].last_day;
  for (const HostGrid& hg : grids.hosts) {
    first = std::min(first, hg.first_day);
    last = std::max(last, hg.last_day);
  }
  std::vector<DayCount> days(last - first + 1);
  for (size_t d = 0; d < days.size(); ++d) {
    days[d].day = first + static_cast<int64_t>(d);
    days[d].day_type = DayTypeIndex(days[d].day);
  }
  std::vector<int64_t> up(days.size());
  for (const HostGrid& hg : grids.hosts) {
    std::fill(up.begin(), up.end(), 0);
    availability::LocalHourCursor cursor(hg.start_unix, step, cfg.clock);
    ForEachUpStep(hg, [&](int64_t i, bool failed) {
      cursor.Seek(i);
      const int64_t d = cursor.day() - first;
      ++up[d];
      days[d].up_steps += 1;
      if (failed) days[d].failures += 1;
    });
    for (size_t d = 0; d < days.size(); ++d) {
      if (up[d] == 0) continue;
      ++days[d].hosts;
      if (days[d].day < hg.split_day) ++days[d].train_hosts;
    }
  }
  return days;
}

struct TrainWindow {
  int64_t start;
  int64_t steps;  // length in steps (the longest window, M)
};

availability::WindowSpec SpecOf(int dt, int hour, const BacktestConfig& cfg, int hours = 0) {
  availability::WindowSpec spec;
  spec.day_type = dt == 0 ? availability::DayType::kWeekday : availability::DayType::kWeekend;
  spec.start_second_of_day = int64_t{hour} * 3600;
  spec.length_seconds = int64_t{hours > 0 ? hours : cfg.max_window_hours} * 3600;
  spec.history_days = cfg.history_days;
  spec.clock = cfg.clock;
  return spec;
}

int64_t SplitUnix(const HostGrid& hg, const BacktestConfig& cfg) {
  return cfg.clock.UnixAt(hg.split_day, 0);
}

// A training window touching a global monitoring outage is excluded.
std::function<bool(size_t)> OutageExclude(const HostGrid& hg, int64_t steps) {
  return [&hg, steps](size_t s) {
    return static_cast<int64_t>(hg.outage_next[s]) <= static_cast<int64_t>(s) + steps;
  };
}

// The training windows of (day type, hour) that every method uses: the
// library's same-clock history windows (availability::HistoryWindowStarts) of
// the longest length ending by the split, minus those touching an outage;
// newest first.
// With `hours` > 0, the windows of that many hours instead of the longest
// (max_steps must then be hours * steps per hour).
std::vector<TrainWindow> TrainingWindows(const HostGrid& hg, int dt, int hour, int64_t max_steps,
                                         const BacktestConfig& cfg, int hours = 0) {
  std::vector<TrainWindow> out;
  auto exclude = OutageExclude(hg, max_steps);
  for (size_t s : availability::HistoryWindowStarts(hg.series, SpecOf(dt, hour, cfg, hours),
                                                    SplitUnix(hg, cfg))) {
    if (exclude(s)) continue;
    out.push_back({static_cast<int64_t>(s), max_steps});
  }
  return out;
}

struct Accum {
  int n_test = 0, n_survived = 0;
  double sum_pred[kNumMethods] = {};
  double brier[kNumMethods] = {};
};

struct HostOutput {
  std::vector<CellResult> cells;
  int64_t without_history = 0;
  std::vector<std::vector<ReliabilityBin>> reliability;
};

// Pooled prior statistics [day type][hour] (may be null).
using PooledStats = std::array<std::array<availability::SojournStats, 24>, 2>;

// The prior as of each window start (BacktestConfig::smp_pool_at):
// prior[k][dt][hour][d - first_day] for the days d from first_day (the first
// test day of any host) on; empty on the days of the other type.
struct OnlinePriors {
  int64_t first_day = 0;
  std::vector<std::array<std::array<std::vector<availability::SojournStats>, 24>, 2>> prior;

  const availability::SojournStats* At(size_t k, int dt, int hour, int64_t day) const {
    const auto& v = prior[k][dt][hour];
    const int64_t i = day - first_day;
    return i >= 0 && i < static_cast<int64_t>(v.size()) ? &v[i] : nullptr;
  }
};

// The window lengths (hours) smp, smp_paper and window_frequency estimate
// from: each length on its own, or only the longest (every length read off
// its curve).
std::vector<int> WindowLengths(const BacktestConfig& cfg) {
  if (!cfg.windows_per_length) return {cfg.max_window_hours};
  std::vector<int> out;
  for (int L = 1; L <= cfg.max_window_hours; ++L) out.push_back(L);
  return out;
}

// The SMP training statistics of every start hour of day type `dt`, from
// windows of `hours` (0 = the longest).
std::array<availability::SojournStats, 24> HourStats(const HostGrid& hg, int dt,
                                                     const BacktestConfig& cfg,
                                                     const availability::EstimatorOptions& opt,
                                                     int hours = 0) {
  std::array<availability::SojournStats, 24> out;
  const int64_t steps = int64_t{hours > 0 ? hours : cfg.max_window_hours} * (3600 / cfg.step_seconds);
  for (int hour = 0; hour < 24; ++hour) {
    out[hour] = availability::CollectStats(hg.series, SpecOf(dt, hour, cfg, hours),
                                           SplitUnix(hg, cfg), opt, OutageExclude(hg, steps));
  }
  return out;
}

// Calls f(i) for i = 0..n-1 on up to `threads` threads (at most 2), each
// taking the next i. An exception in f (std::bad_alloc on a huge trace) would
// end the process with std::terminate; it stops the other threads at their
// next i and is rethrown here, where the caller can report it (sojourn-eval:
// one line, exit 1).
template <typename F>
void ParallelFor(size_t n, int threads, F f) {
  std::atomic<size_t> next{0};
  std::exception_ptr failure;
  std::mutex failure_mu;
  auto work = [&] {
    try {
      for (size_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) f(i);
    } catch (...) {
      std::lock_guard<std::mutex> lock(failure_mu);
      if (!failure) failure = std::current_exception();
      next.store(n);
    }
  };
  std::vector<std::thread> pool;
  for (int t = 1; t < std::max(1, std::min(threads, 2)); ++t) pool.emplace_back(work);
  work();
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);
}

// Whether the prior can be built as of each window start by adding each
// day's windows (CollectStats' after_unix): see BacktestConfig.
bool OnlinePriorExact(const BacktestConfig& cfg) {
  const availability::EstimatorOptions& o = cfg.smp_options;
  return cfg.history_days == 0 && o.recency_half_life_windows == 0 &&
         (o.borrow_below_windows == 0 ||
          o.borrow_below_windows == availability::EstimatorOptions::kAlwaysBorrow);
}

// The prior of every (length, day type, start hour) as of the window start of
// every day from the first test day on: the hosts' windows that ended by then,
// added day by day (PopulationPriorBuilder::AddTo), as the predictor service
// pools its hosts at a request. Work over the (length, day type) pairs on up
// to cfg.threads threads.
OnlinePriors BuildOnlinePriors(const Grids& grids, const BacktestConfig& cfg,
                               const std::vector<int>& lengths) {
  OnlinePriors out;
  int64_t first = grids.hosts[0].first_day, last = grids.hosts[0].last_day;
  int64_t first_test = grids.hosts[0].split_day;
  for (const HostGrid& hg : grids.hosts) {
    first = std::min(first, hg.first_day);
    last = std::max(last, hg.last_day);
    first_test = std::min(first_test, hg.split_day);
  }
  out.first_day = first_test;
  out.prior.resize(lengths.size());
  const int64_t sph = 3600 / cfg.step_seconds;
  ParallelFor(lengths.size() * 2, cfg.threads, [&](size_t j) {
    const size_t k = j / 2;
    const int dt = static_cast<int>(j % 2);
    for (int hour = 0; hour < 24; ++hour) {
      const availability::WindowSpec spec = SpecOf(dt, hour, cfg, lengths[k]);
      const int64_t steps = int64_t{lengths[k]} * sph;
      std::vector<std::function<bool(size_t)>> exclude;
      for (const HostGrid& hg : grids.hosts) exclude.push_back(OutageExclude(hg, steps));
      availability::PopulationPriorBuilder growing;
      std::vector<availability::SojournStats>& by_day = out.prior[k][dt][hour];
      by_day.resize(last - first_test + 1);
      int64_t before = std::numeric_limits<int64_t>::min();
      for (int64_t d = first; d <= last; ++d) {
        if (DayTypeIndex(d) != dt) continue;
        const int64_t at = cfg.clock.UnixAt(d, int64_t{hour} * 3600);
        for (size_t h = 0; h < grids.hosts.size(); ++h) {
          growing.AddTo(h, availability::CollectStats(grids.hosts[h].series, spec, at,
                                                      cfg.smp_options, exclude[h], before));
        }
        before = at;
        if (d >= first_test) {
          by_day[d - first_test] = growing.Build(cfg.smp_options.level_corrected_borrowing);
        }
      }
    }
  });
  return out;
}

// Host frailty's population as of each hour (BacktestConfig::
// smp_pool_at kWindow): theta[g][i] is host grids.hosts[i]'s ratio on each
// day type at the local hour start_unix + g * 3600, from its exposure up to
// then, against the HostFrailtyModel of every host's exposure up to then
// (CountFailureExposure with that end, halves at each host's middle day so
// far), as the predictor service builds it from its hosts at a request.
struct OnlineFrailty {
  int64_t start_unix = 0;
  std::vector<std::vector<std::array<double, 2>>> theta;

  const std::array<double, 2>* At(size_t host, int64_t t) const {
    if (t < start_unix || (t - start_unix) % 3600 != 0) return nullptr;
    const int64_t g = (t - start_unix) / 3600;
    return g < static_cast<int64_t>(theta.size()) ? &theta[g][host] : nullptr;
  }
};

OnlineFrailty BuildOnlineFrailty(const Grids& grids, const BacktestConfig& cfg) {
  OnlineFrailty out;
  const int64_t step = cfg.step_seconds;
  const availability::LocalClock& clock = cfg.clock;
  int64_t first_test = grids.hosts[0].split_day, end = 0;
  for (const HostGrid& hg : grids.hosts) {
    first_test = std::min(first_test, hg.split_day);
    end = std::max(end, hg.start_unix + hg.n() * step);
  }
  out.start_unix = clock.UnixAt(first_test, 0);
  // Each host's up steps and failures by local hour (both halves of each
  // hour's count: the halves are assigned below, as of each moment), hours
  // counted from the local midnight of its first grid point, with the local
  // day, day type and clock hour of each (a day is 23 or 25 of them when
  // daylight saving time starts or ends).
  struct Hourly {
    int64_t first_day = 0, first_unix = 0, end_unix = 0;
    std::vector<double> up, failures;
    std::vector<int64_t> day;
    std::vector<int8_t> hour, weekend;
  };
  std::vector<Hourly> hosts(grids.hosts.size());
  for (size_t i = 0; i < grids.hosts.size(); ++i) {
    const HostGrid& hg = grids.hosts[i];
    Hourly& h = hosts[i];
    h.first_day = availability::LocalDayNumber(hg.start_unix, clock);
    h.first_unix = clock.UnixAt(h.first_day, 0);
    h.end_unix = hg.start_unix + hg.n() * step;
    const auto exclude = OutageExclude(hg, 1);
    for (int64_t t = h.first_unix; t < h.end_unix; t += 3600) {
      const availability::FailureExposure e =
          availability::CountFailureExposure(hg.series, t, t + 3600, clock, exclude);
      h.up.push_back(e.total_up_steps());
      h.failures.push_back(e.total_failures());
      const int64_t day = availability::LocalDayNumber(t, clock);
      h.day.push_back(day);
      h.hour.push_back(static_cast<int8_t>(availability::LocalSecondOfDay(t, clock) / 3600));
      h.weekend.push_back(static_cast<int8_t>(DayTypeIndex(day)));
    }
  }
  for (int64_t t = out.start_unix; t < end; t += 3600) {
    std::vector<availability::FailureExposure> exposure(hosts.size());
    availability::HostFrailtyModel model;
    for (size_t i = 0; i < hosts.size(); ++i) {
      const Hourly& h = hosts[i];
      // As CountFailureExposure(series, t): the halves split the local days
      // from the first grid point's to that of the last counted point.
      const int64_t last_day = availability::LocalDayNumber(std::min(t, h.end_unix) - 1, clock);
      const int64_t mid_day = h.first_day + (last_day - h.first_day + 1) / 2;
      const int64_t hours =
          std::min<int64_t>(static_cast<int64_t>(h.up.size()), (t - h.first_unix) / 3600);
      availability::FailureExposure& e = exposure[i];
      for (int64_t g = 0; g < hours; ++g) {
        const int half = h.day[g] < mid_day ? 0 : 1;
        e.up_steps[half][h.weekend[g]][h.hour[g]] += h.up[g];
        e.failures[half][h.weekend[g]][h.hour[g]] += h.failures[g];
      }
      model.Add(e);
    }
    model.Build();
    std::vector<std::array<double, 2>>& theta = out.theta.emplace_back(hosts.size());
    for (size_t i = 0; i < hosts.size(); ++i) {
      for (int dt = 0; dt < 2; ++dt) {
        theta[i][dt] = cfg.smp_options.frailty_by_day_type ? model.Theta(exposure[i], dt)
                                                           : model.Theta(exposure[i]);
      }
    }
  }
  return out;
}

HostOutput EvaluateHost(const HostGrid& hg, const BacktestConfig& cfg,
                        const std::vector<int>& methods, const std::vector<PooledStats>* pooled,
                        const std::array<double, 2>& hazard_ratio,
                        const std::vector<availability::BandExposure>* band_exposure,
                        const availability::HostFrailtyModel* online_frailty,
                        const availability::FailureExposure* train_exposure,
                        const PopulationLevel* population_level,
                        const OnlinePriors* online_prior,
                        const OnlineFrailty* online_population_frailty, size_t position,
                        const std::function<void()>& hour_done) {
  HostOutput out;
  const int bins = cfg.reliability_bins;
  out.reliability.assign(kNumMethods, std::vector<ReliabilityBin>(bins));
  const int64_t step = cfg.step_seconds;
  const availability::LocalClock& clock = cfg.clock;
  const int64_t sph = 3600 / step;
  const int H = cfg.max_window_hours;
  const int64_t M = H * sph;
  bool want[kNumMethods] = {};
  for (int m : methods) want[m] = true;
  bool want_ts = false;
  for (int m = kLast; m <= kArma; ++m) want_ts |= want[m];
  // Age conditioning of smp: ages are looked up to this many steps.
  const int64_t age_cap_steps =
      cfg.smp_pass_age && cfg.smp_options.recent_age_seconds > 0
          ? (std::max(cfg.smp_options.recent_age_seconds, cfg.smp_options.long_age_seconds) +
             step - 1) / step
          : 0;
  // Exact age conditioning needs the uncapped age.
  const bool exact_age = cfg.smp_pass_age && cfg.smp_options.exact_age_first_sojourn;

  // Online host frailty (BacktestConfig::smp_online_frailty): the host's
  // ratio on each day type at every hour boundary from the split on, from
  // its exposure up to that moment (training half + test days so far), with
  // the outages excluded as in the training half. online_theta[j][dt] holds
  // at grid point online_base + j * sph (test windows start on the hour).
  std::vector<std::array<double, 2>> online_theta;
  const int64_t online_base = hg.MidnightIdx(hg.split_day, step, clock);
  if (online_population_frailty != nullptr) {
    // Against the population as of each hour too (smp_pool_at kWindow).
    for (int64_t s = online_base; s < hg.n(); s += sph) {
      const std::array<double, 2>* theta =
          online_population_frailty->At(position, hg.start_unix + s * step);
      online_theta.push_back(theta != nullptr ? *theta : hazard_ratio);
    }
  } else if (online_frailty != nullptr && train_exposure != nullptr) {
    availability::FailureExposure cur = *train_exposure;
    const auto exclude = OutageExclude(hg, 1);
    for (int64_t s = online_base; s < hg.n(); s += sph) {
      if (s > online_base) {
        cur.Merge(availability::CountFailureExposure(hg.series, hg.start_unix + (s - sph) * step,
                                                     hg.start_unix + s * step, clock, exclude));
      }
      std::array<double, 2> theta;
      for (int dt = 0; dt < 2; ++dt) {
        theta[dt] = cfg.smp_options.frailty_by_day_type ? online_frailty->Theta(cur, dt)
                                                        : online_frailty->Theta(cur);
      }
      online_theta.push_back(theta);
    }
  }

  // HTCondor: completed availability intervals of the training half.
  std::vector<bool> up(hg.split_idx);
  for (int64_t i = 0; i < hg.split_idx; ++i) up[i] = !IsFailure(hg.series.states[i]);
  const baselines::AvailIntervalSurvival aq(baselines::CompletedUpIntervals(up));

  for (int dt = 0; dt < 2; ++dt) {
    if (!cfg.day_types.empty()) {
      const std::string name = dt == 0 ? "weekday" : "weekend";
      if (std::find(cfg.day_types.begin(), cfg.day_types.end(), name) == cfg.day_types.end()) {
        continue;
      }
    }
    // smp_stats[k], paper_stats[k]: from windows of lengths[k] hours.
    const std::vector<int> lengths = WindowLengths(cfg);
    const int n_len = static_cast<int>(lengths.size());
    std::vector<std::array<availability::SojournStats, 24>> smp_stats(n_len);
    std::vector<std::array<availability::SojournStats, 24>> paper_stats(n_len);
    if (want[kSmp]) {
      for (int k = 0; k < n_len; ++k) {
        smp_stats[k] = HourStats(hg, dt, cfg, cfg.smp_options, lengths[k]);
        for (auto& s : smp_stats[k]) s.prior_hazard_ratio = hazard_ratio[dt];
      }
    }
    if (want[kSmpPaper]) {
      for (int k = 0; k < n_len; ++k) {
        paper_stats[k] = HourStats(hg, dt, cfg, SmpPaperOptions(), lengths[k]);
      }
    }
    // Test days of this type, chronological.
    std::vector<int64_t> test_days;
    for (int64_t d = hg.split_day; d <= hg.last_day; ++d) {
      if (DayTypeIndex(d) == dt) test_days.push_back(d);
    }
    for (int hour = 0; hour < 24; ++hour) {
      // Progress within the host, however the iteration ends (a trace of one
      // long host was silent for minutes); not while an exception unwinds
      // the loop, and an exception of the callback itself (out of memory)
      // propagates rather than ending the process from a noexcept destructor.
      struct HourDone {
        const std::function<void()>& f;
        ~HourDone() noexcept(false) {
          if (f && std::uncaught_exceptions() == 0) f();
        }
      } hour_done_on_exit{hour_done};
      struct TestWindow {
        int64_t s, steps;
        bool scored;
      };
      std::vector<TestWindow> tests;
      bool any_scored = false;
      for (int64_t d : test_days) {
        const int64_t start = clock.UnixAt(d, int64_t{hour} * 3600);
        // No window at a clock hour that daylight saving time skips that day
        // (nor on a day a zone skipped whole, Pacific/Apia's 2011-12-30).
        if (clock.has_zone() &&
            (availability::LocalSecondOfDay(start, clock) != int64_t{hour} * 3600 ||
             availability::LocalDayNumber(start, clock) != d)) {
          continue;
        }
        const int64_t s = FloorDiv(start - hg.start_unix, step);
        const int64_t v = hg.ValidSteps(s, M, hg.n());
        if (v < 0) continue;
        const bool scored = v >= sph && !IsFailure(hg.series.states[s]);
        tests.push_back({s, v, scored});
        any_scored |= scored;
      }
      if (!any_scored) continue;
      std::vector<TrainWindow> train = TrainingWindows(hg, dt, hour, M, cfg);
      Accum acc[2][32];
      // A cell needs a training window that started in S1 or S2: a window
      // that starts in a failure state carries nothing for a guest (the SMP
      // statistics ignore it, and the frequency of survival from a failure is
      // meaningless), so without one every method would only fall back to a
      // constant. Such cells are dropped for every method and counted.
      bool any_up_train = false;
      for (const TrainWindow& w : train) any_up_train |= !IsFailure(hg.series.states[w.start]);
      if (!any_up_train) {
        // Count the cells that would have been scored.
        bool seen[2][32] = {};
        for (const TestWindow& t : tests) {
          if (!t.scored) continue;
          const int init = static_cast<int>(hg.series.states[t.s]) - 1;
          for (int L = 1; L <= H && L * sph <= t.steps; ++L) seen[init][L] = true;
        }
        for (int i = 0; i < 2; ++i) {
          for (int L = 1; L <= H; ++L) out.without_history += seen[i][L];
        }
        continue;
      }

      // sojourn's SMP: one TR curve per initial state, from the library's
      // CollectStats + PredictFromStats (what the predictor service runs).
      std::vector<std::array<std::vector<double>, 2>> paper_curve(n_len);  // [k][init-1]
      // smp curves by (length index, init-1, the host's age in its initial
      // state): the age only matters with age conditioning
      // (recent_age_seconds > 0), so without it there is one curve per
      // initial state and length index.
      // With load_band_first_sojourn also by the load band at the window
      // start (key: age, band; band 2 = unknown / not used).
      // Only with the training ratio: the host's ratio at each window start
      // gives nearly every window a curve of its own (see smp_curve).
      std::vector<std::array<std::map<std::pair<int64_t, int>, std::vector<double>>, 2>>
          smp_curves(n_len);
      std::vector<const availability::SojournStats*> prior(n_len, nullptr);
      std::vector<availability::SojournStats> hours_prior(n_len);
      if (want[kSmp] && cfg.smp_options.prior_windows > 0 && cfg.smp_prior != "none") {
        for (int k = 0; k < n_len; ++k) {
          if (cfg.smp_prior == "hours") {
            for (int h2 = 0; h2 < 24; ++h2) {
              if (h2 != hour) hours_prior[k].Merge(smp_stats[k][h2]);
            }
            prior[k] = &hours_prior[k];
          } else if (pooled != nullptr) {
            prior[k] = &(*pooled)[k][dt][hour];
          }
        }
      }
      // With the training ratio (smp_stats' prior_hazard_ratio) PredictFromStats
      // in two steps: the shrinkage once per cell and length, a curve per age
      // and band.
      struct Shrunk {
        availability::SojournStats stats;
        double strength = 0;
      };
      std::vector<std::optional<Shrunk>> shrunk(n_len);
      // With the host's ratio at each window start nearly every window has a
      // ratio of its own (and with smp_pool_at a prior of its day), so
      // nothing is cached: each window is predicted as
      // the service predicts it (PredictFromStats, which shrinks only the
      // tables that prediction reads; the same numbers as the two steps).
      std::vector<double> window_curve;
      auto smp_curve = [&](int k, int i, int64_t age_seconds, int band, double theta,
                           double level) -> const std::vector<double>& {
        auto band_ratio = [&] {
          availability::FirstSojournRatio ratio;
          if (band_exposure != nullptr && band <= 1) {
            ratio = (*band_exposure)[k].RatioOf(dt, static_cast<HostState>(i + 1),
                                                static_cast<uint8_t>(band));
          }
          return ratio;
        };
        if (!online_theta.empty() || population_level != nullptr || online_prior != nullptr) {
          // The population's level scales every failure hazard: the host's
          // own tables (and those it borrowed) here, the prior's through its
          // hazard ratio.
          availability::SojournStats leveled;
          if (level != 1.0) {
            leveled = availability::ScaleFailureHazards(smp_stats[k][hour], level);
            for (auto& b : leveled.borrowed) b = availability::ScaleFailureHazards(b, level);
          }
          availability::SojournStats& raw = level != 1.0 ? leveled : smp_stats[k][hour];
          const double trained = raw.prior_hazard_ratio;
          raw.prior_hazard_ratio = theta * level;
          window_curve = availability::PredictFromStats(
                             raw, static_cast<HostState>(i + 1),
                             static_cast<int>(lengths[k] * sph), cfg.smp_options, prior[k],
                             age_seconds, band_ratio())
                             .tr;
          raw.prior_hazard_ratio = trained;
          return window_curve;
        }
        const auto key = std::make_pair(age_seconds, band);
        auto it = smp_curves[k][i].find(key);
        if (it == smp_curves[k][i].end()) {
          if (!shrunk[k].has_value()) {
            Shrunk v;
            v.stats = availability::ShrinkStats(smp_stats[k][hour], cfg.smp_options, prior[k],
                                                &v.strength);
            shrunk[k] = std::move(v);
          }
          it = smp_curves[k][i]
                   .emplace(key, availability::PredictFromShrunk(
                                     shrunk[k]->stats, static_cast<HostState>(i + 1),
                                     static_cast<int>(lengths[k] * sph), cfg.smp_options,
                                     prior[k], shrunk[k]->strength, age_seconds, band_ratio())
                                     .tr)
                   .first;
        }
        return it->second;
      };
      if (want[kSmpPaper]) {
        bool need_init[2] = {};
        for (const TestWindow& t : tests) {
          if (t.scored) need_init[static_cast<int>(hg.series.states[t.s]) - 1] = true;
        }
        for (int i = 0; i < 2; ++i) {
          if (!need_init[i]) continue;
          for (int k = 0; k < n_len; ++k) {
            paper_curve[k][i] = availability::PredictFromStats(
                                    paper_stats[k][hour], static_cast<HostState>(i + 1),
                                    static_cast<int>(lengths[k] * sph), SmpPaperOptions())
                                    .tr;
          }
        }
      }

      // Window frequency (issue 7): the fraction of the cell's training
      // windows that survived (no S3/S4/S5 in samples 1..M), among those that
      // started in the cell's initial state, or, when none did, among those
      // that started in S1 or S2 (there is at least one, see above).
      // With per-length windows (windows_per_length), the windows of L
      // hours for length L, as smp and smp_paper see them.
      double wf[2][32];
      std::vector<TrainWindow> train_of_length;
      for (int L = 1; L <= H; ++L) {
        if (want[kWindowFrequency] && n_len > 1) {
          train_of_length = TrainingWindows(hg, dt, hour, L * sph, cfg, L);
        }
        const std::vector<TrainWindow>& wf_train = n_len > 1 ? train_of_length : train;
        for (int i = 0; i < 2; ++i) {
          int64_t n_same = 0, s_same = 0, n_up = 0, s_up = 0;
          for (const TrainWindow& w : wf_train) {
            if (w.steps < L * sph) continue;
            const HostState st = hg.series.states[w.start];
            if (IsFailure(st)) continue;
            const bool surv = hg.fail_next[w.start + 1] > w.start + L * sph;
            ++n_up;
            s_up += surv;
            if (static_cast<int>(st) == i + 1) {
              ++n_same;
              s_same += surv;
            }
          }
          wf[i][L] = n_same > 0 ? static_cast<double>(s_same) / n_same
                     : n_up > 0 ? static_cast<double>(s_up) / n_up
                                : 0.5;
        }
      }

      // Time-series models (paper 000 section 8.2.1): the series is the
      // concatenation of the same-clock windows on previous days of the type;
      // fitted on the training windows, then filtered through the test days in
      // order (each day's sample 0 is observed before its window is forecast).
      std::vector<baselines::TsModel> ts_models(kNumMethods);
      if (want_ts) {
        std::vector<double> series;
        for (auto it = train.rbegin(); it != train.rend(); ++it) {
          for (int64_t k = 0; k <= it->steps; ++k) series.push_back(hg.level[it->start + k]);
        }
        for (int m = kLast; m <= kArma; ++m) {
          if (!want[m]) continue;
          baselines::TsSpec spec;
          spec.kind = TsKindOf(m);
          ts_models[m] = baselines::FitTsModel(spec, series);
        }
      }

      for (const TestWindow& t : tests) {
        int ts_surv[kNumMethods] = {};
        if (want_ts) {
          for (int m = kLast; m <= kArma; ++m) {
            if (!want[m]) continue;
            ts_models[m].Observe(hg.level[t.s]);
            if (t.scored) {
              ts_surv[m] = baselines::ForecastSurvivalSteps(
                  ts_models[m].Forecast(static_cast<int>(M)), cfg.classifier.th2);
            }
            for (int64_t k = 1; k <= t.steps; ++k) ts_models[m].Observe(hg.level[t.s + k]);
          }
        }
        if (!t.scored) continue;
        const int i = static_cast<int>(hg.series.states[t.s]) - 1;
        int64_t smp_age_seconds = -1;
        double smp_theta = hazard_ratio[dt];
        double smp_level = 1.0;  // the population's level at the window start
        if (want[kSmp]) {
          // How long the host has been in its initial state (capped; -1 =
          // unknown), as the predictor service passes it.
          int64_t age_seconds = -1;
          if (exact_age) {
            const int64_t a = hg.state_age[t.s];
            if (a >= 0) age_seconds = a * step;
          } else if (age_cap_steps > 0) {
            const int64_t a = availability::InitialAgeSteps(
                hg.series.states, static_cast<size_t>(t.s), age_cap_steps);
            // Only the age class matters here, so pass the first age of the
            // class: one curve per class, not one per distinct age.
            if (a >= 0) {
              const availability::EstimatorOptions& o = cfg.smp_options;
              switch (availability::AgeClassOf(a * step, o.recent_age_seconds,
                                               o.long_age_seconds > o.recent_age_seconds
                                                   ? o.long_age_seconds
                                                   : 0)) {
                case availability::kAgeRecent:
                  age_seconds = 0;
                  break;
                case availability::kAgeLong:
                  age_seconds = o.long_age_seconds;
                  break;
                default:
                  age_seconds = o.recent_age_seconds;
                  break;
              }
            }
          }
          smp_age_seconds = age_seconds;
          if (!online_theta.empty()) {
            const int64_t j = (t.s - online_base) / sph;
            if (j >= 0 && j < static_cast<int64_t>(online_theta.size())) {
              smp_theta = online_theta[j][dt];
            }
          }
          if (online_prior != nullptr) {
            // The prior as the service would pool it at this window's start.
            const int64_t day = availability::LocalDayNumber(hg.start_unix + t.s * step, clock);
            for (int k = 0; k < n_len; ++k) prior[k] = online_prior->At(k, dt, hour, day);
          }
          if (population_level != nullptr) {
            const int64_t g = (hg.start_unix + t.s * step - population_level->start) / 3600;
            if (g >= 0 && g < static_cast<int64_t>(population_level->ratio.size())) {
              smp_level = population_level->ratio[g];
            }
          }
        }
        const int smp_band = band_exposure != nullptr && !hg.series.load_band.empty()
                                 ? std::min<int>(2, hg.series.load_band[t.s])
                                 : 2;
        for (int L = 1; L <= H && L * sph <= t.steps; ++L) {
          const int64_t m_steps = L * sph;
          const bool survived = hg.fail_next[t.s + 1] > t.s + m_steps;
          const double o = survived ? 1.0 : 0.0;
          Accum& a = acc[i][L];
          ++a.n_test;
          a.n_survived += survived;
          for (int m : methods) {
            double p = 0;
            switch (m) {
              case kSmp:
                p = smp_curve(n_len == 1 ? 0 : L - 1, i, smp_age_seconds, smp_band, smp_theta,
                              smp_level)[m_steps - 1];
                break;
              case kSmpPaper:
                p = paper_curve[n_len == 1 ? 0 : L - 1][i][m_steps - 1];
                break;
              case kWindowFrequency:
                p = wf[i][L];
                break;
              case kAvailQuantile:
                p = aq.Tr(hg.up_since[t.s], m_steps);
                break;
              case kOnFraction:
                p = hg.on_fraction[t.s];
                break;
              default:
                p = ts_surv[m] >= m_steps ? 1.0 : 0.0;
                break;
            }
            p = std::clamp(p, 0.0, 1.0);
            a.sum_pred[m] += p;
            a.brier[m] += (p - o) * (p - o);
            // p in [0, 1] (a NaN, which no valid option gives, goes to bin 0
            // rather than out of range).
            const int b = p > 0 ? std::min(bins - 1, static_cast<int>(p * bins)) : 0;
            ReliabilityBin& rb = out.reliability[m][b];
            ++rb.n;
            rb.sum_pred += p;
            rb.sum_outcome += o;
          }
        }
      }
      for (int i = 0; i < 2; ++i) {
        for (int L = 1; L <= H; ++L) {
          const Accum& a = acc[i][L];
          if (a.n_test == 0) continue;
          CellResult c;
          c.host = hg.index;
          c.day_type = dt;
          c.hour = hour;
          c.hours = L;
          c.init = i + 1;
          c.n_test = a.n_test;
          c.n_survived = a.n_survived;
          c.pred.assign(methods.size(), 0);
          c.brier_sum.assign(methods.size(), 0);
          for (size_t k = 0; k < methods.size(); ++k) {
            c.pred[k] = a.sum_pred[methods[k]] / a.n_test;
            c.brier_sum[k] = a.brier[methods[k]];
          }
          out.cells.push_back(std::move(c));
        }
      }
    }
  }
  return out;
}

absl::StatusOr<std::vector<int>> ResolveMethods(const std::vector<std::string>& names) {
  std::vector<int> out;
  if (names.empty()) {
    for (int m = 0; m < kNumMethods; ++m) out.push_back(m);
    return out;
  }
  for (const std::string& n : names) {
    int found = -1;
    for (int m = 0; m < kNumMethods; ++m) {
      if (n == kMethodNames[m]) found = m;
    }
    if (found < 0) return absl::InvalidArgumentError(absl::StrCat("unknown method '", n, "'"));
    if (std::find(out.begin(), out.end(), found) == out.end()) out.push_back(found);
  }
  return out;
}

}  // namespace

absl::Status ValidateBacktestConfig(const BacktestConfig& c) {
  if (c.step_seconds <= 0 || 3600 % c.step_seconds != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("the grid step (", c.step_seconds, " s) must divide 3600 s"));
  }
  if (c.max_window_hours < 1 || c.max_window_hours > 31) {
    return absl::InvalidArgumentError("the longest window must be 1..31 hours");
  }
  if (!(c.train_ratio > 0 && c.train_ratio < 1)) {
    return absl::InvalidArgumentError("the training ratio must be in (0, 1)");
  }
  if (c.history_days < 0) return absl::InvalidArgumentError("history days must be >= 0");
  if (c.outage_min_hosts < 1) {
    return absl::InvalidArgumentError("the outage rule needs at least 1 host present");
  }
  if (c.smp_population_days < 0 || c.smp_population_days > 28) {
    return absl::InvalidArgumentError("the population level's days must be 0..28");
  }
  if (c.reliability_bins < 1 || c.reliability_bins > 1000) {
    return absl::InvalidArgumentError("reliability bins must be 1..1000");
  }
  if (c.smp_prior != "hosts" && c.smp_prior != "hours" && c.smp_prior != "none") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown prior source '", c.smp_prior, "' (expected hosts, hours or none)"));
  }
  for (const std::string& d : c.day_types) {
    if (d != "weekday" && d != "weekend") {
      return absl::InvalidArgumentError(absl::StrCat("unknown day type '", d, "'"));
    }
  }
  return absl::OkStatus();
}

availability::EstimatorOptions PaperLiteralOptions() {
  // The library's paper-literal preset: no issue 7 improvement, whatever the
  // library defaults are.
  return availability::PaperEstimatorOptions();
}

const std::vector<std::string>& AllMethods() {
  static const auto* names = new std::vector<std::string>(kMethodNames, kMethodNames + kNumMethods);
  return *names;
}

absl::StatusOr<BacktestResult> RunBacktest(const std::vector<HostTrace>& traces,
                                           const BacktestConfig& config) {
  if (absl::Status s = ValidateBacktestConfig(config); !s.ok()) return s;
  absl::StatusOr<std::vector<int>> methods = ResolveMethods(config.methods);
  if (!methods.ok()) return methods.status();
  Grids grids = BuildGrids(traces, config);

  BacktestResult r;
  for (int m : *methods) r.methods.push_back(kMethodNames[m]);
  for (const HostTrace& t : traces) r.hosts.push_back(t.host);
  r.busy.assign(traces.size(), false);
  for (const HostGrid& hg : grids.hosts) r.busy[hg.index] = hg.busy;
  r.outage_points = grids.outage_points;
  r.outage_few_hosts_points = grids.few_hosts_points;
  r.grid_point_hosts = std::move(grids.points);
  r.grid_points = grids.grid_points;
  r.days = CountDays(grids, config);

  // Shrinkage prior pooled over all hosts (issue 7), only when it is used.
  // One per window length (WindowLengths).
  std::unique_ptr<std::vector<PooledStats>> pooled;
  const bool want_smp =
      std::find(methods->begin(), methods->end(), static_cast<int>(kSmp)) != methods->end();
  if (want_smp && config.smp_options.prior_windows > 0 && config.smp_prior == "hosts") {
    const std::vector<int> lengths = WindowLengths(config);
    pooled = std::make_unique<std::vector<PooledStats>>(lengths.size());
    for (size_t k = 0; k < lengths.size(); ++k) {
      // The library's builder, as the predictor service pools its hosts.
      auto builders = std::make_unique<
          std::array<std::array<availability::PopulationPriorBuilder, 24>, 2>>();
      for (const HostGrid& hg : grids.hosts) {
        for (int dt = 0; dt < 2; ++dt) {
          auto hs = HourStats(hg, dt, config, config.smp_options, lengths[k]);
          for (int hour = 0; hour < 24; ++hour) (*builders)[dt][hour].Add(hs[hour]);
        }
      }
      for (int dt = 0; dt < 2; ++dt) {
        for (int hour = 0; hour < 24; ++hour) {
          (*pooled)[k][dt][hour] =
              (*builders)[dt][hour].Build(config.smp_options.level_corrected_borrowing);
        }
      }
    }
  }

  // The prior as of each window start (BacktestConfig::smp_pool_at).
  std::unique_ptr<OnlinePriors> online_prior;
  if (pooled != nullptr && config.smp_pool_at != BacktestConfig::PoolAt::kTraining &&
      OnlinePriorExact(config)) {
    online_prior = std::make_unique<OnlinePriors>(
        BuildOnlinePriors(grids, config, WindowLengths(config)));
    r.smp_pool_at = config.smp_pool_at;
  }

  // Host frailty (EstimatorOptions::host_frailty): each host's hazard ratio
  // against all hosts' training halves, as the predictor computes it over its
  // registered hosts.
  // One ratio per day type (EstimatorOptions::frailty_by_day_type) or the
  // same over all days.
  std::vector<std::array<double, 2>> hazard_ratio(grids.hosts.size(), {1.0, 1.0});
  availability::HostFrailtyModel frailty;
  std::vector<availability::FailureExposure> exposure;
  const bool with_frailty = want_smp && config.smp_options.host_frailty && pooled != nullptr;
  if (with_frailty) {
    for (const HostGrid& hg : grids.hosts) {
      exposure.push_back(availability::CountFailureExposure(
          hg.series, SplitUnix(hg, config), config.clock, OutageExclude(hg, 1)));
      frailty.Add(exposure.back());
    }
    frailty.Build();
    for (size_t h = 0; h < grids.hosts.size(); ++h) {
      for (int dt = 0; dt < 2; ++dt) {
        hazard_ratio[h][dt] = config.smp_options.frailty_by_day_type
                                  ? frailty.Theta(exposure[h], dt)
                                  : frailty.Theta(exposure[h]);
      }
    }
    r.frailty_variance = frailty.variance();
    for (int a = 0; a < 2; ++a) {
      for (int b = 0; b < 2; ++b) r.frailty_covariance[a][b] = frailty.covariance(a, b);
    }
    r.frailty_dispersion = frailty.dispersion();
  }
  // Host frailty's population as of each hour (smp_pool_at kWindow, with
  // the online host frailty).
  std::unique_ptr<OnlineFrailty> online_frailty;
  if (with_frailty && config.smp_online_frailty && online_prior != nullptr &&
      config.smp_pool_at == BacktestConfig::PoolAt::kWindow) {
    online_frailty = std::make_unique<OnlineFrailty>(BuildOnlineFrailty(grids, config));
  } else if (with_frailty && r.smp_pool_at == BacktestConfig::PoolAt::kWindow) {
    r.smp_pool_at = BacktestConfig::PoolAt::kPrior;  // frailty from the training half only
  }

  // Load band of the first sojourn (EstimatorOptions::load_band_first_sojourn):
  // the population's standardised exit ratios per window length, from every
  // host's training half, as the predictor pools its registered hosts.
  std::unique_ptr<std::vector<availability::BandExposure>> band_exposure;
  if (want_smp && config.smp_options.load_band_first_sojourn &&
      config.smp_options.first_sojourn_kernel) {
    const std::vector<int> lengths = WindowLengths(config);
    band_exposure = std::make_unique<std::vector<availability::BandExposure>>(lengths.size());
    const int64_t sph = 3600 / config.step_seconds;
    for (size_t k = 0; k < lengths.size(); ++k) {
      const int64_t steps = int64_t{lengths[k]} * sph;
      for (const HostGrid& hg : grids.hosts) {
        (*band_exposure)[k].Merge(availability::CountBandExposure(
            hg.series, SplitUnix(hg, config), config.clock, steps,
            config.smp_options.recent_age_seconds, config.smp_options.long_age_seconds,
            OutageExclude(hg, steps)));
      }
    }
    r.band_exposure = *band_exposure;
    r.band_lengths = lengths;
  }

  // The population's level (BacktestConfig::smp_population_days), at the
  // population's rates by day type and hour: those of host frailty, or the
  // same model built here when host frailty is off.
  std::unique_ptr<PopulationLevel> population_level;
  if (want_smp && config.smp_population_days > 0 && !grids.hosts.empty()) {
    availability::HostFrailtyModel own_rates;
    if (!with_frailty) {
      for (const HostGrid& hg : grids.hosts) {
        own_rates.Add(availability::CountFailureExposure(
            hg.series, SplitUnix(hg, config), config.clock, OutageExclude(hg, 1)));
      }
      own_rates.Build();
    }
    population_level = std::make_unique<PopulationLevel>(
        BuildPopulationLevel(grids, config, with_frailty ? frailty : own_rates));
    r.population_level_beta = population_level->model.beta();
    r.population_level_pairs = population_level->model.pairs();
  }

  std::vector<HostOutput> outputs(grids.hosts.size());
  // Progress in (host, day type, start hour) units, 48 per host.
  constexpr size_t kUnitsPerHost = 48;
  std::atomic<size_t> units_done{0};
  std::mutex progress_mu;
  auto report = [&](size_t add) {
    const size_t u = units_done.fetch_add(add) + add;
    if (config.progress) {
      std::lock_guard<std::mutex> lock(progress_mu);
      config.progress(static_cast<double>(u) /
                      static_cast<double>(kUnitsPerHost * grids.hosts.size()));
    }
  };
  const bool online = with_frailty && config.smp_online_frailty;
  ParallelFor(grids.hosts.size(), config.threads, [&](size_t i) {
    size_t counted = 0;
    const std::function<void()> hour_done = [&] {
      if (counted + 1 < kUnitsPerHost) {
        ++counted;
        report(1);
      }
    };
    outputs[i] = EvaluateHost(grids.hosts[i], config, *methods, pooled.get(), hazard_ratio[i],
                              band_exposure.get(), online ? &frailty : nullptr,
                              online ? &exposure[i] : nullptr, population_level.get(),
                              online_prior.get(), online ? online_frailty.get() : nullptr, i,
                              hour_done);
    report(kUnitsPerHost - counted);  // the rest of the host's units: it is done
  });

  const int bins = config.reliability_bins;
  r.reliability.assign(methods->size(), std::vector<ReliabilityBin>(bins));
  r.reliability_busy.assign(methods->size(), std::vector<ReliabilityBin>(bins));
  for (size_t h = 0; h < outputs.size(); ++h) {
    HostOutput& o = outputs[h];
    r.cells_without_history += o.without_history;
    const bool busy = grids.hosts[h].busy;
    for (size_t k = 0; k < methods->size(); ++k) {
      for (int b = 0; b < bins; ++b) {
        const ReliabilityBin& src = o.reliability[(*methods)[k]][b];
        for (ReliabilityBin* dst :
             {&r.reliability[k][b], busy ? &r.reliability_busy[k][b] : nullptr}) {
          if (dst == nullptr) continue;
          dst->n += src.n;
          dst->sum_pred += src.sum_pred;
          dst->sum_outcome += src.sum_outcome;
        }
      }
    }
    for (CellResult& c : o.cells) r.cells.push_back(std::move(c));
  }
  return r;
}

MethodSummary SummarizeMethod(const BacktestResult& r, size_t m, bool busy_only,
                              int min_test_windows) {
  MethodSummary s;
  std::map<std::array<int, 3>, std::pair<double, int>> groups;
  double brier = 0;
  for (const CellResult& c : r.cells) {
    if (busy_only && !r.busy[c.host]) continue;
    brier += c.brier_sum[m];
    s.windows += c.n_test;
    if (c.n_test < min_test_windows || c.n_survived == 0) {
      ++s.cells_dropped;
      continue;
    }
    const double emp = c.emp();
    auto& g = groups[{c.day_type, c.hours, c.hour}];
    g.first += std::fabs(c.pred[m] - emp) / emp;
    ++g.second;
    ++s.cells;
  }
  s.brier = s.windows > 0 ? brier / static_cast<double>(s.windows) : 0;
  if (groups.empty()) return s;
  double sum = 0, worst = 0;
  std::map<std::pair<int, int>, std::pair<double, int>> per_length;
  for (const auto& [key, g] : groups) {
    const double e = g.first / g.second;
    sum += e;
    worst = std::max(worst, e);
    auto& pl = per_length[{key[0], key[1]}];
    pl.first += e;
    ++pl.second;
  }
  double worst_len = 0;
  for (const auto& [key, pl] : per_length) worst_len = std::max(worst_len, pl.first / pl.second);
  s.acc_grand = 1 - sum / static_cast<double>(groups.size());
  s.acc_paper_style = 1 - worst_len;
  s.acc_worst = 1 - worst;
  return s;
}

std::array<std::vector<LengthSummary>, 2> SummarizeByLength(const BacktestResult& r, size_t m,
                                                            int max_window_hours,
                                                            int min_test_windows) {
  std::array<std::vector<LengthSummary>, 2> out;
  // [dt][L][hour] -> sum, count ; brier per [dt][L]
  std::vector<std::vector<std::array<double, 24>>> sum(2), cnt(2);
  std::vector<std::vector<double>> bsum(2), bn(2), psum(2), ssum(2);
  for (int dt = 0; dt < 2; ++dt) {
    sum[dt].assign(max_window_hours + 1, {});
    cnt[dt].assign(max_window_hours + 1, {});
    bsum[dt].assign(max_window_hours + 1, 0);
    bn[dt].assign(max_window_hours + 1, 0);
    psum[dt].assign(max_window_hours + 1, 0);
    ssum[dt].assign(max_window_hours + 1, 0);
    out[dt].assign(max_window_hours, {});
  }
  for (const CellResult& c : r.cells) {
    if (c.hours > max_window_hours) continue;
    bsum[c.day_type][c.hours] += c.brier_sum[m];
    bn[c.day_type][c.hours] += c.n_test;
    psum[c.day_type][c.hours] += c.pred[m] * c.n_test;  // pred = mean over the cell's windows
    ssum[c.day_type][c.hours] += c.n_survived;
    if (c.n_test < min_test_windows || c.n_survived == 0) continue;
    sum[c.day_type][c.hours][c.hour] += std::fabs(c.pred[m] - c.emp()) / c.emp();
    cnt[c.day_type][c.hours][c.hour] += 1;
  }
  for (int dt = 0; dt < 2; ++dt) {
    for (int L = 1; L <= max_window_hours; ++L) {
      LengthSummary& ls = out[dt][L - 1];
      double total = 0;
      int hours = 0;
      ls.min_rel_err = std::numeric_limits<double>::infinity();
      ls.max_rel_err = 0;
      for (int h = 0; h < 24; ++h) {
        if (cnt[dt][L][h] == 0) continue;
        const double e = sum[dt][L][h] / cnt[dt][L][h];
        total += e;
        ++hours;
        ls.min_rel_err = std::min(ls.min_rel_err, e);
        ls.max_rel_err = std::max(ls.max_rel_err, e);
        ls.n += static_cast<int64_t>(cnt[dt][L][h]);
      }
      if (hours == 0) ls.min_rel_err = 0;
      ls.avg_rel_err = hours > 0 ? total / hours : 0;
      ls.brier = bn[dt][L] > 0 ? bsum[dt][L] / bn[dt][L] : 0;
      ls.windows = static_cast<int64_t>(bn[dt][L]);
      ls.mean_pred = bn[dt][L] > 0 ? psum[dt][L] / bn[dt][L] : 0;
      ls.observed = bn[dt][L] > 0 ? ssum[dt][L] / bn[dt][L] : 0;
    }
  }
  return out;
}

namespace {

// An average over nothing is null, not 0 (which would read as a perfect score).
nlohmann::json OrNull(double v, bool have) { return have ? nlohmann::json(v) : nlohmann::json(); }

nlohmann::json SummaryJson(const MethodSummary& s) {
  const bool scored = s.cells > 0;
  return {{"acc_grand", OrNull(s.acc_grand, scored)},
          {"acc_paper_style", OrNull(s.acc_paper_style, scored)},
          {"acc_worst", OrNull(s.acc_worst, scored)},
          {"brier", OrNull(s.brier, s.windows > 0)},
          {"cells", s.cells},
          {"cells_dropped", s.cells_dropped},
          {"windows", s.windows}};
}

nlohmann::json ReliabilityJson(const std::vector<ReliabilityBin>& bins) {
  nlohmann::json out = nlohmann::json::array();
  const int n = static_cast<int>(bins.size());
  for (int b = 0; b < n; ++b) {
    const ReliabilityBin& rb = bins[b];
    nlohmann::json j = {{"bin_lo", static_cast<double>(b) / n},
                        {"bin_hi", static_cast<double>(b + 1) / n},
                        {"n", rb.n}};
    if (rb.n > 0) {
      j["mean_pred"] = rb.sum_pred / rb.n;
      j["observed"] = rb.sum_outcome / rb.n;
    } else {
      j["mean_pred"] = nullptr;
      j["observed"] = nullptr;
    }
    out.push_back(j);
  }
  return out;
}

}  // namespace

nlohmann::json ResultToJson(const BacktestResult& r, const BacktestConfig& config) {
  nlohmann::json j;
  const char* dt_names[2] = {"weekday", "weekend"};
  for (size_t m = 0; m < r.methods.size(); ++m) {
    const std::string& name = r.methods[m];
    auto by_len = SummarizeByLength(r, m, config.max_window_hours, config.min_test_windows);
    for (int dt = 0; dt < 2; ++dt) {
      for (int L = 1; L <= config.max_window_hours; ++L) {
        const LengthSummary& ls = by_len[dt][L - 1];
        const bool scored = ls.n > 0, tested = ls.windows > 0;
        j["summary"][name][dt_names[dt]][std::to_string(L)] = {
            {"avg_rel_err", OrNull(ls.avg_rel_err, scored)},
            {"min_rel_err", OrNull(ls.min_rel_err, scored)},
            {"max_rel_err", OrNull(ls.max_rel_err, scored)},
            {"brier", OrNull(ls.brier, tested)},
            {"n", ls.n},
            {"mean_pred", OrNull(ls.mean_pred, tested)},
            {"observed", OrNull(ls.observed, tested)},
            {"windows", ls.windows}};
      }
    }
    j["overall"][name] = SummaryJson(SummarizeMethod(r, m, false, config.min_test_windows));
    j["overall_busy"][name] = SummaryJson(SummarizeMethod(r, m, true, config.min_test_windows));
    j["reliability"][name] = ReliabilityJson(r.reliability[m]);
    j["reliability_busy"][name] = ReliabilityJson(r.reliability_busy[m]);
  }
  int64_t busy = 0;
  for (bool b : r.busy) busy += b;
  j["protocol"] = {{"step_seconds", config.step_seconds},
                   // A fixed offset, or null with a zone (time_zone).
                   {"utc_offset_seconds", config.clock.has_zone()
                                              ? nlohmann::json(nullptr)
                                              : nlohmann::json(config.clock.OffsetAt(0))},
                   {"time_zone", config.clock.zone_name()},
                   {"max_window_hours", config.max_window_hours},
                   {"history_days", config.history_days},
                   {"train_windows", config.windows_per_length ? "per-length" : "longest"},
                   {"train_ratio", config.train_ratio},
                   {"outage_fraction", config.outage_fraction},
                   {"outage_min_hosts", config.outage_min_hosts},
                   {"min_test_windows", config.min_test_windows},
                   {"th1", config.classifier.th1},
                   {"th2", config.classifier.th2},
                   {"grace_seconds", config.classifier.grace_seconds},
                   {"guest_working_set_mb", config.classifier.guest_working_set_mb},
                   {"revocation_gap_seconds", config.classifier.revocation_gap_seconds}};
  j["hosts"] = r.hosts.size();
  j["busy_hosts"] = busy;
  j["cells_without_history"] = r.cells_without_history;
  j["outage_grid_points"] = r.outage_points;
  j["outage_few_hosts_grid_points"] = r.outage_few_hosts_points;
  if (config.smp_options.host_frailty) {
    j["host_frailty"] = {{"variance", r.frailty_variance},
                         {"dispersion", r.frailty_dispersion},
                         {"by_day_type", config.smp_options.frailty_by_day_type},
                         {"day_type_covariance",
                          {{"weekday", r.frailty_covariance[0][0]},
                           {"weekend", r.frailty_covariance[1][1]},
                           {"weekday_weekend", r.frailty_covariance[0][1]}}}};
  }
  if (!r.band_exposure.empty()) {
    // load_band[hours][day type][state][band] = {other, failure}: the first
    // sojourn's exit ratios (O + 1) / (E + 1) and their O, E.
    nlohmann::json lb = nlohmann::json::object();
    for (size_t k = 0; k < r.band_exposure.size(); ++k) {
      const availability::BandExposure& e = r.band_exposure[k];
      nlohmann::json by_len = nlohmann::json::object();
      for (int dt = 0; dt < 2; ++dt) {
        nlohmann::json by_dt = nlohmann::json::object();
        for (int st = 0; st < 2; ++st) {
          nlohmann::json by_state = nlohmann::json::object();
          for (int b = 0; b < 2; ++b) {
            nlohmann::json cell = nlohmann::json::object();
            for (int c = 0; c < 2; ++c) {
              cell[c == 0 ? "other" : "failure"] = {{"ratio", e.Ratio(dt, st, b, c)},
                                                   {"observed", e.observed[dt][st][b][c]},
                                                   {"expected", e.expected[dt][st][b][c]}};
            }
            by_state[b == 0 ? "low" : "high"] = cell;
          }
          by_dt[st == 0 ? "S1" : "S2"] = by_state;
        }
        by_len[dt == 0 ? "weekday" : "weekend"] = by_dt;
      }
      lb[std::to_string(r.band_lengths[k])] = by_len;
    }
    j["load_band"] = lb;
  }
  j["grid_points"] = r.grid_points;
  // days: the between-day spread of the population's failure rate by day
  // type, over all days and over the days that are training (test) days of
  // every host.
  nlohmann::json days = nlohmann::json::object();
  for (int dt = 0; dt < 2; ++dt) {
    nlohmann::json by_role = nlohmann::json::object();
    for (DayRole role : kDayRoles) {
      const DayDispersion d = SummarizeDays(r.days, dt, role, config.step_seconds);
      by_role[DayRoleName(role)] = {
          {"days", d.days},
          {"rate_per_up_hour", d.rate_per_up_hour},
          {"sd_rate_per_up_hour", d.sd_rate_per_up_hour},
          {"overdispersion", d.overdispersion}};
    }
    days[dt == 0 ? "weekday" : "weekend"] = by_role;
  }
  j["population_by_day"] = days;
  if (config.smp_population_days > 0) {
    j["population_level"] = {{"days", config.smp_population_days},
                             {"beta", r.population_level_beta},
                             {"pairs", r.population_level_pairs}};
  }
  return j;
}

const char* DayRoleName(DayRole role) {
  switch (role) {
    case DayRole::kTrain:
      return "train";
    case DayRole::kTest:
      return "test";
    default:
      return "all";
  }
}

DayDispersion SummarizeDays(const std::vector<DayCount>& days, int day_type, DayRole role,
                            int64_t step_seconds) {
  DayDispersion out;
  std::vector<const DayCount*> used;
  double up = 0, failures = 0;
  for (const DayCount& d : days) {
    if (d.day_type != day_type || d.up_steps <= 0) continue;
    if (role == DayRole::kTrain && d.train_hosts != d.hosts) continue;
    if (role == DayRole::kTest && d.train_hosts != 0) continue;
    used.push_back(&d);
    up += d.up_steps;
    failures += d.failures;
  }
  out.days = static_cast<int>(used.size());
  if (used.empty() || step_seconds <= 0) return out;
  const double hours_per_step = static_cast<double>(step_seconds) / 3600.0;
  const double rate = failures / up;  // per up step
  out.rate_per_up_hour = rate / hours_per_step;
  if (used.size() < 2) return out;
  double ss = 0, chi2 = 0;
  for (const DayCount* d : used) {
    const double r = d->failures / d->up_steps / hours_per_step - out.rate_per_up_hour;
    ss += r * r;
    const double e = d->up_steps * rate;
    if (e > 0) chi2 += (d->failures - e) * (d->failures - e) / e;
  }
  const double dof = static_cast<double>(used.size() - 1);
  // The daily rates' spread around the pooled rate.
  out.sd_rate_per_up_hour = std::sqrt(ss / dof);
  out.overdispersion = rate > 0 ? chi2 / dof : 0;
  return out;
}

absl::StatusOr<NoiseResult> RunNoiseInjection(const std::vector<HostTrace>& traces,
                                              const BacktestConfig& config,
                                              const std::vector<int>& injections,
                                              const std::vector<int>& window_hours, uint64_t seed) {
  if (absl::Status s = ValidateBacktestConfig(config); !s.ok()) return s;
  for (int w : window_hours) {
    if (w < 1 || w > config.max_window_hours) {
      return absl::InvalidArgumentError(absl::StrCat("noise window of ", w, " h is out of range"));
    }
  }
  for (int k : injections) {
    if (k < 0) return absl::InvalidArgumentError("noise injections must be >= 0");
  }
  Grids grids = BuildGrids(traces, config);
  const int64_t step = config.step_seconds;
  const int64_t sph = 3600 / step;
  const int64_t M = config.max_window_hours * sph;
  const int kHour = 8;
  const std::vector<std::string> names = {"smp", "smp_paper", "window_frequency"};
  NoiseResult res;
  res.injections = injections;
  res.window_hours = window_hours;
  std::map<std::string, std::vector<std::vector<double>>> sums;
  for (const std::string& n : names) {
    sums[n].assign(injections.size(), std::vector<double>(window_hours.size(), 0));
    res.hosts[n].assign(injections.size(), std::vector<int>(window_hours.size(), 0));
  }
  // The estimators see the (clean or noisy) series through the library's
  // CollectStats, exactly as in the backtest; the shrinkage prior of smp is
  // taken from the clean data so only the host's own log is disturbed.
  // By window length in hours (0 = the longest, when windows_per_length is
  // off): windows of that length, as in the backtest.
  auto hours_of = [&](int64_t m_steps) {
    return config.windows_per_length ? static_cast<int>(m_steps / sph) : 0;
  };
  auto steps_of = [&](int hours) { return hours > 0 ? hours * sph : M; };
  std::map<int, availability::SojournStats> pooled;
  const bool with_pooled = config.smp_options.prior_windows > 0 && config.smp_prior == "hosts";
  if (with_pooled) {
    for (int w : window_hours) {
      const int hours = hours_of(w * sph);
      if (pooled.count(hours)) continue;
      availability::PopulationPriorBuilder builder;
      for (const HostGrid& hg : grids.hosts) {
        builder.Add(availability::CollectStats(hg.series, SpecOf(0, kHour, config, hours),
                                               SplitUnix(hg, config), config.smp_options,
                                               OutageExclude(hg, steps_of(hours))));
      }
      pooled[hours] = builder.Build(config.smp_options.level_corrected_borrowing);
    }
  }
  // Host frailty: the population model from the clean data; each host's
  // ratio from the series it is given (clean or noisy), as its own log.
  availability::HostFrailtyModel frailty;
  const bool with_frailty = with_pooled && config.smp_options.host_frailty;
  if (with_frailty) {
    for (const HostGrid& hg : grids.hosts) {
      frailty.Add(availability::CountFailureExposure(hg.series, SplitUnix(hg, config),
                                                     config.clock, OutageExclude(hg, 1)));
    }
    frailty.Build();
  }
  // `train`: the longest windows (those the noise goes into).
  auto predict = [&](const HostGrid& hg, const availability::StateSeries& series,
                     const std::vector<TrainWindow>& train, const std::string& method,
                     int64_t m_steps) -> double {
    const int hours = hours_of(m_steps);
    const int64_t steps = steps_of(hours);
    if (method == "window_frequency") {
      const std::vector<TrainWindow> own =
          hours > 0 ? TrainingWindows(hg, 0, kHour, steps, config, hours) : train;
      int64_t n = 0, s = 0;
      for (const TrainWindow& w : own) {
        if (w.steps < m_steps) continue;
        const HostState* st = &series.states[w.start];
        if (st[0] != HostState::kS1) continue;
        bool surv = true;
        for (int64_t k = 1; k <= m_steps; ++k) surv &= !IsFailure(st[k]);
        ++n;
        s += surv;
      }
      return n > 0 ? static_cast<double>(s) / n : 0.5;
    }
    const availability::EstimatorOptions opt =
        method == "smp" ? config.smp_options : SmpPaperOptions();
    const auto exclude = OutageExclude(hg, steps);
    const availability::WindowSpec spec = SpecOf(0, kHour, config, hours);
    availability::SojournStats stats =
        availability::CollectStats(series, spec, SplitUnix(hg, config), opt, exclude);
    const availability::SojournStats* prior = nullptr;
    availability::SojournStats hours_prior;
    if (method == "smp" && opt.prior_windows > 0) {
      if (config.smp_prior == "hosts") {
        prior = &pooled.at(hours);
        if (with_frailty) {
          const availability::FailureExposure exposure = availability::CountFailureExposure(
              series, SplitUnix(hg, config), config.clock, OutageExclude(hg, 1));
          // These tests use weekday windows (SpecOf(0, ...)).
          stats.prior_hazard_ratio = opt.frailty_by_day_type ? frailty.Theta(exposure, 0)
                                                             : frailty.Theta(exposure);
        }
      } else if (config.smp_prior == "hours") {
        for (int h2 = 0; h2 < 24; ++h2) {
          if (h2 == kHour) continue;
          hours_prior.Merge(availability::CollectStats(series, SpecOf(0, h2, config, hours),
                                                       SplitUnix(hg, config), opt, exclude));
        }
        prior = &hours_prior;
      }
    }
    return availability::PredictFromStats(stats, HostState::kS1, static_cast<int>(steps), opt,
                                          prior)
        .tr[m_steps - 1];
  };
  for (const HostGrid& hg : grids.hosts) {
    std::vector<TrainWindow> train = TrainingWindows(hg, 0, kHour, M, config);
    if (train.empty()) continue;
    for (size_t ki = 0; ki < injections.size(); ++ki) {
      // One occurrence per training weekday log, newest day first (cycling
      // when there are more occurrences than days), starting in the hour
      // after 08:00, lasting 60..1800 s.
      std::mt19937_64 rng(seed + 1000003ull * static_cast<uint64_t>(hg.index) + ki);
      availability::StateSeries noisy = hg.series;
      std::uniform_int_distribution<int64_t> at(1, sph);
      std::uniform_int_distribution<int64_t> len(60, 1800);
      for (int k = 0; k < injections[ki]; ++k) {
        const TrainWindow& w = train[static_cast<size_t>(k) % train.size()];
        const int64_t a = at(rng);
        const int64_t steps = std::max<int64_t>(1, (len(rng) + step / 2) / step);
        for (int64_t x = a; x < a + steps && x <= w.steps; ++x) {
          noisy.states[w.start + x] = HostState::kS3;
        }
      }
      for (size_t wi = 0; wi < window_hours.size(); ++wi) {
        const int64_t m_steps = window_hours[wi] * sph;
        for (const std::string& n : names) {
          const double c = predict(hg, hg.series, train, n, m_steps);
          if (!(c > 0)) continue;
          const double p = predict(hg, noisy, train, n, m_steps);
          sums[n][ki][wi] += std::fabs(p - c) / c;
          res.hosts[n][ki][wi] += 1;
        }
      }
    }
  }
  for (const std::string& n : names) {
    res.discrepancy[n].assign(injections.size(), std::vector<double>(window_hours.size(), 0));
    for (size_t ki = 0; ki < injections.size(); ++ki) {
      for (size_t wi = 0; wi < window_hours.size(); ++wi) {
        const int cnt = res.hosts[n][ki][wi];
        res.discrepancy[n][ki][wi] = cnt > 0 ? sums[n][ki][wi] / cnt : 0;
      }
    }
  }
  return res;
}

}  // namespace sojourn::backtest
