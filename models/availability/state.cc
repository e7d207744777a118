#include "models/availability/state.h"

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

StateSeries ClassifyToGrid(const std::vector<sojourn::HostSample>& samples,
                           const ClassifierConfig& cfg, int64_t step_seconds,
                           int64_t grid_origin_unix) {
  StateSeries out;
  out.step_seconds = step_seconds;
  if (samples.empty() || step_seconds <= 0) return out;
  auto floor_div = [](int64_t a, int64_t b) {
    int64_t q = a / b;
    if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
    return q;
  };
  const int64_t first = samples.front().unix_seconds;
  const int64_t last = samples.back().unix_seconds;
  // First grid point >= first sample, last grid point <= last sample.
  const int64_t k0 = -floor_div(grid_origin_unix - first, step_seconds);
  const int64_t k1 = floor_div(last - grid_origin_unix, step_seconds);
  out.start_unix = grid_origin_unix + k0 * step_seconds;
  if (k1 < k0) return out;
  out.states.reserve(static_cast<size_t>(k1 - k0 + 1));
  out.load_band.reserve(static_cast<size_t>(k1 - k0 + 1));
  StateClassifier classifier(cfg);
  size_t next = 0;
  double last_load = 0;
  for (int64_t k = k0; k <= k1; ++k) {
    const int64_t t = grid_origin_unix + k * step_seconds;
    while (next < samples.size() && samples[next].unix_seconds <= t) {
      if (samples[next].unix_seconds >= classifier.last_sample_unix().value_or(INT64_MIN)) {
        last_load = samples[next].cpu_load;
      }
      classifier.Add(samples[next]);
      ++next;
    }
    const HostState st = classifier.StateAt(t);
    out.states.push_back(st);
    out.load_band.push_back(LoadBandOf(st, last_load, cfg));
  }
  return out;
}

}  // namespace sojourn::availability
