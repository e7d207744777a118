#include "services/predictor/predictor_service.h"

#include <grpcpp/grpcpp.h>

#include "absl/time/clock.h"
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

template <typename Req, typename Resp, typename Call>
grpc::ServerUnaryReactor* PredictorService::Forward(grpc::CallbackServerContext* context,
                                                    const Req* request, Resp* response,
                                                    Call call) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool_.Schedule([this, request, response, reactor, call] {
    std::string address;
    auto stub = directory_.Find(request->host(), request->statemgr_address(), &address);
    if (!stub.ok()) {
      reactor->Finish(ToGrpcStatus(stub.status()));
      return;
    }
    Req forwarded = *request;
    forwarded.clear_statemgr_address();
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + directory_.timeout()));
    grpc::Status s = call(*stub, &ctx, forwarded, response);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
        s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      s = grpc::Status(grpc::StatusCode::UNAVAILABLE,
                       "state manager " + address + " of host " + request->host() + ": " +
                           s.error_message());
    }
    reactor->Finish(s);
  });
  return reactor;
}

grpc::ServerUnaryReactor* PredictorService::PredictUsage(
    grpc::CallbackServerContext* context, const sojourn::v1::PredictUsageRequest* request,
    sojourn::v1::PredictUsageResponse* response) {
  return Forward(context, request, response,
                 [](sojourn::v1::StateManager::Stub* stub, grpc::ClientContext* ctx,
                    const sojourn::v1::PredictUsageRequest& req,
                    sojourn::v1::PredictUsageResponse* resp) {
                   return stub->PredictUsage(ctx, req, resp);
                 });
}

grpc::ServerUnaryReactor* PredictorService::CanRun(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::CanRunRequest* request,
                                                   sojourn::v1::CanRunResponse* response) {
  return Forward(context, request, response,
                 [](sojourn::v1::StateManager::Stub* stub, grpc::ClientContext* ctx,
                    const sojourn::v1::CanRunRequest& req, sojourn::v1::CanRunResponse* resp) {
                   return stub->CanRun(ctx, req, resp);
                 });
}

grpc::ServerUnaryReactor* PredictorService::HowLong(grpc::CallbackServerContext* context,
                                                    const sojourn::v1::HowLongRequest* request,
                                                    sojourn::v1::HowLongResponse* response) {
  return Forward(context, request, response,
                 [](sojourn::v1::StateManager::Stub* stub, grpc::ClientContext* ctx,
                    const sojourn::v1::HowLongRequest& req, sojourn::v1::HowLongResponse* resp) {
                   return stub->HowLong(ctx, req, resp);
                 });
}

}  // namespace sojourn::predictor
