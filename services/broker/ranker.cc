#include "services/broker/ranker.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace sojourn::broker {
namespace {

const char* StateName(sojourn::v1::HostState s) {
  switch (s) {
    case sojourn::v1::HOST_STATE_S1_IDLE: return "S1 (idle)";
    case sojourn::v1::HOST_STATE_S2_BUSY: return "S2 (busy)";
    case sojourn::v1::HOST_STATE_S3_OVERLOADED: return "S3 (overloaded)";
    case sojourn::v1::HOST_STATE_S4_MEMORY_THRASHING: return "S4 (memory thrashing)";
    case sojourn::v1::HOST_STATE_S5_REVOKED: return "S5 (revoked)";
    default: return "unknown";
  }
}

}  // namespace

absl::StatusOr<sojourn::v1::RankHostsResponse> RankHosts(
    const sojourn::v1::RankHostsRequest& request,
    const std::vector<sojourn::v1::RegisteredHost>& hosts, TrSource& tr_source) {
  const sojourn::v1::JobRequirements& job = request.job();
  if (job.duration_seconds() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job duration_seconds must be > 0, got ", job.duration_seconds()));
  }
  if (job.duration_seconds() > 7 * 86400) {
    return absl::InvalidArgumentError("job duration_seconds must be at most 7 days");
  }
  if (!(job.cpu_share_ratio() >= 0) || !(job.memory_mb() >= 0) ||
      !std::isfinite(job.cpu_share_ratio()) || !std::isfinite(job.memory_mb())) {
    return absl::InvalidArgumentError("cpu_share_ratio and memory_mb must be finite and >= 0");
  }
  const std::string policy = request.policy().empty() ? "tr" : request.policy();
  if (policy != "tr") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown policy '", policy, "' (available: tr)"));
  }
  const double cpu = job.cpu_share_ratio() > 0 ? job.cpu_share_ratio() : 1.0;

  sojourn::v1::RankHostsResponse out;
  out.set_policy(policy);
  std::vector<sojourn::v1::HostRank> eligible, ineligible;
  for (const sojourn::v1::RegisteredHost& h : hosts) {
    sojourn::v1::HostRank r;
    r.set_host(h.host());
    *r.mutable_attributes() = h.attributes();
    if (!h.live()) {
      r.set_reason("heartbeat expired: the host's state manager stopped reporting");
      ineligible.push_back(r);
      continue;
    }
    if (h.attributes().cpu_cores() > 0 && cpu > h.attributes().cpu_cores()) {
      r.set_reason(absl::StrFormat("needs %.2f CPUs, host has %d", cpu, h.attributes().cpu_cores()));
      ineligible.push_back(r);
      continue;
    }
    if (h.attributes().total_mem_mb() > 0 && job.memory_mb() > h.attributes().total_mem_mb()) {
      r.set_reason(absl::StrFormat("needs %.0f MiB of memory, host has %.0f MiB", job.memory_mb(),
                                   h.attributes().total_mem_mb()));
      ineligible.push_back(r);
      continue;
    }
    sojourn::v1::PredictAvailabilityRequest preq;
    preq.set_host(h.host());
    preq.set_window_seconds(job.duration_seconds());
    preq.set_statemgr_address(h.statemgr_address());
    auto p = tr_source.Predict(preq);
    if (!p.ok()) {
      r.set_reason(absl::StrCat("no prediction: ", p.status().message()));
      ineligible.push_back(r);
      continue;
    }
    r.set_tr_ratio(p->tr_ratio());
    r.set_mttf_seconds(p->mttf_seconds());
    r.set_current_state(p->initial_state());
    r.set_history_windows(p->history_windows());
    r.set_low_history(p->low_history());
    const int state = static_cast<int>(p->initial_state());
    if (state >= 3) {
      r.set_reason(absl::StrCat("host is in ", StateName(p->initial_state()), " now"));
      ineligible.push_back(r);
      continue;
    }
    r.set_eligible(true);
    r.set_reason(absl::StrFormat("TR over %ds = %.3f%s", job.duration_seconds(), p->tr_ratio(),
                                 p->low_history() ? " (low history)" : ""));
    eligible.push_back(r);
  }
  std::stable_sort(eligible.begin(), eligible.end(),
                   [](const sojourn::v1::HostRank& a, const sojourn::v1::HostRank& b) {
                     if (a.tr_ratio() != b.tr_ratio()) return a.tr_ratio() > b.tr_ratio();
                     if (a.mttf_seconds() != b.mttf_seconds()) {
                       return a.mttf_seconds() > b.mttf_seconds();
                     }
                     return a.host() < b.host();
                   });
  int rank = 0;
  for (auto& r : eligible) {
    r.set_rank(++rank);
    *out.add_hosts() = std::move(r);
  }
  for (auto& r : ineligible) *out.add_hosts() = std::move(r);
  return out;
}

}  // namespace sojourn::broker
