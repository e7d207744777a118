// gRPC adapter of the broker: registry calls answer inline; RankHosts, which
// calls the predictor for every host, runs on a worker pool.
#ifndef SOJOURN_SERVICES_BROKER_BROKER_SERVICE_H_
#define SOJOURN_SERVICES_BROKER_BROKER_SERVICE_H_

#include <memory>
#include <string>

#include "common/thread_pool.h"
#include "services/broker/host_registry.h"
#include "services/broker/ranker.h"
#include "sojourn/v1/broker.grpc.pb.h"
#include "sojourn/v1/predictor.grpc.pb.h"

namespace sojourn::broker {

// TrSource backed by the predictor service.
class GrpcTrSource final : public TrSource {
 public:
  explicit GrpcTrSource(const std::string& predictor_address);
  absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request) override;

 private:
  std::string address_;
  std::unique_ptr<sojourn::v1::Predictor::Stub> stub_;
};

class BrokerService final : public sojourn::v1::Broker::CallbackService {
 public:
  // All references must outlive the service.
  BrokerService(HostRegistry& registry, TrSource& tr_source, ThreadPool& pool)
      : registry_(registry), tr_source_(tr_source), pool_(pool) {}

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
  TrSource& tr_source_;
  ThreadPool& pool_;
};

}  // namespace sojourn::broker

#endif  // SOJOURN_SERVICES_BROKER_BROKER_SERVICE_H_
