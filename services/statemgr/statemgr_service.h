// gRPC adapter of the state manager: converts protos and calls HostBook.
#ifndef SOJOURN_SERVICES_STATEMGR_STATEMGR_SERVICE_H_
#define SOJOURN_SERVICES_STATEMGR_STATEMGR_SERVICE_H_

#include "common/metrics.h"
#include "services/statemgr/host_book.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::statemgr {

class StateManagerService final : public sojourn::v1::StateManager::CallbackService {
 public:
  // `book` and `metrics` must outlive the service.
  StateManagerService(HostBook& book, Metrics& metrics) : book_(book), metrics_(metrics) {}

  grpc::ServerReadReactor<sojourn::v1::PushSamplesRequest>* PushSamples(
      grpc::CallbackServerContext* context, sojourn::v1::PushSamplesResponse* response) override;
  grpc::ServerUnaryReactor* ListHosts(grpc::CallbackServerContext* context,
                                      const sojourn::v1::ListHostsRequest* request,
                                      sojourn::v1::ListHostsResponse* response) override;
  grpc::ServerUnaryReactor* GetStateIntervals(
      grpc::CallbackServerContext* context, const sojourn::v1::GetStateIntervalsRequest* request,
      sojourn::v1::GetStateIntervalsResponse* response) override;
  grpc::ServerUnaryReactor* GetWindowStats(grpc::CallbackServerContext* context,
                                           const sojourn::v1::GetWindowStatsRequest* request,
                                           sojourn::v1::GetWindowStatsResponse* response) override;
  grpc::ServerUnaryReactor* GetSeries(grpc::CallbackServerContext* context,
                                      const sojourn::v1::GetSeriesRequest* request,
                                      sojourn::v1::GetSeriesResponse* response) override;

 private:
  HostBook& book_;
  Metrics& metrics_;
};

}  // namespace sojourn::statemgr

#endif  // SOJOURN_SERVICES_STATEMGR_STATEMGR_SERVICE_H_
