// Predicts a host's temporal reliability (TR) for a window from the
// statistics its state manager serves (paper 000 sections 6-7): resolve the
// host's state manager, ask for the same-clock window statistics, estimate the
// semi-Markov kernel and compute the TR curve with the availability library.
#ifndef SOJOURN_SERVICES_PREDICTOR_AVAILABILITY_PREDICTOR_H_
#define SOJOURN_SERVICES_PREDICTOR_AVAILABILITY_PREDICTOR_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "models/availability/kernel.h"
#include "sojourn/v1/broker.grpc.pb.h"
#include "sojourn/v1/predictor.pb.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::predictor {

struct AvailabilityPredictorConfig {
  // Broker that knows each host's state manager.
  std::string broker_address;
  // Local time zone of the hosts, as an offset from UTC (seconds).
  int utc_offset_seconds = 0;
  // Most recent N days of the window's day type (0 = all).
  int history_days = 0;
  // Fewer windows than this mark an answer as low_history.
  int min_history_windows = 3;
  availability::EstimatorOptions estimator;
  absl::Duration rpc_timeout = absl::Seconds(5);
};

// Thread-safe.
class AvailabilityPredictor {
 public:
  AvailabilityPredictor(const AvailabilityPredictorConfig& config, Clock& clock);

  // INVALID_ARGUMENT for a bad window, NOT_FOUND for an unknown host,
  // UNAVAILABLE when a peer cannot be reached.
  absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request);

 private:
  absl::StatusOr<std::string> StatemgrAddress(const std::string& host);
  sojourn::v1::StateManager::Stub* StatemgrStub(const std::string& address);

  const AvailabilityPredictorConfig config_;
  Clock& clock_;
  std::unique_ptr<sojourn::v1::Broker::Stub> broker_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<sojourn::v1::StateManager::Stub>> statemgrs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_AVAILABILITY_PREDICTOR_H_
