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
}  // namespace

Monitor::Monitor(ProcSampler& sampler, SampleSender& sender, Clock& clock, Metrics& metrics,
                 absl::Duration period)
    : sampler_(sampler), sender_(sender), clock_(clock), metrics_(metrics), period_(period) {
  // At 0 from start-up, so that the first failed read is a visible increase.
  metrics_.DeclareCounter(kSampleErrors, kSampleErrorsHelp, {});
  metrics_.DeclareCounter(kSamples, kSamplesHelp, {});
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
    absl::MutexLock l(&mu_);
    last_ = **sample;
  }
  absl::Status s = sender_.MaybeFlush();
  if (!s.ok()) {
    SOJOURN_LOG(WARNING, "%s (%d samples buffered)", s.ToString(), sender_.unacknowledged());
  }
  metrics_.Set("sojourn_monitor_unacknowledged_samples", "Samples not yet persisted upstream",
               {}, static_cast<double>(sender_.unacknowledged()));
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

std::set<int> Monitor::guests() const {
  absl::MutexLock l(&mu_);
  return guests_;
}

std::optional<HostSample> Monitor::last_sample() const {
  absl::MutexLock l(&mu_);
  return last_;
}

}  // namespace sojourn::monitor
