// Finds a host's state manager (from the request, else from the broker's
// registry) and keeps one channel per state manager address, for the most
// recently used addresses: every state manager of the broker's last host
// list, plus the kDefaultMaxChannels most recently used other addresses
// (requests may name any address: without a bound, 3000 distinct ones grew
// the predictor's RSS from 25 to 91 MB). A bound of 256 in all made a
// cluster of more than 256 state managers (one per lab host, as deploy/
// runs them) reconnect to every one of them at each ranking: a warm
// 1,000-host RankHosts took 2.0-2.6 s instead of 1.1-1.2 s
// (docs/EVALUATION.md, "A state manager per host"). Remembers the state managers that let a call run into
// its deadline (Admit / Record), so that one silent peer -- a machine that
// accepts connections and never answers -- does not stall every request.
#ifndef SOJOURN_SERVICES_PREDICTOR_STATEMGR_DIRECTORY_H_
#define SOJOURN_SERVICES_PREDICTOR_STATEMGR_DIRECTORY_H_

#include <list>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/tls.h"
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
// A DEADLINE_EXCEEDED that was the caller's deadline (`callers_deadline`,
// StatemgrDirectory::CallDeadline) is DEADLINE_EXCEEDED, naming the state
// manager that was being asked: it says nothing of the state manager.
absl::Status StatemgrCallError(const std::string& address, const std::string& host,
                               const grpc::Status& status, bool callers_deadline = false);

// Thread-safe.
class StatemgrDirectory {
 public:
  // Channels kept beyond the state managers the broker lists.
  static constexpr size_t kDefaultMaxChannels = 256;

  // A silent state manager is not called for this long after its first
  // deadline, twice as long after each further one, up to kMaxSilentBackoff;
  // then calls go through again with kProbeTimeout until one is answered.
  static constexpr absl::Duration kSilentBackoff = absl::Seconds(30);
  static constexpr absl::Duration kMaxSilentBackoff = absl::Minutes(10);
  static constexpr absl::Duration kProbeTimeout = absl::Seconds(2);
  // The broker's host list may be long (RankHosts answers are larger still):
  // far above gRPC's default 4 MB.
  static constexpr int kMaxBrokerMessageBytes = 64 << 20;

  // `broker_address` may be empty: then requests must name the state manager.
  // Channels are kept for the state manager addresses of the broker's last
  // host list (ListHosts) and for at most `max_channels` (>= 1) others; when
  // a new address needs one, the least recently used other address is closed
  // (a listed one only when all kept are listed, i.e. after the list shrank). `clock`
  // (Clock::Real() when null) times the silent state managers' backoff; deadlines of calls are on
  // the wall clock. `credentials`: TLS to the broker and the state managers (common/tls.h); null =
  // plaintext.
  StatemgrDirectory(const std::string& broker_address, absl::Duration timeout,
                    size_t max_channels = kDefaultMaxChannels, Clock* clock = nullptr,
                    std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

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
  // Every host the broker knows with its state manager address; their
  // addresses (the HOST:PORT ones) keep their channels from now on. Logs a
  // warning when they need more open files than the process may have.
  // FAILED_PRECONDITION without a broker.
  absl::StatusOr<std::vector<std::pair<std::string, std::string>>> ListHosts();
  absl::Duration timeout() const { return timeout_; }

  // What a call is for: a request about the host itself (with timeout()),
  // or the population prior (a shorter deadline of the caller's; a state
  // manager too slow for it is left out of the prior only, and requests
  // about its hosts still wait their whole timeout).
  enum class Use { kRequest, kPrior };
  // How long a call to the state manager at `address` (of `host`, named in
  // the error) may take: timeout(), or kProbeTimeout after a backoff of a
  // request ended; UNAVAILABLE ("... did not answer within ...; not asked
  // again until ...") while the address is in its backoff (for kRequest:
  // one a request's deadline started). Call Record with the result.
  absl::StatusOr<absl::Duration> Admit(const std::string& address, const std::string& host,
                                       Use use = Use::kRequest);
  // The outcome of a call to `address`: DEADLINE_EXCEEDED starts (or
  // doubles) its backoff; any other status -- an answer, or a refusal that
  // gRPC reports at once -- clears it.
  // A call that ran into its caller's deadline (`callers_deadline`, from
  // CallDeadline) says nothing of the state manager and changes nothing (an
  // impatient client must not put a healthy state manager in a backoff).
  void Record(const std::string& address, const grpc::Status& status, Use use = Use::kRequest,
              bool callers_deadline = false);
  // The deadline of a call admitted with `timeout` (Admit) for a request
  // whose caller waits until `caller_deadline` (absl::InfiniteFuture() for
  // none): the earlier of the two, so that a call nobody waits for any more
  // is not left running (the caller's deadline used to be ignored: a client
  // that gave up after 1 s kept a predictor thread on a slow state manager
  // for the whole timeout). `callers`: the caller's, and shorter than
  // kProbeTimeout (a state manager given that long without answering is
  // silent, whoever's deadline it was).
  struct CallDeadline {
    absl::Time at;
    bool callers = false;
  };
  static CallDeadline DeadlineFor(absl::Duration timeout, absl::Time caller_deadline);
  // State managers in their backoff now.
  size_t silent() const;
  // Channels currently kept.
  size_t channels() const;

 private:
  using StubPtr = std::shared_ptr<sojourn::v1::StateManager::Stub>;
  StubPtr StubFor(const std::string& address);
  const std::string broker_address_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  const absl::Duration timeout_;
  const size_t max_channels_;
  Clock& clock_;
  std::unique_ptr<sojourn::v1::Broker::Stub> broker_;
  mutable absl::Mutex mu_;
  // Most recently used first; `stubs_` indexes it by address.
  std::list<std::pair<std::string, StubPtr>> lru_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::list<std::pair<std::string, StubPtr>>::iterator> stubs_
      ABSL_GUARDED_BY(mu_);
  // The state manager addresses of the broker's last host list.
  std::set<std::string> listed_ ABSL_GUARDED_BY(mu_);
  // Open files the predictor needs besides its channels (RocksDB, listening
  // sockets, clients), for the warning of ListHosts.
  static constexpr size_t kReservedFiles = 256;
  // The need last warned of (0 = none).
  size_t warned_files_ ABSL_GUARDED_BY(mu_) = 0;
  struct Silence {
    absl::Time since;     // the first deadline of this run of them
    absl::Time until;     // not called before
    absl::Duration backoff;
    bool requests = false;  // a request's deadline, not only the prior's
  };
  // At most 4 (max_channels_ + listed_.size()) entries (the oldest go first).
  std::map<std::string, Silence> silent_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_STATEMGR_DIRECTORY_H_
