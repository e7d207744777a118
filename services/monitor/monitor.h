// The monitor loop: every period, sample the host (excluding registered guest
// processes), buffer the sample and push the buffer to the state manager;
// with a gateway, also act on the registered guests (gateway.h). The period
// is fixed, or with an AdaptivePeriod it adapts to how often the host's state
// changes, with random extra samples in between (paper 001 section IV.B,
// adaptive_period.h).
#ifndef SOJOURN_SERVICES_MONITOR_MONITOR_H_
#define SOJOURN_SERVICES_MONITOR_MONITOR_H_

#include <map>
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
#include "services/monitor/adaptive_period.h"
#include "services/monitor/gateway.h"
#include "services/monitor/proc_sampler.h"
#include "services/monitor/sample_sender.h"

namespace sojourn::monitor {

// Thread-safe. Start() runs the loop on its own thread; Stop() joins it.
class Monitor {
 public:
  // All references (and `gateway` and `adaptive`, if not null) must outlive
  // the Monitor. Without `adaptive`, samples are `period` apart. With it, the
  // period is adaptive->period(), which starts at its minimum (the sender's
  // nominal period for the state manager stays what SenderConfig says).
  Monitor(ProcSampler& sampler, SampleSender& sender, Clock& clock, Metrics& metrics,
          absl::Duration period, Gateway* gateway = nullptr, AdaptivePeriod* adaptive = nullptr);
  ~Monitor();

  void Start();
  void Stop();
  // One iteration: sample, buffer, push (tests call it directly). A regular
  // sample for the adaptive period, but it does not schedule anything.
  void Tick();

  struct NextSample {
    absl::Time at;
    bool extra = false;  // a random extra sample of the adaptive period
  };
  // Takes the sample that is due (the first call: a regular one now) and
  // returns when the next one is due. Run() calls it in a loop and sleeps
  // until the returned time; tests call it directly with a FakeClock set to
  // the returned time. Without an AdaptivePeriod, the samples are exactly
  // `period` apart, as they always were.
  NextSample Step();
  // The current sampling period: the fixed one, or the adaptive one.
  absl::Duration period() const;

  // INVALID_ARGUMENT for pid <= 0 (or init, or the monitor itself);
  // NOT_FOUND when the process does not exist under the sampler's proc root
  // (or has exited: a zombie). Records the process's start time (/proc/<pid>/
  // stat field 22), so that a later process given the same pid is not taken
  // for the guest; registering a registered pid again records it anew.
  absl::Status RegisterGuest(int pid);
  void UnregisterGuest(int pid);
  // The registered guests. Each sample first drops the ones that exited (no
  // entry under the proc root, or a zombie) and the ones whose pid now names
  // another process (another start time), with the gateway on or off.
  std::set<int> guests() const;
  std::optional<HostSample> last_sample() const;
  // "off" without a gateway, else the guests' mode after the last sample
  // ("normal", "low_priority", "suspended", "terminated").
  std::string gateway_mode() const;

 private:
  struct TickResult {
    bool sampled = false;  // a sample was taken and buffered
    bool changed = false;  // it changed the host's condition (adaptive period)
  };
  TickResult TakeSample(AdaptivePeriod::Kind kind) ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);
  NextSample StepAdaptive() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);
  void Run();
  // Drops the guests that exited or whose pid was reused (see guests()).
  void PruneGuests() ABSL_EXCLUSIVE_LOCKS_REQUIRED(tick_mu_);
  void ApplyGateway(const HostSample& sample);
  ProcSampler& sampler_;
  SampleSender& sender_;
  Clock& clock_;
  Metrics& metrics_;
  const absl::Duration period_;
  Gateway* const gateway_;  // null: off
  AdaptivePeriod* const adaptive_;  // null: the fixed period_
  mutable absl::Mutex mu_;
  absl::Duration current_period_ ABSL_GUARDED_BY(mu_);
  struct Guest {
    // The process's start time (ProcessInfo::start_ticks); unset until known.
    std::optional<uint64_t> start_ticks;
    // Which registration this is: a pruning decided on an earlier one must
    // not drop a registration made meanwhile.
    uint64_t registration = 0;
  };
  std::map<int, Guest> guests_ ABSL_GUARDED_BY(mu_);
  uint64_t registrations_ ABSL_GUARDED_BY(mu_) = 0;
  std::optional<HostSample> last_ ABSL_GUARDED_BY(mu_);
  GuestMode gateway_mode_ ABSL_GUARDED_BY(mu_) = GuestMode::kNormal;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  absl::Mutex tick_mu_;  // Tick is not reentrant (the sampler keeps state)
  // Step's schedule: the next regular sample (unset before the first Step)
  // and the pending random extra sample.
  std::optional<absl::Time> next_regular_ ABSL_GUARDED_BY(tick_mu_);
  std::optional<absl::Time> extra_at_ ABSL_GUARDED_BY(tick_mu_);
  // The last regular sample gave nothing and the next one comes sooner.
  bool retrying_ ABSL_GUARDED_BY(tick_mu_) = false;
  // Unix second of the last reading of /proc (adaptive period).
  std::optional<int64_t> last_read_unix_ ABSL_GUARDED_BY(tick_mu_);
  std::thread thread_;
};

}  // namespace sojourn::monitor

#endif  // SOJOURN_SERVICES_MONITOR_MONITOR_H_
