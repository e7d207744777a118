#include "services/predictor/statemgr_directory.h"

#include <sys/resource.h>

#include <algorithm>
#include <iterator>
#include <set>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/text.h"

namespace sojourn::predictor {

namespace {

// "CODE: message" of a failed call, never empty after the code.
std::string Describe(const grpc::Status& s) {
  std::string message;
  if (!s.error_message().empty()) {
    message = Excerpt(s.error_message(), 256);
  } else if (s.error_code() == grpc::StatusCode::UNIMPLEMENTED) {
    message = "the peer has no such method (is it a state manager?)";
  } else {
    message = "connection failed";
  }
  return absl::StrCat(absl::StatusCodeToString(static_cast<absl::StatusCode>(s.error_code())),
                      ": ", message);
}

}  // namespace

absl::Status StatemgrUnavailable(const std::string& address, const std::string& host,
                                 const grpc::Status& status) {
  return absl::UnavailableError(absl::StrCat("state manager ", Excerpt(address), " of host ",
                                             Excerpt(host), ": ", Describe(status)));
}

absl::Status StatemgrCallError(const std::string& address, const std::string& host,
                               const grpc::Status& status, bool callers_deadline) {
  if (callers_deadline && status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
    return absl::DeadlineExceededError(
        absl::StrCat("the caller's deadline passed while state manager ", Excerpt(address),
                     " of host ", Excerpt(host), " was being asked"));
  }
  switch (status.error_code()) {
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return FromGrpcStatus(status);
    default:
      return StatemgrUnavailable(address, host, status);
  }
}

StatemgrDirectory::StatemgrDirectory(const std::string& broker_address, absl::Duration timeout,
                                     size_t max_channels, Clock* clock,
                                     std::shared_ptr<grpc::ChannelCredentials> credentials)
    : broker_address_(broker_address),
      credentials_(OrInsecure(std::move(credentials))),
      timeout_(timeout),
      max_channels_(std::max<size_t>(1, max_channels)),
      clock_(clock != nullptr ? *clock : Clock::Real()) {
  if (!broker_address_.empty()) {
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxBrokerMessageBytes);
    broker_ = sojourn::v1::Broker::NewStub(
        grpc::CreateCustomChannel(broker_address_, credentials_, args));
  }
}

absl::StatusOr<absl::Duration> StatemgrDirectory::Admit(const std::string& address,
                                                        const std::string& host, Use use) {
  absl::MutexLock l(&mu_);
  auto it = silent_.find(address);
  if (it == silent_.end() || (use == Use::kRequest && !it->second.requests)) return timeout_;
  const absl::Time now = clock_.Now();
  if (now >= it->second.until) return std::min(timeout_, kProbeTimeout);
  return absl::UnavailableError(absl::StrCat(
      "state manager ", Excerpt(address), " of host ", Excerpt(host),
      ": did not answer within its deadline (silent since ",
      absl::FormatTime("%H:%M:%S UTC", it->second.since, absl::UTCTimeZone()),
      "); not asked again until ",
      absl::FormatTime("%H:%M:%S UTC", it->second.until, absl::UTCTimeZone())));
}

StatemgrDirectory::CallDeadline StatemgrDirectory::DeadlineFor(absl::Duration timeout,
                                                               absl::Time caller_deadline) {
  const absl::Time now = absl::Now();
  const absl::Time own = now + timeout;
  if (caller_deadline >= own) return CallDeadline{own, false};
  // A state manager answers in milliseconds: one given kProbeTimeout (or
  // the whole timeout, if shorter) without answering is silent, whoever's
  // deadline it was. (The broker calls with a deadline as long as this
  // timeout, a little earlier: counted as the caller's, its calls never
  // started a backoff, and 8 hung state managers of 1,000 hosts made every
  // ranking wait 10 s.)
  return CallDeadline{caller_deadline, caller_deadline - now < std::min(timeout, kProbeTimeout)};
}

void StatemgrDirectory::Record(const std::string& address, const grpc::Status& status,
                               Use use, bool callers_deadline) {
  if (callers_deadline && status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) return;
  absl::MutexLock l(&mu_);
  if (status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED) {
    silent_.erase(address);
    return;
  }
  const absl::Time now = clock_.Now();
  auto [it, added] = silent_.try_emplace(address, Silence{now, now, kSilentBackoff});
  if (use == Use::kRequest && !it->second.requests) {
    // A request's whole timeout passed: from now on requests wait too.
    it->second.requests = true;
    it->second.since = now;
    it->second.backoff = kSilentBackoff;
  } else if (!added) {
    // Calls admitted before the first deadline was recorded end in theirs
    // too: only a deadline after the backoff (a failed probe) doubles it.
    if (now < it->second.until) return;
    it->second.backoff = std::min(2 * it->second.backoff, kMaxSilentBackoff);
  }
  it->second.until = now + it->second.backoff;
  // Bounded like the channels: requests may name any address.
  while (silent_.size() > 4 * (max_channels_ + listed_.size())) {
    auto oldest = std::min_element(
        silent_.begin(), silent_.end(),
        [](const auto& a, const auto& b) { return a.second.since < b.second.since; });
    silent_.erase(oldest);
  }
}

