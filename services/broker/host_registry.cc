#include "services/broker/host_registry.h"

#include <algorithm>
#include <cstdint>

#include "absl/strings/str_cat.h"

#include "common/status.h"
#include "common/text.h"

namespace sojourn::broker {

absl::Status HostRegistry::Register(const sojourn::v1::RegisterHostRequest& request) {
  // The same rules as the state managers' for names, and a bounded address:
  // the predictor quotes the address in its errors, and an address of tens
  // of kB once made those errors too large for the broker's channel.
  RETURN_IF_ERROR(ValidateHostName(request.host()));
  // HOST:PORT: "localhost" was stored and later dialled on port 443.
  RETURN_IF_ERROR(ValidateHostPortAddress(request.statemgr_address(), "statemgr_address"));
  RETURN_IF_ERROR(ValidateLastSample(request.last_sample_unix_seconds()));
  if (request.has_condition()) RETURN_IF_ERROR(ValidateCondition(request.condition()));
  const sojourn::v1::HostAttributes& a = request.attributes();
  RETURN_IF_ERROR(
      ValidateHostAttributes(request.host(), a.cpu_mhz(), a.cpu_cores(), a.total_mem_mb()));
  if (request.has_cpu_load_ratio() &&
      !(request.cpu_load_ratio() >= 0 && request.cpu_load_ratio() <= 1)) {
    return absl::InvalidArgumentError(absl::StrCat("host ", request.host(),
                                                   ": cpu_load_ratio must be in [0, 1], got ",
                                                   request.cpu_load_ratio()));
  }
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  absl::MutexLock l(&mu_);
  if (forget_after_ > absl::ZeroDuration()) {
    auto known = hosts_.find(request.host());
    const int64_t newest = std::max(request.last_sample_unix_seconds(),
                                    known != hosts_.end() ? known->second.last_sample_unix_seconds()
                                                          : int64_t{0});
    if (newest > 0 && absl::FromUnixSeconds(now) - absl::FromUnixSeconds(newest) > forget_after_) {
      if (known != hosts_.end()) hosts_.erase(known);
      return absl::FailedPreconditionError(absl::StrCat(
          "host '", Excerpt(request.host()), "' was not registered: its newest sample, at ",
          absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(newest),
                           absl::UTCTimeZone()),
          ", is older than the broker's --forget_hosts_after_seconds (",
          absl::ToInt64Seconds(forget_after_), " s); it registers again once it samples"));
    }
  }
  if (hosts_.size() >= static_cast<size_t>(max_hosts_) &&
      hosts_.find(request.host()) == hosts_.end()) {
    // Full: the expired host silent the longest makes room (its history
    // stays with its state manager); with every host live, refuse.
    auto oldest = hosts_.end();
    for (auto h = hosts_.begin(); h != hosts_.end(); ++h) {
      if (!Live(h->second) &&
          (oldest == hosts_.end() || h->second.last_heartbeat_unix_seconds() <
                                         oldest->second.last_heartbeat_unix_seconds())) {
        oldest = h;
      }
    }
    if (oldest == hosts_.end()) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "the broker holds ", hosts_.size(), " live hosts, its limit (--max_hosts); host '",
          Excerpt(request.host()), "' was not registered"));
    }
    hosts_.erase(oldest);
    ++forgotten_;
  }
  auto [it, inserted] = hosts_.try_emplace(request.host());
  sojourn::v1::RegisteredHost& h = it->second;
  if (inserted) h.set_registered_unix_seconds(now);
  h.set_host(request.host());
  h.set_statemgr_address(request.statemgr_address());
  *h.mutable_attributes() = request.attributes();
  h.set_last_heartbeat_unix_seconds(now);
  // A registration older than what the broker knows (a late or retried call)
  // leaves the condition as it is.
  if (inserted || request.last_sample_unix_seconds() == 0 ||
      request.last_sample_unix_seconds() >= h.last_sample_unix_seconds()) {
    if (request.has_condition()) {
      *h.mutable_condition() = request.condition();
    } else {
      h.clear_condition();
    }
  }
  if (request.last_sample_unix_seconds() > h.last_sample_unix_seconds()) {
    h.set_last_sample_unix_seconds(request.last_sample_unix_seconds());
  }
  if (request.has_cpu_load_ratio()) h.set_cpu_load_ratio(request.cpu_load_ratio());
  return absl::OkStatus();
}

