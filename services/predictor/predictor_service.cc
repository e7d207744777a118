#include "services/predictor/predictor_service.h"

#include "common/grpc_status.h"

namespace sojourn::predictor {

grpc::ServerUnaryReactor* PredictorService::PredictAvailability(
    grpc::CallbackServerContext* context, const sojourn::v1::PredictAvailabilityRequest* request,
    sojourn::v1::PredictAvailabilityResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool_.Schedule([this, request, response, reactor] {
    auto result = predictor_.Predict(*request);
    if (result.ok()) *response = std::move(*result);
    reactor->Finish(ToGrpcStatus(result.status()));
  });
  return reactor;
}

}  // namespace sojourn::predictor