size_t StatemgrDirectory::silent() const {
  absl::MutexLock l(&mu_);
  const absl::Time now = clock_.Now();
  size_t n = 0;
  for (const auto& [address, s] : silent_) n += now < s.until;
  return n;
}

StatemgrDirectory::StubPtr StatemgrDirectory::StubFor(const std::string& address) {
  absl::MutexLock l(&mu_);
  auto it = stubs_.find(address);
  if (it != stubs_.end()) {
    lru_.splice(lru_.begin(), lru_, it->second);
    return it->second->second;
  }
  StubPtr stub = sojourn::v1::StateManager::NewStub(grpc::CreateChannel(address, credentials_));
  lru_.emplace_front(address, stub);
  stubs_[address] = lru_.begin();
  while (lru_.size() > max_channels_ + listed_.size()) {
    // The least recently used address the broker does not list; callers
    // still holding the evicted stub keep its channel alive until they are
    // done, then it closes.
    auto victim = std::prev(lru_.end());
    while (victim != lru_.begin() && listed_.count(victim->first) > 0) --victim;
    stubs_.erase(victim->first);
    lru_.erase(victim);
  }
  return stub;
}

size_t StatemgrDirectory::channels() const {
  absl::MutexLock l(&mu_);
  return lru_.size();
}

absl::StatusOr<std::shared_ptr<sojourn::v1::StateManager::Stub>> StatemgrDirectory::Find(
    const std::string& host, const std::string& explicit_address, std::string* address_out) {
  RETURN_IF_ERROR(ValidateLookupName(host));
  // HOST:PORT as the broker stores it: "localhost" would be dialled on port
  // 443 and a name that does not resolve would come back as UNAVAILABLE.
  if (!explicit_address.empty()) RETURN_IF_ERROR(ValidateHostPortAddress(explicit_address, "statemgr_address"));
  std::string address = explicit_address;
  if (address.empty()) {
    if (broker_ == nullptr) {
      return absl::FailedPreconditionError(
          "no broker configured (--broker) to find the host's state manager; pass "
          "statemgr_address");
    }
    sojourn::v1::GetHostRequest req;
    req.set_host(host);
    sojourn::v1::RegisteredHost resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
    grpc::Status s = broker_->GetHost(&ctx, req, &resp);
    if (!s.ok()) {
      absl::Status st = FromGrpcStatus(s);
      if (absl::IsNotFound(st) || absl::IsInvalidArgument(st)) return st;
      return absl::UnavailableError(
          absl::StrCat("broker ", broker_address_, " unreachable: ", Describe(s)));
    }
    address = resp.statemgr_address();
    // Registered by a broker that did not check addresses yet.
    if (absl::Status st = ValidateHostPortAddress(address, "statemgr_address"); !st.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "host '", Excerpt(host), "' is registered with broker ", broker_address_,
          " under a state manager address that cannot be dialled: ", st.message()));
    }
  }
  if (address_out != nullptr) *address_out = address;
  return StubFor(address);
}

absl::StatusOr<std::vector<std::pair<std::string, std::string>>> StatemgrDirectory::ListHosts() {
  if (broker_ == nullptr) return absl::FailedPreconditionError("no broker configured");
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  sojourn::v1::BrokerListHostsResponse resp;
  grpc::Status s = broker_->ListHosts(&ctx, {}, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  std::vector<std::pair<std::string, std::string>> out;
  std::set<std::string> addresses;
  for (const auto& h : resp.hosts()) {
    out.emplace_back(h.host(), h.statemgr_address());
    if (ValidateHostPortAddress(h.statemgr_address(), "statemgr_address").ok()) {
      addresses.insert(h.statemgr_address());
    }
  }
  const size_t listed = addresses.size();
  const size_t needed = listed + max_channels_ + kReservedFiles;
  size_t warned = 0;
  {
    absl::MutexLock l(&mu_);
    listed_ = std::move(addresses);
    warned = warned_files_;
  }
  // Once for each need past the limit, not at every prior.
  struct rlimit limit;
  if (needed > warned && getrlimit(RLIMIT_NOFILE, &limit) == 0 &&
      limit.rlim_cur != RLIM_INFINITY && needed > limit.rlim_cur) {
    {
      absl::MutexLock l(&mu_);
      warned_files_ = needed;
    }
    SOJOURN_LOG(WARNING,
                "open files: the broker lists %d state managers, and a connection to each needs "
                "about %d open files in all, above this process's limit of %d; raise the hard "
                "limit (systemd LimitNOFILE=, docker-compose ulimits: nofile:)",
                static_cast<int64_t>(listed), static_cast<int64_t>(needed),
                static_cast<int64_t>(limit.rlim_cur));
  }
  return out;
}

}  // namespace sojourn::predictor