absl::Status HostRegistry::ValidateLastSample(int64_t last_sample_unix_seconds,
                                              absl::string_view field) const {
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  const int64_t latest =
      now > INT64_MAX - max_clock_skew_seconds_ ? INT64_MAX : now + max_clock_skew_seconds_;
  if (last_sample_unix_seconds >= 0 && last_sample_unix_seconds <= latest) {
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError(absl::StrCat(
      field, " ", last_sample_unix_seconds, " must be in [0, ", latest, "] (",
      field == "last_sample_unix_seconds" ? "0 = no sample yet; " : "",
      "at most the broker's clock + --max_clock_skew_seconds ", max_clock_skew_seconds_, ")"));
}

absl::Status HostRegistry::ValidateCondition(const sojourn::v1::HostCondition& c) const {
  if (c.state() < sojourn::v1::HOST_STATE_S1_IDLE ||
      c.state() > sojourn::v1::HOST_STATE_S5_REVOKED) {
    return absl::InvalidArgumentError(
        absl::StrCat("condition.state must be S1..S5 (1..5), got ", static_cast<int>(c.state())));
  }
  RETURN_IF_ERROR(
      ValidateLastSample(c.state_since_unix_seconds(), "condition.state_since_unix_seconds"));
  if (c.load_band() < -1 || c.load_band() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("condition.load_band must be -1 (unknown), 0 or 1, got ", c.load_band()));
  }
  if (c.step_seconds() < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("condition.step_seconds must be >= 0 (0 = unknown), got ", c.step_seconds()));
  }
  return absl::OkStatus();
}

absl::Status HostRegistry::Heartbeat(const std::string& host, int64_t last_sample_unix_seconds,
                                     const sojourn::v1::HostCondition* condition) {
  RETURN_IF_ERROR(ValidateLastSample(last_sample_unix_seconds));
  if (condition != nullptr) RETURN_IF_ERROR(ValidateCondition(*condition));
  absl::MutexLock l(&mu_);
  auto it = hosts_.find(host);
  if (it == hosts_.end()) {
    return absl::NotFoundError(absl::StrCat("host '", Excerpt(host), "' is not registered; register first"));
  }
  it->second.set_last_heartbeat_unix_seconds(absl::ToUnixSeconds(clock_.Now()));
  const int64_t known = it->second.last_sample_unix_seconds();
  if (condition != nullptr) {
    // Not from a heartbeat older than what the broker knows.
    if (last_sample_unix_seconds == 0 || last_sample_unix_seconds >= known) {
      *it->second.mutable_condition() = *condition;
    }
  } else if (last_sample_unix_seconds > known) {
    it->second.clear_condition();
  }
  if (last_sample_unix_seconds > it->second.last_sample_unix_seconds()) {
    it->second.set_last_sample_unix_seconds(last_sample_unix_seconds);
  }
  return absl::OkStatus();
}

bool HostRegistry::Live(const sojourn::v1::RegisteredHost& h) const {
  return clock_.Now() - absl::FromUnixSeconds(h.last_heartbeat_unix_seconds()) <= ttl_;
}

sojourn::v1::RegisteredHost HostRegistry::WithLiveness(const sojourn::v1::RegisteredHost& h) const {
  sojourn::v1::RegisteredHost out = h;
  out.set_live(Live(h));
  return out;
}

absl::StatusOr<sojourn::v1::RegisteredHost> HostRegistry::Get(const std::string& host) const {
  absl::MutexLock l(&mu_);
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return absl::NotFoundError(absl::StrCat("unknown host '", Excerpt(host), "'"));
  return WithLiveness(it->second);
}

int64_t HostRegistry::forgotten() const {
  absl::MutexLock l(&mu_);
  return forgotten_;
}

void HostRegistry::set_forget_after(absl::Duration after) {
  forget_after_ = after > absl::ZeroDuration() ? std::max(after, ttl_) : absl::ZeroDuration();
}

bool HostRegistry::Silent(const sojourn::v1::RegisteredHost& h, absl::Time now) const {
  if (forget_after_ <= absl::ZeroDuration()) return false;
  // No heartbeat (the state manager is gone), or no sample (the host is gone
  // and its state manager reports it S5); 0 = no sample reported yet.
  return now - absl::FromUnixSeconds(h.last_heartbeat_unix_seconds()) > forget_after_ ||
         (h.last_sample_unix_seconds() > 0 &&
          now - absl::FromUnixSeconds(h.last_sample_unix_seconds()) > forget_after_);
}

std::vector<std::string> HostRegistry::ForgetSilent() {
  const absl::Time now = clock_.Now();
  std::vector<std::string> out;
  absl::MutexLock l(&mu_);
  for (auto it = hosts_.begin(); it != hosts_.end();) {
    if (Silent(it->second, now)) {
      out.push_back(it->first);
      it = hosts_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

HostRegistry::Census HostRegistry::Count() const {
  Census out;
  absl::MutexLock l(&mu_);
  for (const auto& [name, h] : hosts_) {
    if (!Live(h)) {
      ++out.expired;
      continue;
    }
    const int state = h.has_condition() ? static_cast<int>(h.condition().state()) : 0;
    ++out.live[state >= 1 && state <= 5 ? state : 0];
  }
  return out;
}

std::vector<sojourn::v1::RegisteredHost> HostRegistry::List() const {
  absl::MutexLock l(&mu_);
  std::vector<sojourn::v1::RegisteredHost> out;
  out.reserve(hosts_.size());
  for (const auto& [name, h] : hosts_) out.push_back(WithLiveness(h));
  return out;
}

}  // namespace sojourn::broker
