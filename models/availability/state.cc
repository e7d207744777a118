#include "models/availability/state.h"

#include <algorithm>
#include <climits>
#include <cmath>

namespace sojourn::availability {

StateClassifier::StateClassifier(const ClassifierConfig& config) : config_(config) {}

HostState StateClassifier::Add(const sojourn::HostSample& s) {
  const int64_t t = s.unix_seconds;
  if (last_unix_ != kNone && t < last_unix_) return current_;
  // A gap longer than the revocation gap was S5 (section 7.2): the host (or
  // its monitor) was off, so the load history before the gap is forgotten.
  const bool continuous =
      last_unix_ != kNone && t - last_unix_ <= config_.revocation_gap_seconds;
  if (!continuous) {
    high_since_ = kNone;
    base_ = HostState::kS1;
  }
  const double load = s.cpu_load;
  if (load > config_.th2) {
    // The sample's load describes the interval since the previous sample, so
    // a run of high samples started at the sample before the first high one.
    if (high_since_ == kNone) high_since_ = continuous ? last_unix_ : t;
  } else {
    high_since_ = kNone;
    base_ = load < config_.th1 ? HostState::kS1 : HostState::kS2;
  }
  last_unix_ = t;

  if (s.has_free_mem() && s.free_mem_mb < config_.guest_working_set_mb) {
    current_ = HostState::kS4;
  } else if (high_since_ != kNone && t - high_since_ > config_.grace_seconds) {
    current_ = HostState::kS3;
  } else {
    // Below th2, or a transient spike: the state before the spike (section 4).
    current_ = base_;
  }
  return current_;
}

HostState StateClassifier::StateAt(int64_t unix_seconds) const {
  if (last_unix_ == kNone || unix_seconds - last_unix_ > config_.revocation_gap_seconds) {
    return HostState::kS5;
  }
  return current_;
}

uint8_t LoadBandOf(HostState s, double load, const ClassifierConfig& cfg) {
  if (!std::isfinite(load)) return kLoadBandUnknown;
  switch (s) {
    case HostState::kS1:
      return load < cfg.th1 / 2 ? 0 : 1;
    case HostState::kS2:
      return load < (cfg.th1 + cfg.th2) / 2 ? 0 : 1;
    default:
      return kLoadBandUnknown;
  }
}

namespace {

int64_t FloorDiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

}  // namespace

GridBuilder::GridBuilder(const ClassifierConfig& cfg, int64_t step_seconds,
                         int64_t grid_origin_unix, int64_t max_points)
    : cfg_(cfg),
      origin_(grid_origin_unix),
      max_points_(max_points),
      classifier_(cfg),
      series_(std::make_shared<StateSeries>()) {
  series_->step_seconds = step_seconds;
}

StateSeries& GridBuilder::Mutable() {
  if (series_.use_count() > 1) series_ = std::make_shared<StateSeries>(*series_);
  return *series_;
}

void GridBuilder::Reserve(size_t points) {
  StateSeries& s = Mutable();
  s.states.reserve(points);
  s.load_band.reserve(points);
}

void GridBuilder::Emit(int64_t t, bool redo) {
  StateSeries& s = Mutable();
  const HostState st = classifier_.StateAt(t);
  if (redo) {
    const size_t n = s.states.size();
    if (st != s.states.back()) {
      if (run_start_ == t && n >= 2 && s.states[n - 2] == st) {
        // The last point alone was its run; now it joins the run before.
        run_start_ = prev_run_start_;
        prev_run_start_ = 0;
      } else if (run_start_ != t) {
        // It leaves a longer run and starts its own.
        prev_run_start_ = run_start_;
        run_start_ = t;
      }
    }
    s.states.back() = st;
    s.load_band.back() = LoadBandOf(st, last_load_, cfg_);
    return;
  }
  if (s.states.empty() || st != s.states.back()) {
    prev_run_start_ = s.states.empty() ? 0 : run_start_;
    run_start_ = t;
  }
  s.states.push_back(st);
  s.load_band.push_back(LoadBandOf(st, last_load_, cfg_));
  const int64_t size = static_cast<int64_t>(s.states.size());
  if (max_points_ > 0 && size > max_points_ + std::max<int64_t>(1, max_points_ / 8)) {
    const int64_t drop = size - max_points_;
    s.states.erase(s.states.begin(), s.states.begin() + drop);
    s.load_band.erase(s.load_band.begin(), s.load_band.begin() + drop);
    s.start_unix += drop * s.step_seconds;
  }
}

HostState GridBuilder::Add(const sojourn::HostSample& sample) {
  const int64_t step = series_->step_seconds;
  const int64_t t = sample.unix_seconds;
  const std::optional<int64_t> prev = classifier_.last_sample_unix();
  if (prev.has_value() && t < *prev) return classifier_.current();
  if (step <= 0) return classifier_.Add(sample);
  // The first grid point at or after the sample.
  const int64_t first_k = -FloorDiv(origin_ - t, step);
  if (!started_ || (max_points_ > 0 && first_k - next_k_ > max_points_)) {
    // The first sample, or one so long after the last that the bounded grid
    // would hold nothing before it: the grid starts at it.
    StateSeries& s = Mutable();
    s.states.clear();
    s.load_band.clear();
    s.start_unix = origin_ + first_k * step;
    next_k_ = first_k;
    started_ = true;
  }
  // Points before the sample are final: the state after every earlier sample.
  while (origin_ + next_k_ * step < t) {
    Emit(origin_ + next_k_ * step, false);
    ++next_k_;
  }
  const HostState state = classifier_.Add(sample);
  last_load_ = sample.cpu_load;
  if (origin_ + next_k_ * step == t) {
    Emit(t, false);
    ++next_k_;
  } else if (prev.has_value() && *prev == t && !series_->states.empty() &&
             origin_ + (next_k_ - 1) * step == t) {
    // A second sample at the time of the last grid point: that point is the
    // state after both.
    Emit(t, true);
  }
  return state;
}

StateSeries GridBuilder::Release() && {
  StateSeries out = std::move(Mutable());
  series_ = std::make_shared<StateSeries>();
  return out;
}

StateSeries ClassifyToGrid(const std::vector<sojourn::HostSample>& samples,
                           const ClassifierConfig& cfg, int64_t step_seconds,
                           int64_t grid_origin_unix) {
  if (samples.empty() || step_seconds <= 0) {
    StateSeries out;
    out.step_seconds = step_seconds;
    return out;
  }
  GridBuilder builder(cfg, step_seconds, grid_origin_unix);
  const int64_t span = samples.back().unix_seconds - samples.front().unix_seconds;
  if (span >= 0) builder.Reserve(static_cast<size_t>(span / step_seconds + 1));
  for (const sojourn::HostSample& s : samples) builder.Add(s);
  return std::move(builder).Release();
}

}  // namespace sojourn::availability
