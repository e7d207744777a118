// Finishing unary callback calls, the two ways sojourn's services do it:
// at once on gRPC's thread (cheap handlers), or after running the handler's
// work on a ThreadPool (handlers that block on peers or crunch numbers, which
// must not run on gRPC's threads; STYLE.md "Ownership and threads").
#ifndef SOJOURN_COMMON_REACTORS_H_
#define SOJOURN_COMMON_REACTORS_H_

#include <functional>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "common/clock.h"
#include "common/thread_pool.h"

namespace sojourn {

// Finishes the call with `status` now.
grpc::ServerUnaryReactor* FinishNow(grpc::CallbackServerContext* context,
                                    const absl::Status& status);

// Runs `work` on `pool`, then finishes the call with its status. The call's
// request and response stay valid until then, so `work` may capture them.
grpc::ServerUnaryReactor* FinishOnPool(grpc::CallbackServerContext* context, ThreadPool& pool,
                                       std::function<absl::Status()> work);

// The same for long work that can stop early: `work` gets a predicate that
// turns true once the client has cancelled the call (or gone away) or the
// call's deadline has passed on `clock` (the time left at the start of the
// call, counted on `clock`, which must outlive the call). Nobody reads the
// answer then, so the work should stop asking peers and return.
grpc::ServerUnaryReactor* FinishOnPoolUnlessAbandoned(
    grpc::CallbackServerContext* context, ThreadPool& pool, const Clock& clock,
    std::function<absl::Status(const std::function<bool()>& abandoned)> work);

}  // namespace sojourn

#endif  // SOJOURN_COMMON_REACTORS_H_
