// The adaptive monitoring period of paper 001 (HPDC'06) section IV.B,
// "Non-intrusive Resource Monitoring": "Starting from a period (pd) of 1 sec,
// the period is doubled if for a threshold amount of time, no state change
// happens within the period pd. [...] random sampling is also done outside of
// the regular monitoring period to determine if the period has to be
// decreased."
//
// Here:
//   - the period starts at min_period (the paper's 1 s);
//   - a regular sample that shows no change, taken at least `stable` after
//     the last change (or the last doubling), doubles the period, capped at
//     max_period: every level is held for `stable` before the next doubling;
//   - a change seen by any sample, regular or random extra, drops the period
//     back to min_period at once;
//   - after each regular sample, while the period is above both min_period
//     and extra_samples_above, one extra sample is taken at a random
//     whole-second offset drawn uniformly in [1 s, period - 1 s] (whole
//     seconds: samples carry Unix seconds, and two samples in one second would
//     be a zero-length interval for the sampler and a duplicate for the state
//     manager). The monitor sets extra_samples_above to its nominal period
//     (--period_seconds): up to it, the regular samples already come at least
//     as often as a fixed-period monitor's, which is as often as the state
//     manager's grid resolves, so random ones would only add cost (at a 2 s
//     period, an extra sample at offset 1 s would double it); above it, they
//     are what catches a change before the long period ends.
//
// What counts as a change: the condition of the host is its state S1..S4 as
// StateClassifier computes it from the monitor's own samples with the
// monitor's thresholds, together with the sample's load band (below Th1,
// Th1..Th2, above Th2). The band matters for the guest gateway: a transient
// spike above Th2 keeps the state S1/S2 but suspends the guests, and the
// spike turns into S3 after the grace period; both its start and its end
// must be followed at the minimum period, not at a period of up to
// max_period. A change of band inside S4 (memory) also counts: the state
// after S4 ends depends on it.
#ifndef SOJOURN_SERVICES_MONITOR_ADAPTIVE_PERIOD_H_
#define SOJOURN_SERVICES_MONITOR_ADAPTIVE_PERIOD_H_

#include <cstdint>
#include <optional>
#include <random>
#include <string>

#include "absl/time/time.h"
#include "common/host_sample.h"
#include "models/availability/state.h"

namespace sojourn::monitor {

struct AdaptivePeriodConfig {
  // Whole seconds, 1 <= min_period <= max_period (main.cc checks the flags).
  absl::Duration min_period = absl::Seconds(1);
  absl::Duration max_period = absl::Seconds(30);
  // Time without a change before the period doubles.
  absl::Duration stable = absl::Seconds(60);
  // Random extra samples only while the period is longer than this (and than
  // min_period).
  absl::Duration extra_samples_above = absl::ZeroDuration();
  // The monitor's thresholds (--th1, --th2, --grace_seconds, --working_set_mb).
  availability::ClassifierConfig classifier;
};

// Not thread-safe: the monitor's sampling loop owns it.
class AdaptivePeriod {
 public:
  enum class Kind { kRegular, kExtra };

  // `seed` seeds the random offsets of the extra samples (tests fix it).
  AdaptivePeriod(const AdaptivePeriodConfig& config, uint64_t seed);

  // Classifies `sample` (samples in time order) and adapts the period as the
  // file comment says. Returns true when the sample shows a change of the
  // host's condition (state or load band) since the previous sample. The
  // first sample only sets the condition.
  bool Observe(const HostSample& sample, Kind kind);

  // Offset after a regular sample at which to take the random extra sample,
  // drawn uniformly in whole seconds in [1 s, period() - 1 s]; nullopt at
  // min_period (the period cannot decrease), at or below
  // extra_samples_above, or below 2 s.
  std::optional<absl::Duration> DrawExtraOffset();

  absl::Duration period() const { return period_; }
  const AdaptivePeriodConfig& config() const { return config_; }
  // The condition after the last sample, for logs: "S1", "S2, spike", ...
  std::string condition() const;

 private:
  struct Condition {
    availability::HostState state = availability::HostState::kS5;
    int band = -1;  // 0: load < th1, 1: th1..th2, 2: > th2
    bool operator==(const Condition& o) const { return state == o.state && band == o.band; }
  };

  const AdaptivePeriodConfig config_;
  availability::StateClassifier classifier_;
  std::mt19937_64 rng_;
  absl::Duration period_;
  std::optional<Condition> condition_;
  // Time of the last change, of the last doubling, or of the first sample.
  int64_t stable_since_unix_ = 0;
};

}  // namespace sojourn::monitor

#endif  // SOJOURN_SERVICES_MONITOR_ADAPTIVE_PERIOD_H_
