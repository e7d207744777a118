// The broker's registry of hosts: who they are, where their state manager
// listens, their static attributes, and whether their heartbeat is fresh.
#ifndef SOJOURN_SERVICES_BROKER_HOST_REGISTRY_H_
#define SOJOURN_SERVICES_BROKER_HOST_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "sojourn/v1/broker.pb.h"

namespace sojourn::broker {

// Thread-safe. Liveness is judged against the injected clock.
class HostRegistry {
 public:
  // A host whose last heartbeat is older than `ttl` is expired (kept, listed,
  // but not ranked). `clock` must outlive the registry.
  HostRegistry(Clock& clock, absl::Duration ttl) : clock_(clock), ttl_(ttl) {}

  // Adds or refreshes a host. INVALID_ARGUMENT for an empty host or address.
  absl::Status Register(const sojourn::v1::RegisterHostRequest& request);
  // NOT_FOUND for a host never registered. A `last_sample_unix_seconds`
  // newer than the one known marks new history (the ranker's cache key).
  absl::Status Heartbeat(const std::string& host, int64_t last_sample_unix_seconds = 0);
  absl::StatusOr<sojourn::v1::RegisteredHost> Get(const std::string& host) const;
  // Every host, sorted by name, with `live` computed now.
  std::vector<sojourn::v1::RegisteredHost> List() const;
  absl::Duration ttl() const { return ttl_; }

 private:
  sojourn::v1::RegisteredHost WithLiveness(const sojourn::v1::RegisteredHost& h) const;
  Clock& clock_;
  const absl::Duration ttl_;
  mutable absl::Mutex mu_;
  std::map<std::string, sojourn::v1::RegisteredHost> hosts_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sojourn::broker

#endif  // SOJOURN_SERVICES_BROKER_HOST_REGISTRY_H_
