#include "common/reactors.h"

#include "common/grpc_status.h"

namespace sojourn {

grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

grpc::ServerUnaryReactor* FinishOnPool(grpc::CallbackServerContext* context, ThreadPool& pool,
                                       std::function<absl::Status()> work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  pool.Schedule([reactor, work = std::move(work)] { reactor->Finish(ToGrpcStatus(work())); });
  return reactor;
}

}  // namespace sojourn
