// Finds a host's state manager (from the request, else from the broker's
// registry) and keeps one channel per state manager address.
#ifndef SOJOURN_SERVICES_PREDICTOR_STATEMGR_DIRECTORY_H_
#define SOJOURN_SERVICES_PREDICTOR_STATEMGR_DIRECTORY_H_

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
// nothing after the colon).
absl::Status StatemgrUnavailable(const std::string& address, const std::string& host,
                                 const grpc::Status& status);

// Thread-safe.
class StatemgrDirectory {
 public:
  // `broker_address` may be empty: then requests must name the state manager.
  StatemgrDirectory(const std::string& broker_address, absl::Duration timeout);

  // The stub for `host`: `explicit_address` when non-empty, else the broker's
  // record. NOT_FOUND for a host the broker does not know, UNAVAILABLE when the
  // broker cannot be reached, FAILED_PRECONDITION without a broker.
  absl::StatusOr<sojourn::v1::StateManager::Stub*> Find(const std::string& host,
                                                        const std::string& explicit_address,
                                                        std::string* address_out = nullptr);
  // Every host the broker knows with its state manager address.
  // FAILED_PRECONDITION without a broker.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListHosts();
  absl::Duration timeout() const { return timeout_; }

 private:
  sojourn::v1::StateManager::Stub* StubFor(const std::string& address);
  const std::string broker_address_;
  const absl::Duration timeout_;
  std::unique_ptr<sojourn::v1::Broker::Stub> broker_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<sojourn::v1::StateManager::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_STATEMGR_DIRECTORY_H_
