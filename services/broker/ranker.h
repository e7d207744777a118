// Ranks hosts for a job. The foundation's policy "tr" orders the usable hosts
// by TR over the job's duration (paper 000 section 8.4 uses TR the same way
// before its proactive refinements).
#ifndef SOJOURN_SERVICES_BROKER_RANKER_H_
#define SOJOURN_SERVICES_BROKER_RANKER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "sojourn/v1/broker.pb.h"
#include "sojourn/v1/predictor.pb.h"

namespace sojourn::broker {

// Where TR predictions come from (the predictor service in production).
class TrSource {
 public:
  virtual ~TrSource() = default;
  virtual absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request) = 0;
};

// INVALID_ARGUMENT for a bad job or unknown policy. Every host of `hosts`
// appears in the answer.
absl::StatusOr<sojourn::v1::RankHostsResponse> RankHosts(
    const sojourn::v1::RankHostsRequest& request,
    const std::vector<sojourn::v1::RegisteredHost>& hosts, TrSource& tr_source);

}  // namespace sojourn::broker

#endif  // SOJOURN_SERVICES_BROKER_RANKER_H_
