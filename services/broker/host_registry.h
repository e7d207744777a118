// The broker's registry of hosts: who they are, where their state manager
// listens, their static attributes, and whether their heartbeat is fresh.
#ifndef SOJOURN_SERVICES_BROKER_HOST_REGISTRY_H_
#define SOJOURN_SERVICES_BROKER_HOST_REGISTRY_H_

#include <map>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "sojourn/v1/broker.pb.h"

namespace sojourn::broker {

// Default of --max_clock_skew_seconds: a host's last sample may be stamped up
// to the statemgr's clock + its own skew allowance (1 h by default), and the
// statemgr's clock may itself be ahead of the broker's, so the broker allows
// both: 2 h.
inline constexpr int64_t kDefaultMaxSampleSkewSeconds = 2 * 3600;
// Default of --max_hosts: far more hosts than one broker's cluster has; its
// ListHosts answer is then about 3 MB.
inline constexpr int kDefaultMaxHosts = 10000;

// Thread-safe. Liveness is judged against the injected clock.
class HostRegistry {
 public:
  // A host whose last heartbeat is older than `ttl` is expired (kept, listed,
  // but not ranked). A last_sample_unix_seconds more than
  // `max_clock_skew_seconds` (>= 0) after the clock is refused. `clock` must
  // outlive the registry. At most `max_hosts` (>= 1) hosts are kept: a new
  // host beyond them takes the place of the expired host whose heartbeat is
  // oldest, and is refused (RESOURCE_EXHAUSTED) when every host is live.
  HostRegistry(Clock& clock, absl::Duration ttl,
               int64_t max_clock_skew_seconds = kDefaultMaxSampleSkewSeconds,
               int max_hosts = kDefaultMaxHosts)
      : clock_(clock),
        ttl_(ttl),
        max_clock_skew_seconds_(max_clock_skew_seconds),
        max_hosts_(max_hosts < 1 ? 1 : max_hosts) {}

  // Adds or refreshes a host. INVALID_ARGUMENT (nothing stored) for a
  // malformed host, a statemgr_address that is not HOST:PORT
  // (ValidateHostPortAddress), bad attributes or a bad
  // last_sample_unix_seconds or condition (see Heartbeat); RESOURCE_EXHAUSTED
  // for a new host when max_hosts live hosts are registered. The host's
  // condition becomes the request's (a request without one forgets it),
  // unless the request reports a last sample older than the one known (a
  // late or retried call: the condition is kept).
  absl::Status Register(const sojourn::v1::RegisterHostRequest& request);
  // NOT_FOUND for a host never registered. A `last_sample_unix_seconds`
  // newer than the one known marks new history (the ranker's cache key); 0 =
  // no sample yet. INVALID_ARGUMENT (nothing stored, the heartbeat not
  // counted) when it is negative or after the clock + max_clock_skew_seconds:
  // a time of INT64_MAX would stay the host's newest forever, and newer
  // history could no longer invalidate its cached predictions.
  //
  // `condition` (when not null) replaces the host's known condition unless
  // the heartbeat reports a last sample older than the one known
  // (common.proto HostCondition; INVALID_ARGUMENT, nothing stored, for an
  // unknown state, a bad state_since_unix_seconds, load band or step).
  // Without it, a newer last sample forgets the known condition: new history
  // in an unknown condition must not keep a prediction keyed on the old one.
  absl::Status Heartbeat(const std::string& host, int64_t last_sample_unix_seconds = 0,
                         const sojourn::v1::HostCondition* condition = nullptr);
  absl::StatusOr<sojourn::v1::RegisteredHost> Get(const std::string& host) const;
  // Every host, sorted by name, with `live` computed now.
  std::vector<sojourn::v1::RegisteredHost> List() const;
  absl::Duration ttl() const { return ttl_; }
  int max_hosts() const { return max_hosts_; }
  // Expired hosts forgotten to make room for new ones, since the start.
  int64_t forgotten() const;
  // Silence after which a host is forgotten (0 = never; less than the TTL is
  // taken as the TTL): no heartbeat for that long (its state manager is
  // gone), or a newest sample that old (the host is gone, although its state
  // manager still registers it). RegisterHost of a host whose newest sample
  // is that old is then FAILED_PRECONDITION, stored nowhere (its state
  // manager logs it once). Call before serving.
  void set_forget_after(absl::Duration after);
  // Forgets the hosts silent for longer than set_forget_after's and returns
  // their names, sorted. A host that samples again registers as new.
  std::vector<std::string> ForgetSilent();
  // The hosts now: the live ones by their reported condition's state
  // (live[1..5] for S1..S5, live[0] without a reported condition) and the
  // expired ones.
  struct Census {
    int64_t live[6] = {};
    int64_t expired = 0;
  };
  Census Count() const;

 private:
  bool Live(const sojourn::v1::RegisteredHost& h) const;
  sojourn::v1::RegisteredHost WithLiveness(const sojourn::v1::RegisteredHost& h) const;
  absl::Status ValidateLastSample(int64_t last_sample_unix_seconds,
                                  absl::string_view field = "last_sample_unix_seconds") const;
  absl::Status ValidateCondition(const sojourn::v1::HostCondition& condition) const;
  Clock& clock_;
  const absl::Duration ttl_;
  const int64_t max_clock_skew_seconds_;
  const int max_hosts_;
  absl::Duration forget_after_ = absl::ZeroDuration();
  // Whether `h` has been silent for longer than forget_after_ at `now`.
  bool Silent(const sojourn::v1::RegisteredHost& h, absl::Time now) const;
  mutable absl::Mutex mu_;
  std::map<std::string, sojourn::v1::RegisteredHost> hosts_ ABSL_GUARDED_BY(mu_);
  int64_t forgotten_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace sojourn::broker

#endif  // SOJOURN_SERVICES_BROKER_HOST_REGISTRY_H_
