// gRPC adapter of the broker: registry calls answer inline; RankHosts, which
// may call the predictor and the state managers, runs on a worker pool (the
// ranker fans its cache misses out on its own pool).
#ifndef SOJOURN_SERVICES_BROKER_BROKER_SERVICE_H_
#define SOJOURN_SERVICES_BROKER_BROKER_SERVICE_H_

#include <map>
#include <memory>
#include <string>

#include "common/thread_pool.h"
#include "services/broker/host_registry.h"
#include "services/broker/ranker.h"
#include "sojourn/v1/broker.grpc.pb.h"
#include "sojourn/v1/predictor.grpc.pb.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::broker {

// TrSource backed by the predictor service. A call that fails because the
// predictor cannot be reached (its channel is not connected) returns
// PredictorUnreachableError; errors the predictor answers pass through.
class GrpcTrSource final : public TrSource {
 public:
  explicit GrpcTrSource(const std::string& predictor_address,
                        absl::Duration timeout = absl::Seconds(10));
  absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request) override;

 private:
  std::string address_;
  absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<sojourn::v1::Predictor::Stub> stub_;
};

// LoadSource backed by the hosts' state managers (GetSeries). Thread-safe.
class GrpcLoadSource final : public LoadSource {
 public:
  explicit GrpcLoadSource(absl::Duration timeout = absl::Seconds(5)) : timeout_(timeout) {}
  absl::StatusOr<std::vector<HostSample>> RecentSamples(const sojourn::v1::RegisteredHost& host,
                                                        int64_t start_unix) override;

 private:
  sojourn::v1::StateManager::Stub* Stub(const std::string& address);
  const absl::Duration timeout_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<sojourn::v1::StateManager::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

class BrokerService final : public sojourn::v1::Broker::CallbackService {
 public:
  // All references must outlive the service.
  BrokerService(HostRegistry& registry, Ranker& ranker, ThreadPool& pool)
      : registry_(registry), ranker_(ranker), pool_(pool) {}
  // A ranker of default configuration without load forecasts, on `tr_source`.
  BrokerService(HostRegistry& registry, TrSource& tr_source, ThreadPool& pool);

  grpc::ServerUnaryReactor* RegisterHost(grpc::CallbackServerContext* context,
                                         const sojourn::v1::RegisterHostRequest* request,
                                         sojourn::v1::RegisterHostResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const sojourn::v1::HeartbeatRequest* request,
                                      sojourn::v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* ListHosts(grpc::CallbackServerContext* context,
                                      const sojourn::v1::BrokerListHostsRequest* request,
                                      sojourn::v1::BrokerListHostsResponse* response) override;
  grpc::ServerUnaryReactor* GetHost(grpc::CallbackServerContext* context,
                                    const sojourn::v1::GetHostRequest* request,
                                    sojourn::v1::RegisteredHost* response) override;
  grpc::ServerUnaryReactor* RankHosts(grpc::CallbackServerContext* context,
                                      const sojourn::v1::RankHostsRequest* request,
                                      sojourn::v1::RankHostsResponse* response) override;

 private:
  HostRegistry& registry_;
  std::unique_ptr<Ranker> own_ranker_;
  Ranker& ranker_;
  ThreadPool& pool_;
};

}  // namespace sojourn::broker

#endif  // SOJOURN_SERVICES_BROKER_BROKER_SERVICE_H_
