#include "common/reactors.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <utility>

#include "absl/time/time.h"
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

namespace {

// A unary reactor that records OnCancel (client cancelled, deadline passed,
// connection lost) for the work running on the pool. It deletes itself in
// OnDone, which gRPC calls after Finish; the flag is shared with the work so
// it outlives the reactor.
class AbandonableReactor final : public grpc::ServerUnaryReactor {
 public:
  explicit AbandonableReactor(std::shared_ptr<std::atomic<bool>> cancelled)
      : cancelled_(std::move(cancelled)) {}
  void OnCancel() override { cancelled_->store(true); }
  void OnDone() override { delete this; }

 private:
  std::shared_ptr<std::atomic<bool>> cancelled_;
};

}  // namespace

grpc::ServerUnaryReactor* FinishOnPoolUnlessAbandoned(
    grpc::CallbackServerContext* context, ThreadPool& pool, const Clock& clock,
    std::function<absl::Status(const std::function<bool()>& abandoned)> work) {
  auto cancelled = std::make_shared<std::atomic<bool>>(false);
  auto* reactor = new AbandonableReactor(cancelled);
  // No deadline is the infinite future; the time left is capped at a year so
  // that adding it to `clock` cannot overflow.
  const absl::Duration left =
      std::min(absl::FromChrono(context->deadline()) - absl::Now(), absl::Hours(24 * 365));
  const absl::Time deadline = clock.Now() + left;
  pool.Schedule([reactor, cancelled, deadline, &clock, work = std::move(work)] {
    const std::function<bool()> abandoned = [&cancelled, &clock, deadline] {
      return cancelled->load() || clock.Now() >= deadline;
    };
    reactor->Finish(ToGrpcStatus(work(abandoned)));
  });
  return reactor;
}

}  // namespace sojourn
