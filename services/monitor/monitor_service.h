// gRPC adapter of the monitor.
#ifndef SOJOURN_SERVICES_MONITOR_MONITOR_SERVICE_H_
#define SOJOURN_SERVICES_MONITOR_MONITOR_SERVICE_H_

#include "services/monitor/monitor.h"
#include "sojourn/v1/monitor.grpc.pb.h"

namespace sojourn::monitor {

class MonitorService final : public sojourn::v1::Monitor::CallbackService {
 public:
  MonitorService(Monitor& monitor, SampleSender& sender) : monitor_(monitor), sender_(sender) {}

  grpc::ServerUnaryReactor* RegisterGuest(grpc::CallbackServerContext* context,
                                          const sojourn::v1::RegisterGuestRequest* request,
                                          sojourn::v1::RegisterGuestResponse* response) override;
  grpc::ServerUnaryReactor* UnregisterGuest(grpc::CallbackServerContext* context,
                                            const sojourn::v1::UnregisterGuestRequest* request,
                                            sojourn::v1::UnregisterGuestResponse* response) override;
  grpc::ServerUnaryReactor* GetStatus(grpc::CallbackServerContext* context,
                                      const sojourn::v1::GetMonitorStatusRequest* request,
                                      sojourn::v1::GetMonitorStatusResponse* response) override;

 private:
  Monitor& monitor_;
  SampleSender& sender_;
};

}  // namespace sojourn::monitor

#endif  // SOJOURN_SERVICES_MONITOR_MONITOR_SERVICE_H_
