#include "services/monitor/adaptive_period.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace sojourn::monitor {

AdaptivePeriod::AdaptivePeriod(const AdaptivePeriodConfig& config, uint64_t seed)
    : config_(config),
      classifier_(config.classifier),
      rng_(seed),
      period_(config.min_period) {}

bool AdaptivePeriod::Observe(const HostSample& sample, Kind kind) {
  Condition now;
  now.state = classifier_.Add(sample);
  now.band = sample.cpu_load < config_.classifier.th1   ? 0
             : sample.cpu_load <= config_.classifier.th2 ? 1
                                                         : 2;
  const int64_t t = sample.unix_seconds;
  if (!condition_.has_value()) {
    condition_ = now;
    stable_since_unix_ = t;
    return false;
  }
  if (!(now == *condition_)) {
    // Paper 001 section IV.B: a state change, at a regular sample or at a
    // random extra one, decreases the period (to its minimum).
    condition_ = now;
    period_ = config_.min_period;
    stable_since_unix_ = t;
    return true;
  }
  // Paper 001 section IV.B: "the period is doubled if for a threshold amount
  // of time, no state change happens within the period pd". Judged at the
  // regular samples; the extra ones only look for changes.
  if (kind == Kind::kRegular && period_ < config_.max_period &&
      t - stable_since_unix_ >= absl::ToInt64Seconds(config_.stable)) {
    period_ = std::min(2 * period_, config_.max_period);
    stable_since_unix_ = t;
  }
  return false;
}

std::optional<absl::Duration> AdaptivePeriod::DrawExtraOffset() {
  const int64_t p = absl::ToInt64Seconds(period_);
  if (period_ <= config_.min_period || period_ <= config_.extra_samples_above || p < 2) {
    return std::nullopt;
  }
  // Paper 001 section IV.B: "random sampling is also done outside of the
  // regular monitoring period".
  std::uniform_int_distribution<int64_t> offset(1, p - 1);
  return absl::Seconds(offset(rng_));
}

std::string AdaptivePeriod::condition() const {
  if (!condition_.has_value()) return "none yet";
  static constexpr const char* kBands[] = {"low", "mid", "high"};
  std::string out = absl::StrCat("S", availability::StateIndex(condition_->state), " (load ",
                                 kBands[condition_->band]);
  if (condition_->band == 2 && !availability::IsFailure(condition_->state)) {
    absl::StrAppend(&out, ": spike");
  }
  return absl::StrCat(out, ")");
}

}  // namespace sojourn::monitor
