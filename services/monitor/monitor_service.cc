#include "services/monitor/monitor_service.h"

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "common/reactors.h"
#include "services/convert.h"

namespace sojourn::monitor {
grpc::ServerUnaryReactor* MonitorService::RegisterGuest(
    grpc::CallbackServerContext* context, const sojourn::v1::RegisterGuestRequest* request,
    sojourn::v1::RegisterGuestResponse* /*response*/) {
  return FinishNow(context, monitor_.RegisterGuest(request->pid()));
}

grpc::ServerUnaryReactor* MonitorService::UnregisterGuest(
    grpc::CallbackServerContext* context, const sojourn::v1::UnregisterGuestRequest* request,
    sojourn::v1::UnregisterGuestResponse* /*response*/) {
  if (request->pid() <= 0) {
    return FinishNow(context, absl::InvalidArgumentError(
                                  absl::StrCat("pid must be > 0, got ", request->pid())));
  }
  monitor_.UnregisterGuest(request->pid());
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* MonitorService::GetStatus(
    grpc::CallbackServerContext* context, const sojourn::v1::GetMonitorStatusRequest* /*request*/,
    sojourn::v1::GetMonitorStatusResponse* response) {
  response->set_host(sender_.config().host);
  if (auto last = monitor_.last_sample(); last.has_value()) {
    *response->mutable_last_sample() = ToProto(*last);
  }
  response->set_unacknowledged_samples(static_cast<int64_t>(sender_.unacknowledged()));
  response->set_acknowledged_samples(sender_.acknowledged());
  for (int pid : monitor_.guests()) response->add_guest_pids(pid);
  response->set_statemgr_address(sender_.config().statemgr_address);
  response->set_connected(sender_.connected());
  response->set_gateway(monitor_.gateway_mode());
  return FinishNow(context, absl::OkStatus());
}

}  // namespace sojourn::monitor
