// gRPC adapter of the predictor. Predictions run on a worker pool (they make
// blocking calls to peers and crunch numbers), never on gRPC's threads.
#ifndef SOJOURN_SERVICES_PREDICTOR_PREDICTOR_SERVICE_H_
#define SOJOURN_SERVICES_PREDICTOR_PREDICTOR_SERVICE_H_

#include "common/thread_pool.h"
#include "services/predictor/availability_predictor.h"
#include "sojourn/v1/predictor.grpc.pb.h"

namespace sojourn::predictor {

class PredictorService final : public sojourn::v1::Predictor::CallbackService {
 public:
  // `predictor` and `pool` must outlive the service.
  PredictorService(AvailabilityPredictor& predictor, ThreadPool& pool)
      : predictor_(predictor), pool_(pool) {}

  grpc::ServerUnaryReactor* PredictAvailability(
      grpc::CallbackServerContext* context,
      const sojourn::v1::PredictAvailabilityRequest* request,
      sojourn::v1::PredictAvailabilityResponse* response) override;

 private:
  AvailabilityPredictor& predictor_;
  ThreadPool& pool_;
};

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_PREDICTOR_SERVICE_H_
