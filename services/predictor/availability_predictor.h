// Predicts a host's temporal reliability (TR) for a window from the
// statistics its state manager serves (paper 000 sections 6-7): resolve the
// host's state manager, ask for the same-clock window statistics, estimate the
// semi-Markov kernel and compute the TR curve with the availability library.
#ifndef SOJOURN_SERVICES_PREDICTOR_AVAILABILITY_PREDICTOR_H_
#define SOJOURN_SERVICES_PREDICTOR_AVAILABILITY_PREDICTOR_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "models/availability/frailty.h"
#include "models/availability/load_band.h"
#include "models/availability/kernel.h"
#include "models/availability/sojourn_stats.h"
#include "models/availability/window.h"
#include "services/predictor/statemgr_directory.h"
#include "sojourn/v1/broker.grpc.pb.h"
#include "sojourn/v1/predictor.pb.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::predictor {

struct AvailabilityPredictorConfig {
  // The hosts' local clock: a fixed offset from UTC or a time zone.
  availability::LocalClock clock;
  // Most recent N days of the window's day type (0 = all).
  int history_days = 0;
  // Fewer windows than this mark an answer as low_history.
  int min_history_windows = 3;
  availability::EstimatorOptions estimator;
  // Shrinkage prior (issue 7): the same window pooled over every host the
  // broker knows, kept this long. Zero disables the prior. The prior of a
  // window is that of the window starting at the start of its minute, so
  // the requests of one minute share it.
  absl::Duration population_prior_ttl = absl::Minutes(10);
  // At most this many priors are kept (the oldest built goes first): each
  // holds the pooled statistics of every host for one window (about 1.3 MB
  // at 1,000 hosts), and clients asking for ever other window lengths grew
  // the predictor by 75 MB a minute within the TTL.
  size_t max_cached_priors = 64;
};

// Thread-safe.
class AvailabilityPredictor {
 public:
  // `directory` and `clock` must outlive the predictor.
  AvailabilityPredictor(const AvailabilityPredictorConfig& config, StatemgrDirectory& directory,
                        Clock& clock);

  // INVALID_ARGUMENT for a bad window (start_unix_seconds < 0, 0 = now) or a
  // statemgr_address that is not HOST:PORT, NOT_FOUND for an unknown host,
  // UNAVAILABLE when a peer cannot be reached (StatemgrCallError),
  // DEADLINE_EXCEEDED when `caller_deadline` passes while the host's state
  // manager is asked (the call to it ends then too). `statemgr_address`,
  // when given, receives the address of the state manager asked.
  absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request,
      absl::Time caller_deadline = absl::InfiniteFuture(), std::string* statemgr_address = nullptr);

  // The clock predictions (and the predictor's RPCs) read "now" from.
  Clock& clock() const { return clock_; }
  // Population priors kept (those younger than the TTL at the last build).
  size_t cached_priors() const;

 private:
  // The pooled statistics of every registered host for the window of
  // `request` (cached per window; stats null when there is no broker or no
  // host) and, with the estimator's host_frailty, the frailty model of the
  // same hosts (null otherwise).
  struct Population {
    std::shared_ptr<const availability::SojournStats> stats;
    std::shared_ptr<const availability::HostFrailtyModel> frailty;
    // With the estimator's load_band_first_sojourn: every host's
    // first-sojourn exits by load band, summed (load_band.h).
    std::shared_ptr<const availability::BandExposure> band;
  };
  Population PopulationPrior(const sojourn::v1::GetWindowStatsRequest& host_request);
  // Asks every host's state manager (all at once); nullopt when there is
  // no broker, no host or no answer (not kept: hosts register within a
  // heartbeat, state managers come back), an
  // empty Population (kept, as a pooled one is) when no host has a window
  // of this length at this clock time yet (a young deployment: every
  // prediction asked every host again, hosts^2 calls a ranking).
  std::optional<Population> BuildPopulation(const sojourn::v1::GetWindowStatsRequest& request);
  static constexpr int64_t kPriorStartQuantumSeconds = 60;
  // A state manager's answer for the prior takes milliseconds (the
  // statistics of months of history at 6 s, docs/EVALUATION.md "Speed").
  static constexpr absl::Duration kPriorCallTimeout = absl::Seconds(3);

  const AvailabilityPredictorConfig config_;
  StatemgrDirectory& directory_;
  Clock& clock_;

  struct PriorEntry {
    Population population;
    absl::Time built;
  };
  mutable absl::Mutex prior_mu_;
  std::map<std::string, PriorEntry> priors_ ABSL_GUARDED_BY(prior_mu_);
  // Keys being built, and the signal that a build ended.
  std::set<std::string> building_ ABSL_GUARDED_BY(prior_mu_);
  absl::CondVar prior_built_;
};

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_AVAILABILITY_PREDICTOR_H_
