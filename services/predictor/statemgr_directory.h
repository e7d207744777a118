// Finds a host's state manager (from the request, else from the broker's
// registry) and keeps one channel per state manager address, for the most
// recently used kDefaultMaxChannels addresses (requests may name any
// address: without a bound, 3000 distinct ones grew the predictor's RSS
// from 25 to 91 MB).
#ifndef SOJOURN_SERVICES_PREDICTOR_STATEMGR_DIRECTORY_H_
#define SOJOURN_SERVICES_PREDICTOR_STATEMGR_DIRECTORY_H_

#include <list>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "sojourn/v1/broker.grpc.pb.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::predictor {

// UNAVAILABLE for a failed call to the state manager at `address` of
// `host`: "state manager ADDR of host H: CODE: message", the message being
// "connection failed" when gRPC gives none (a wrong port used to leave
// nothing after the colon), or saying the peer lacks the method for an
// UNIMPLEMENTED without a message (a server that is not a state manager).
absl::Status StatemgrUnavailable(const std::string& address, const std::string& host,
                                 const grpc::Status& status);

// What the predictor answers for a failed call to a state manager (every RPC
// that asks one: PredictAvailability, PredictUsage, CanRun, HowLong): the
// state manager's own verdicts on the request -- INVALID_ARGUMENT, NOT_FOUND
// (unknown host), FAILED_PRECONDITION (e.g. not enough history yet) -- pass
// through with their messages; anything else (unreachable, deadline, a peer
// that is not a state manager and answers UNIMPLEMENTED, ...) is
// StatemgrUnavailable, so it never reads as the predictor's own answer.
absl::Status StatemgrCallError(const std::string& address, const std::string& host,
                               const grpc::Status& status);

// Thread-safe.
class StatemgrDirectory {
 public:
  // Channels kept by default: far more state managers than a cluster has.
  static constexpr size_t kDefaultMaxChannels = 256;

  // `broker_address` may be empty: then requests must name the state manager.
  // At most `max_channels` (>= 1) channels are kept; the least recently used
  // is closed when a new address needs one.
  StatemgrDirectory(const std::string& broker_address, absl::Duration timeout,
                    size_t max_channels = kDefaultMaxChannels);

  // The stub for `host`: `explicit_address` when non-empty, else the broker's
  // record. The stub stays valid while the caller holds it, even if its
  // channel is evicted meanwhile. INVALID_ARGUMENT for a malformed host or an
  // `explicit_address` that is not HOST:PORT (ValidateHostPortAddress, the
  // broker's rule), NOT_FOUND for a host the broker does not know,
  // UNAVAILABLE when the broker cannot be reached, FAILED_PRECONDITION
  // without a broker or when the broker's record is not HOST:PORT.
  absl::StatusOr<std::shared_ptr<sojourn::v1::StateManager::Stub>> Find(
      const std::string& host, const std::string& explicit_address,
      std::string* address_out = nullptr);
  // Every host the broker knows with its state manager address.
  // FAILED_PRECONDITION without a broker.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListHosts();
  absl::Duration timeout() const { return timeout_; }
  // Channels currently kept.
  size_t channels() const;

 private:
  using StubPtr = std::shared_ptr<sojourn::v1::StateManager::Stub>;
  StubPtr StubFor(const std::string& address);
  const std::string broker_address_;
  const absl::Duration timeout_;
  const size_t max_channels_;
  std::unique_ptr<sojourn::v1::Broker::Stub> broker_;
  mutable absl::Mutex mu_;
  // Most recently used first; `stubs_` indexes it by address.
  std::list<std::pair<std::string, StubPtr>> lru_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::list<std::pair<std::string, StubPtr>>::iterator> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_STATEMGR_DIRECTORY_H_
