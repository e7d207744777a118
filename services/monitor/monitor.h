// The monitor loop: every period, sample the host (excluding registered guest
// processes), buffer the sample and push the buffer to the state manager;
// with a gateway, also act on the registered guests (gateway.h).
#ifndef SOJOURN_SERVICES_MONITOR_MONITOR_H_
#define SOJOURN_SERVICES_MONITOR_MONITOR_H_

#include <optional>
#include <set>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "services/monitor/gateway.h"
#include "services/monitor/proc_sampler.h"
#include "services/monitor/sample_sender.h"

namespace sojourn::monitor {

// Thread-safe. Start() runs the loop on its own thread; Stop() joins it.
class Monitor {
 public:
  // All references (and `gateway`, if not null) must outlive the Monitor.
  Monitor(ProcSampler& sampler, SampleSender& sender, Clock& clock, Metrics& metrics,
          absl::Duration period, Gateway* gateway = nullptr);
  ~Monitor();

  void Start();
  void Stop();
  // One iteration: sample, buffer, push (tests call it directly).
  void Tick();

  // INVALID_ARGUMENT for pid <= 0; NOT_FOUND when the process does not exist.
  absl::Status RegisterGuest(int pid);
  void UnregisterGuest(int pid);
  std::set<int> guests() const;
  std::optional<HostSample> last_sample() const;
  // "off" without a gateway, else the guests' mode after the last sample
  // ("normal", "low_priority", "suspended", "terminated").
  std::string gateway_mode() const;

 private:
  void Run();
  void ApplyGateway(const HostSample& sample);
  ProcSampler& sampler_;
  SampleSender& sender_;
  Clock& clock_;
  Metrics& metrics_;
  const absl::Duration period_;
  Gateway* const gateway_;  // null: off
  mutable absl::Mutex mu_;
  std::set<int> guests_ ABSL_GUARDED_BY(mu_);
  std::optional<HostSample> last_ ABSL_GUARDED_BY(mu_);
  GuestMode gateway_mode_ ABSL_GUARDED_BY(mu_) = GuestMode::kNormal;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex tick_mu_;  // Tick is not reentrant (the sampler keeps state)
  std::thread thread_;
};

}  // namespace sojourn::monitor

#endif  // SOJOURN_SERVICES_MONITOR_MONITOR_H_
