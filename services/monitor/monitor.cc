#include "services/monitor/monitor.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace sojourn::monitor {

namespace {
constexpr char kSampleErrors[] = "sojourn_monitor_sample_errors_total";
constexpr char kSampleErrorsHelp[] = "Failed reads of /proc";
constexpr char kSamples[] = "sojourn_monitor_samples_total";
constexpr char kSamplesHelp[] = "Samples taken";
constexpr char kGatewayActions[] = "sojourn_monitor_gateway_actions_total";
constexpr char kGatewayActionsHelp[] =
    "What the guest gateway did to registered guests (renice, restore, suspend, resume, "
    "terminate, kill, gone)";

const char* StateName(availability::HostState s) {
  static constexpr const char* kNames[] = {"?", "S1", "S2", "S3", "S4", "S5"};
  return kNames[availability::StateIndex(s)];
}
}  // namespace

Monitor::Monitor(ProcSampler& sampler, SampleSender& sender, Clock& clock, Metrics& metrics,
                 absl::Duration period, Gateway* gateway)
    : sampler_(sampler),
      sender_(sender),
      clock_(clock),
      metrics_(metrics),
      period_(period),
      gateway_(gateway) {
  // At 0 from start-up, so that the first failed read is a visible increase.
  metrics_.DeclareCounter(kSampleErrors, kSampleErrorsHelp, {});
  metrics_.DeclareCounter(kSamples, kSamplesHelp, {});
  if (gateway_ != nullptr) {
    for (const std::string& a : GatewayActionNames()) {
      metrics_.DeclareCounter(kGatewayActions, kGatewayActionsHelp, {{"action", a}});
    }
  }
}

Monitor::~Monitor() { Stop(); }

void Monitor::Start() { thread_ = std::thread([this] { Run(); }); }

void Monitor::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void Monitor::Tick() {
  absl::MutexLock tick_lock(&tick_mu_);
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  auto sample = sampler_.Sample(now, guests());
  if (!sample.ok()) {
    SOJOURN_LOG(WARNING, "sampling: %s", sample.status().ToString());
    metrics_.Increment(kSampleErrors, kSampleErrorsHelp, {});
  } else if (sample->has_value()) {
    sender_.Add(**sample);
    metrics_.Increment(kSamples, kSamplesHelp, {});
    metrics_.Set("sojourn_monitor_cpu_load_ratio", "Host CPU load excluding guests", {},
                 (*sample)->cpu_load);
    {
      absl::MutexLock l(&mu_);
      last_ = **sample;
    }
    if (gateway_ != nullptr) ApplyGateway(**sample);
  }
  absl::Status s = sender_.MaybeFlush();
  if (!s.ok()) {
    SOJOURN_LOG(WARNING, "%s (%d samples buffered)", s.ToString(), sender_.unacknowledged());
  }
  metrics_.Set("sojourn_monitor_unacknowledged_samples", "Samples not yet persisted upstream",
               {}, static_cast<double>(sender_.unacknowledged()));
}

void Monitor::ApplyGateway(const HostSample& sample) {
  const std::vector<GatewayAction> actions = gateway_->Apply(sample, guests());
  {
    absl::MutexLock l(&mu_);
    gateway_mode_ = gateway_->mode();
  }
  for (const GatewayAction& a : actions) {
    metrics_.Increment(kGatewayActions, kGatewayActionsHelp, {{"action", a.action}});
    if (a.status.ok()) {
      SOJOURN_LOG(INFO, "gateway: %s guest %d (host %s, load %.2f)", a.action, a.pid,
                  StateName(gateway_->state()), sample.cpu_load);
    } else {
      SOJOURN_LOG(WARNING, "gateway: %s guest %d: %s", a.action, a.pid, a.status.ToString());
    }
    // A terminated guest is no longer the gateway's or the load's to discount
    // (one that ignores SIGTERM gets SIGKILL on the next sample).
    if (a.action == "terminate" || a.action == "gone") UnregisterGuest(a.pid);
  }
}

void Monitor::Run() {
  absl::MutexLock l(&mu_);
  absl::Time next = clock_.Now();
  while (!stopping_) {
    mu_.Unlock();
    Tick();
    mu_.Lock();
    next += period_;
    clock_.SleepUntil(next, &mu_, &stopping_);
  }
}

absl::Status Monitor::RegisterGuest(int pid) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("invalid pid ", pid));
  // Guest load is subtracted from the host's: registering init or the monitor
  // itself would hide the owner's load (or the monitor's own cost) by mistake.
  if (pid == 1 || pid == getpid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pid ", pid, pid == 1 ? " is init" : " is this monitor", ", not a guest job"));
  }
  if (kill(pid, 0) != 0 && errno == ESRCH) {
    return absl::NotFoundError(absl::StrCat("no process with pid ", pid));
  }
  absl::MutexLock l(&mu_);
  guests_.insert(pid);
  return absl::OkStatus();
}

void Monitor::UnregisterGuest(int pid) {
  absl::MutexLock l(&mu_);
  guests_.erase(pid);
}

std::string Monitor::gateway_mode() const {
  if (gateway_ == nullptr) return "off";
  absl::MutexLock l(&mu_);
  switch (gateway_mode_) {
    case GuestMode::kNormal: return "normal";
    case GuestMode::kLowPriority: return "low_priority";
    case GuestMode::kSuspended: return "suspended";
    case GuestMode::kTerminated: return "terminated";
  }
  return "?";
}

std::set<int> Monitor::guests() const {
  absl::MutexLock l(&mu_);
  return guests_;
}

std::optional<HostSample> Monitor::last_sample() const {
  absl::MutexLock l(&mu_);
  return last_;
}

}  // namespace sojourn::monitor
