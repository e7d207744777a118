// The guest gateway (DESIGN.md, "monitor"; paper 000 sections 3.1 and 4):
// what the monitor does to the registered guest processes after each sample,
// so that the host's owner does not notice them. The sample is classified by
// the same StateClassifier the state manager uses, and each guest is brought
// to the mode its state calls for:
//
//   S1                         the guest runs at the priority it had when
//                              the gateway first saw it
//   S2                         reniced to 19, the lowest priority
//   load above Th2 for no longer than the grace period (a transient spike,
//   still S1/S2)               suspended (SIGSTOP), resumed (SIGCONT) when
//                              the load drops below Th2 again
//   S3 (above Th2 for longer than the grace period), S4 (free memory below
//   the guest's working set)   terminated (SIGTERM, then SIGCONT so that a
//                              suspended guest receives it)
//
// A guest that is unregistered while suspended or reniced is resumed and
// given its priority back. Off unless the monitor runs with --gateway.
#ifndef SOJOURN_SERVICES_MONITOR_GATEWAY_H_
#define SOJOURN_SERVICES_MONITOR_GATEWAY_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/host_sample.h"
#include "models/availability/state.h"

namespace sojourn::monitor {

enum class GuestMode { kNormal, kLowPriority, kSuspended, kTerminated };

// One thing the gateway did (or tried) to one guest.
struct GatewayAction {
  int pid = 0;
  // "renice", "restore" (priority given back), "suspend", "resume",
  // "terminate", "kill" (SIGKILL: still there one sample after SIGTERM, once
  // unregistered), or "gone" (the process no longer exists: unregister it).
  std::string action;
  // Not OK when the system call failed (e.g. PERMISSION_DENIED giving a
  // reniced guest its priority back without CAP_SYS_NICE).
  absl::Status status;
};

// The action names, for metrics declared up front.
const std::vector<std::string>& GatewayActionNames();

// Not thread-safe: the monitor calls it from its sampling loop.
class Gateway {
 public:
  explicit Gateway(const availability::ClassifierConfig& config);
  // Resumes suspended guests and gives reniced ones their priority back.
  ~Gateway();

  // Classifies `sample` and brings every pid of `guests` to the mode of the
  // host's state; guests it managed that are no longer in `guests` are
  // released (resumed, priority given back). Returns what it did.
  std::vector<GatewayAction> Apply(const HostSample& sample, const std::set<int>& guests);

  // Forgets `pid` without acting on it (no resume, no priority given back,
  // no SIGKILL): the process exited, or its pid now names another process
  // that the gateway must leave alone.
  void Forget(int pid) { guests_.erase(pid); }

  availability::HostState state() const { return classifier_.current(); }
  // The mode the last Apply put the guests in.
  GuestMode mode() const { return mode_; }

 private:
  struct Guest {
    int original_nice = 0;
    GuestMode mode = GuestMode::kNormal;
    bool reniced = false;  // set to 19 by the gateway, not given back yet
  };
  // Moves one guest to `target`, appending what it did to `out`; false when
  // the process is gone.
  bool Move(int pid, Guest& g, GuestMode target, std::vector<GatewayAction>* out);
  void Release(int pid, Guest& g, std::vector<GatewayAction>* out);

  availability::StateClassifier classifier_;
  GuestMode mode_ = GuestMode::kNormal;
  std::map<int, Guest> guests_;
};

}  // namespace sojourn::monitor

#endif  // SOJOURN_SERVICES_MONITOR_GATEWAY_H_
