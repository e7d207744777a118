// Live accuracy of the availability predictions: issue 3's backtest on the
// running cluster. A sample of the TR answers for windows from now is kept
// until each window has passed, then scored against what the host's state
// manager saw in it (no S3, S4 or S5: survived), beside the empirical
// baseline the same answer carries (window_frequency: the host's own past
// windows like it, PredictAvailabilityResponse.past_up_windows*), on the same
// windows. Brier score = brier_sum / scored, per method (paper 000 section
// 8.2.1 scores the same event, one window at a time).
#ifndef SOJOURN_SERVICES_PREDICTOR_AVAILABILITY_SCORER_H_
#define SOJOURN_SERVICES_PREDICTOR_AVAILABILITY_SCORER_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "services/predictor/statemgr_directory.h"
#include "sojourn/v1/predictor.pb.h"
#include "sojourn/v1/statemgr.pb.h"

namespace sojourn::predictor {

struct AvailabilityScorerConfig {
  // The model's name in the metrics: smp, or smp_paper (--paper_estimator).
  std::string method = "smp";
  // Windows waiting for their end at most; an answer offered beyond it is
  // not kept (counted as unresolved, reason "full").
  size_t max_pending = 10000;
  // Time the state manager has, after a window's end plus the host's
  // revocation gap, to hold the samples of it (a monitor pushes its samples
  // every few seconds).
  absl::Duration settle = absl::Minutes(1);
  // A window whose state manager cannot be asked is tried again every pass
  // until this long after its end, then dropped (reason "unreachable").
  absl::Duration give_up_after = absl::Hours(24);
  // State managers asked at most per pass (oldest windows first; the rest
  // wait for the next pass), so that a pass over many windows of a slow
  // state manager ends and a shutdown does not wait for it.
  int max_calls_per_pass = 1000;
};

// What a window turned out to be, from the states its host's state manager
// reports for it (GetStateIntervals over [start, end), through_silence: after
// the host's newest sample, its state until the revocation gap has passed,
// S5 after it, as a live watcher saw it): failed when a state in it is S3, S4
// or S5, survived when the states cover it without one. nullopt when they do
// not start at the window or stop before its end (the host's history was
// cut, e.g. by retention, or a state manager without through_silence).
std::optional<bool> WindowSurvived(const sojourn::v1::GetStateIntervalsResponse& states,
                                   int64_t start, int64_t end);

// Thread-safe, with one caller of ScoreDue at a time.
class AvailabilityScorer {
 public:
  // Declares its metrics on `metrics` at 0. `directory`, `clock` and
  // `metrics` must outlive the scorer.
  AvailabilityScorer(StatemgrDirectory& directory, Clock& clock, Metrics& metrics,
                     const AvailabilityScorerConfig& config = {});

  // Keeps the answer to `request`, from the state manager at
  // `statemgr_address` (asked again for the outcome), for scoring when it
  // is for a window from now (start 0) from an up state (the answer has
  // valid_until_unix_seconds) with past windows of the host behind the
  // baseline (past_up_windows > 0), and no window of the same host and
  // length is pending yet (one at a time: the windows scored do not
  // overlap, and a ranking's many requests count once). The window scored
  // is the model's: the grid points after the host's newest sample
  // (last_sample_unix_seconds, by the host's clock) up to the window's
  // length rounded up to whole steps.
  void Offer(const sojourn::v1::PredictAvailabilityRequest& request,
             const sojourn::v1::PredictAvailabilityResponse& response,
             const std::string& statemgr_address);

  // Scores the pending windows that ended at least their revocation gap
  // plus `settle` ago, oldest first, asking their state managers (a call
  // per window, without a lock held; at most max_calls_per_pass, and none
  // more once `stop` returns true). Returns the number scored.
  int ScoreDue(const std::function<bool()>& stop = nullptr);

  size_t pending() const;

 private:
  struct Pending {
    std::string statemgr_address;
    int64_t start = 0, end = 0;
    int64_t revocation_gap = 0;
    double tr = 0;
    double window_frequency = 0;
  };
  // (host, window seconds)
  using Key = std::pair<std::string, int64_t>;

  // The state manager's answer for `p`'s window; an error when it cannot be
  // had.
  absl::StatusOr<sojourn::v1::GetStateIntervalsResponse> States(const std::string& host,
                                                                const Pending& p);
  void Count(const Pending& p, bool survived);
  void Unresolved(const char* reason);

  StatemgrDirectory& directory_;
  Clock& clock_;
  Metrics& metrics_;
  const AvailabilityScorerConfig config_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<Key, Pending> pending_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_AVAILABILITY_SCORER_H_
