#include "services/broker/broker_service.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"

namespace sojourn::broker {
namespace {
grpc::ServerUnaryReactor* Done(grpc::CallbackServerContext* context, const absl::Status& s) {
  auto* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(s));
  return reactor;
}
}  // namespace

GrpcTrSource::GrpcTrSource(const std::string& predictor_address)
    : address_(predictor_address),
      stub_(sojourn::v1::Predictor::NewStub(
          grpc::CreateChannel(predictor_address, grpc::InsecureChannelCredentials()))) {}

absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> GrpcTrSource::Predict(
    const sojourn::v1::PredictAvailabilityRequest& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  sojourn::v1::PredictAvailabilityResponse resp;
  grpc::Status s = stub_->PredictAvailability(&ctx, request, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

grpc::ServerUnaryReactor* BrokerService::RegisterHost(
    grpc::CallbackServerContext* context, const sojourn::v1::RegisterHostRequest* request,
    sojourn::v1::RegisterHostResponse* response) {
  absl::Status s = registry_.Register(*request);
  response->set_heartbeat_ttl_seconds(absl::ToInt64Seconds(registry_.ttl()));
  return Done(context, s);
}

grpc::ServerUnaryReactor* BrokerService::Heartbeat(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::HeartbeatRequest* request,
                                                   sojourn::v1::HeartbeatResponse* response) {
  if (request->host().empty()) return Done(context, absl::InvalidArgumentError("host is required"));
  response->set_heartbeat_ttl_seconds(absl::ToInt64Seconds(registry_.ttl()));
  return Done(context, registry_.Heartbeat(request->host()));
}

grpc::ServerUnaryReactor* BrokerService::ListHosts(
    grpc::CallbackServerContext* context, const sojourn::v1::BrokerListHostsRequest* /*request*/,
    sojourn::v1::BrokerListHostsResponse* response) {
  for (auto& h : registry_.List()) *response->add_hosts() = std::move(h);
  return Done(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* BrokerService::GetHost(grpc::CallbackServerContext* context,
                                                 const sojourn::v1::GetHostRequest* request,
                                                 sojourn::v1::RegisteredHost* response) {
  if (request->host().empty()) return Done(context, absl::InvalidArgumentError("host is required"));
  auto h = registry_.Get(request->host());
  if (h.ok()) *response = std::move(*h);
  return Done(context, h.status());
}

grpc::ServerUnaryReactor* BrokerService::RankHosts(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::RankHostsRequest* request,
                                                   sojourn::v1::RankHostsResponse* response) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool_.Schedule([this, request, response, reactor] {
    auto result = broker::RankHosts(*request, registry_.List(), tr_source_);
    if (result.ok()) *response = std::move(*result);
    reactor->Finish(ToGrpcStatus(result.status()));
  });
  return reactor;
}

}  // namespace sojourn::broker
