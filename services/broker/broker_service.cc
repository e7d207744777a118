#include "services/broker/broker_service.h"

#include <algorithm>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/reactors.h"
#include "common/status.h"
#include "common/text.h"

namespace sojourn::broker {
GrpcTrSource::GrpcTrSource(const std::string& predictor_address, absl::Duration timeout)
    : address_(predictor_address),
      timeout_(timeout),
      channel_(grpc::CreateChannel(predictor_address, grpc::InsecureChannelCredentials())),
      stub_(sojourn::v1::Predictor::NewStub(channel_)) {}

absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> GrpcTrSource::Predict(
    const sojourn::v1::PredictAvailabilityRequest& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  sojourn::v1::PredictAvailabilityResponse resp;
  grpc::Status s = stub_->PredictAvailability(&ctx, request, &resp);
  if (s.ok()) return resp;
  // UNAVAILABLE / DEADLINE_EXCEEDED on a channel that is not connected: the
  // predictor itself is down or unreachable (its own UNAVAILABLE answers,
  // e.g. a host's state manager being down, come over a READY channel).
  if ((s.error_code() == grpc::StatusCode::UNAVAILABLE ||
       s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) &&
      channel_->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY) {
    return PredictorUnreachableError(address_, s.error_message());
  }
  return FromGrpcStatus(s);
}

absl::StatusOr<std::vector<HostSample>> GrpcLoadSource::RecentSamples(
    const sojourn::v1::RegisteredHost& host, int64_t start_unix) {
  sojourn::v1::GetSeriesRequest req;
  req.set_host(host.host());
  req.set_start_unix_seconds(std::max<int64_t>(0, start_unix));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  sojourn::v1::GetSeriesResponse resp;
  grpc::Status s = Stub(host.statemgr_address())->GetSeries(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  std::vector<HostSample> out;
  out.reserve(resp.samples_size());
  for (const auto& p : resp.samples()) {
    HostSample h;
    h.unix_seconds = p.unix_seconds();
    h.cpu_load = p.cpu_load_ratio();
    if (p.has_free_mem_mb()) h.free_mem_mb = p.free_mem_mb();
    out.push_back(h);
  }
  return out;
}

sojourn::v1::StateManager::Stub* GrpcLoadSource::Stub(const std::string& address) {
  absl::MutexLock l(&mu_);
  auto& stub = stubs_[address];
  if (stub == nullptr) {
    stub = sojourn::v1::StateManager::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }
  return stub.get();
}

BrokerService::BrokerService(HostRegistry& registry, TrSource& tr_source, ThreadPool& pool)
    : registry_(registry),
      own_ranker_(std::make_unique<Ranker>(tr_source, nullptr, Clock::Real(), RankerConfig{})),
      ranker_(*own_ranker_),
      pool_(pool) {}

grpc::ServerUnaryReactor* BrokerService::RegisterHost(
    grpc::CallbackServerContext* context, const sojourn::v1::RegisterHostRequest* request,
    sojourn::v1::RegisterHostResponse* response) {
  absl::Status s = registry_.Register(*request);
  response->set_heartbeat_ttl_seconds(absl::ToInt64Seconds(registry_.ttl()));
  return FinishNow(context, s);
}

grpc::ServerUnaryReactor* BrokerService::Heartbeat(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::HeartbeatRequest* request,
                                                   sojourn::v1::HeartbeatResponse* response) {
  if (absl::Status s = ValidateLookupName(request->host()); !s.ok()) return FinishNow(context, s);
  response->set_heartbeat_ttl_seconds(absl::ToInt64Seconds(registry_.ttl()));
  return FinishNow(context, registry_.Heartbeat(request->host(), request->last_sample_unix_seconds()));
}

grpc::ServerUnaryReactor* BrokerService::ListHosts(
    grpc::CallbackServerContext* context, const sojourn::v1::BrokerListHostsRequest* /*request*/,
    sojourn::v1::BrokerListHostsResponse* response) {
  for (auto& h : registry_.List()) *response->add_hosts() = std::move(h);
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* BrokerService::GetHost(grpc::CallbackServerContext* context,
                                                 const sojourn::v1::GetHostRequest* request,
                                                 sojourn::v1::RegisteredHost* response) {
  if (absl::Status s = ValidateLookupName(request->host()); !s.ok()) return FinishNow(context, s);
  auto h = registry_.Get(request->host());
  if (h.ok()) *response = std::move(*h);
  return FinishNow(context, h.status());
}

grpc::ServerUnaryReactor* BrokerService::RankHosts(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::RankHostsRequest* request,
                                                   sojourn::v1::RankHostsResponse* response) {
  return FinishOnPoolUnlessAbandoned(
      context, pool_, ranker_.clock(),
      [this, request, response](const std::function<bool()>& abandoned) -> absl::Status {
        ASSIGN_OR_RETURN(*response, ranker_.Rank(*request, registry_.List(), abandoned));
        return absl::OkStatus();
      });
}

}  // namespace sojourn::broker
