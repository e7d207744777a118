#include "services/monitor/gateway.h"

#include <signal.h>
#include <sys/resource.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace sojourn::monitor {
namespace {

constexpr int kLowestPriority = 19;

absl::Status Errno(const std::string& what, int pid, int err) {
  const std::string msg = absl::StrCat(what, " pid ", pid, ": ", std::strerror(err));
  if (err == EPERM || err == EACCES) return absl::PermissionDeniedError(msg);
  if (err == ESRCH) return absl::NotFoundError(msg);
  return absl::InternalError(msg);
}

// OK, NOT_FOUND when the process is gone, or another error.
absl::Status Signal(int pid, int sig, const char* what) {
  if (kill(pid, sig) == 0) return absl::OkStatus();
  return Errno(what, pid, errno);
}

absl::Status SetNice(int pid, int nice) {
  if (setpriority(PRIO_PROCESS, static_cast<id_t>(pid), nice) == 0) return absl::OkStatus();
  return Errno(absl::StrCat("setpriority ", nice), pid, errno);
}

}  // namespace

const std::vector<std::string>& GatewayActionNames() {
  static const auto* names = new std::vector<std::string>{
      "renice", "restore", "suspend", "resume", "terminate", "kill", "gone"};
  return *names;
}

Gateway::Gateway(const availability::ClassifierConfig& config) : classifier_(config) {}

Gateway::~Gateway() {
  std::vector<GatewayAction> ignored;
  for (auto& [pid, g] : guests_) Release(pid, g, &ignored);
}

bool Gateway::Move(int pid, Guest& g, GuestMode target, std::vector<GatewayAction>* out) {
  // Records a step; false when the process turned out to be gone.
  auto act = [&](const char* name, absl::Status s) {
    if (absl::IsNotFound(s)) return false;
    out->push_back({pid, name, std::move(s)});
    return true;
  };
  if (g.mode == target || g.mode == GuestMode::kTerminated) return true;
  if (target == GuestMode::kTerminated) {
    // SIGTERM first: a stopped process receives it once continued.
    if (!act("terminate", Signal(pid, SIGTERM, "SIGTERM"))) return false;
    if (g.mode == GuestMode::kSuspended) (void)Signal(pid, SIGCONT, "SIGCONT");
  } else if (target == GuestMode::kSuspended) {
    if (!act("suspend", Signal(pid, SIGSTOP, "SIGSTOP"))) return false;
  } else {
    if (g.mode == GuestMode::kSuspended && !act("resume", Signal(pid, SIGCONT, "SIGCONT"))) {
      return false;
    }
    if (target == GuestMode::kLowPriority && !g.reniced && g.original_nice < kLowestPriority) {
      if (!act("renice", SetNice(pid, kLowestPriority))) return false;
      g.reniced = true;
    } else if (target == GuestMode::kNormal && g.reniced) {
      // Tried once: without CAP_SYS_NICE the priority cannot be raised again
      // (PERMISSION_DENIED in the action), and retrying every sample would
      // not change that.
      g.reniced = false;
      if (!act("restore", SetNice(pid, g.original_nice))) return false;
    }
  }
  g.mode = target;
  return true;
}

void Gateway::Release(int pid, Guest& g, std::vector<GatewayAction>* out) {
  if (g.mode == GuestMode::kTerminated) {
    // Still there one sample after SIGTERM: it ignored it.
    if (kill(pid, 0) == 0) out->push_back({pid, "kill", Signal(pid, SIGKILL, "SIGKILL")});
    return;
  }
  (void)Move(pid, g, GuestMode::kNormal, out);
}

std::vector<GatewayAction> Gateway::Apply(const HostSample& sample, const std::set<int>& guests) {
  std::vector<GatewayAction> out;
  const availability::HostState state = classifier_.Add(sample);
  if (availability::IsFailure(state)) {
    mode_ = GuestMode::kTerminated;
  } else if (classifier_.in_spike()) {
    mode_ = GuestMode::kSuspended;
  } else {
    mode_ = state == availability::HostState::kS2 ? GuestMode::kLowPriority : GuestMode::kNormal;
  }
  // Guests no longer registered: released.
  for (auto it = guests_.begin(); it != guests_.end();) {
    if (guests.count(it->first) == 0) {
      Release(it->first, it->second, &out);
      it = guests_.erase(it);
    } else {
      ++it;
    }
  }
  for (int pid : guests) {
    auto it = guests_.find(pid);
    if (it == guests_.end()) {
      // First sight: its priority now is the one it gets back in S1.
      errno = 0;
      const int nice = getpriority(PRIO_PROCESS, static_cast<id_t>(pid));
      if (nice == -1 && errno != 0) {
        out.push_back({pid, "gone", Errno("getpriority", pid, errno)});
        continue;
      }
      it = guests_.emplace(pid, Guest{nice, GuestMode::kNormal, false}).first;
    }
    if (!Move(pid, it->second, mode_, &out)) {
      out.push_back({pid, "gone", absl::NotFoundError(absl::StrCat("pid ", pid, " exited"))});
      guests_.erase(it);
    }
  }
  return out;
}

}  // namespace sojourn::monitor
