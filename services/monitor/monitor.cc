#include "services/monitor/monitor.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <filesystem>
#include <map>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace sojourn::monitor {

namespace {
constexpr char kSampleErrors[] = "sojourn_monitor_sample_errors_total";
constexpr char kSampleErrorsHelp[] = "Failed reads of /proc";
constexpr char kSamples[] = "sojourn_monitor_samples_total";
constexpr char kSamplesHelp[] = "Samples taken";
constexpr char kExtraSamples[] = "sojourn_monitor_extra_samples_total";
constexpr char kExtraSamplesHelp[] =
    "Random extra samples of the adaptive period (also counted in samples_total)";
constexpr char kPeriod[] = "sojourn_monitor_period_seconds";
constexpr char kPeriodHelp[] = "Current sampling period (adaptive with --adaptive_period)";
constexpr char kGatewayActions[] = "sojourn_monitor_gateway_actions_total";
constexpr char kGatewayActionsHelp[] =
    "What the guest gateway did to registered guests (renice, restore, suspend, resume, "
    "terminate, kill, gone)";

constexpr char kGuestsPruned[] = "sojourn_monitor_guests_pruned_total";
constexpr char kGuestsPrunedHelp[] =
    "Registered guests dropped at a sample: exited (no longer under the proc root, or a zombie) "
    "or pid_reused (the pid names a process with another start time)";

const char* StateName(availability::HostState s) {
  static constexpr const char* kNames[] = {"?", "S1", "S2", "S3", "S4", "S5"};
  return kNames[availability::StateIndex(s)];
}
}  // namespace

Monitor::Monitor(ProcSampler& sampler, SampleSender& sender, Clock& clock, Metrics& metrics,
                 absl::Duration period, Gateway* gateway, AdaptivePeriod* adaptive)
    : sampler_(sampler),
      sender_(sender),
      clock_(clock),
      metrics_(metrics),
      period_(period),
      gateway_(gateway),
      adaptive_(adaptive),
      current_period_(adaptive != nullptr ? adaptive->period() : period) {
  // At 0 from start-up, so that the first failed read is a visible increase.
  metrics_.DeclareCounter(kSampleErrors, kSampleErrorsHelp, {});
  metrics_.DeclareCounter(kSamples, kSamplesHelp, {});
  if (adaptive_ != nullptr) metrics_.DeclareCounter(kExtraSamples, kExtraSamplesHelp, {});
  metrics_.Set(kPeriod, kPeriodHelp, {}, absl::ToDoubleSeconds(current_period_));
  for (const char* reason : {"exited", "pid_reused"}) {
    metrics_.DeclareCounter(kGuestsPruned, kGuestsPrunedHelp, {{"reason", reason}});
  }
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
  (void)TakeSample(AdaptivePeriod::Kind::kRegular);
}

Monitor::TickResult Monitor::TakeSample(AdaptivePeriod::Kind kind) {
  TickResult result;
  const bool extra = kind == AdaptivePeriod::Kind::kExtra;
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  if (adaptive_ != nullptr && last_read_unix_.has_value() && now <= *last_read_unix_) {
    // Woken so late that this sample falls in the second of the previous
    // one: the sampler would see an empty interval and restart it, losing
    // the load since the previous reading. Skipped; the next one is >= 1 s on.
    return result;
  }
  // Before reading the guests' CPU time: a reused pid's is the host's.
  PruneGuests();
  auto sample = sampler_.Sample(now, guests());
  if (sample.ok()) last_read_unix_ = now;
  if (!sample.ok()) {
    SOJOURN_LOG(WARNING, "sampling: %s", sample.status().ToString());
    metrics_.Increment(kSampleErrors, kSampleErrorsHelp, {});
  } else if (sample->has_value()) {
    result.sampled = true;
    sender_.Add(**sample);
    metrics_.Increment(kSamples, kSamplesHelp, {});
    if (extra) metrics_.Increment(kExtraSamples, kExtraSamplesHelp, {});
    metrics_.Set("sojourn_monitor_cpu_load_ratio", "Host CPU load excluding guests", {},
                 (*sample)->cpu_load);
    {
      absl::MutexLock l(&mu_);
      last_ = **sample;
    }
    if (adaptive_ != nullptr) {
      const absl::Duration before = adaptive_->period();
      result.changed = adaptive_->Observe(**sample, kind);
      const absl::Duration after = adaptive_->period();
      if (after != before) {
        {
          absl::MutexLock l(&mu_);
          current_period_ = after;
        }
        metrics_.Set(kPeriod, kPeriodHelp, {}, absl::ToDoubleSeconds(after));
        // Only on a change of the period: at most one line per doubling
        // (every --stable_seconds) and one per reset from above the minimum.
        SOJOURN_LOG(INFO, "adaptive period %ds -> %ds: %s", absl::ToInt64Seconds(before),
                    absl::ToInt64Seconds(after),
                    result.changed ? absl::StrCat("host now ", adaptive_->condition(), " at ",
                                                  extra ? "a random extra" : "a regular",
                                                  " sample")
                                   : absl::StrCat("no change for ",
                                                  absl::ToInt64Seconds(
                                                      adaptive_->config().stable),
                                                  "s"));
      }
    }
    if (gateway_ != nullptr) ApplyGateway(**sample);
  }
  // An extra sample that changed nothing waits in the buffer for the next
  // regular push: one stream to the state manager per regular period.
  if (extra && !result.changed) return result;
  absl::Status s = sender_.MaybeFlush();
  if (!s.ok()) {
    SOJOURN_LOG(WARNING, "%s (%d samples buffered)", s.ToString(), sender_.unacknowledged());
  }
  metrics_.Set("sojourn_monitor_unacknowledged_samples", "Samples not yet persisted upstream",
               {}, static_cast<double>(sender_.unacknowledged()));
  return result;
}

Monitor::NextSample Monitor::Step() {
  absl::MutexLock tick_lock(&tick_mu_);
  if (adaptive_ != nullptr) return StepAdaptive();
  // The fixed period: the schedule Run() always had (the first sample now,
  // then every period from there, whatever a sample took).
  if (!next_regular_.has_value()) next_regular_ = clock_.Now();
  (void)TakeSample(AdaptivePeriod::Kind::kRegular);
  *next_regular_ += period_;
  return {*next_regular_, false};
}

Monitor::NextSample Monitor::StepAdaptive() {
  const absl::Duration min_period = adaptive_->config().min_period;
  if (!next_regular_.has_value()) {
    // Due times on whole seconds, as sample times are: with every offset a
    // whole number of seconds, a wake-up late by less than a second keeps
    // every sample in its own second.
    next_regular_ = absl::FromUnixSeconds(absl::ToUnixSeconds(clock_.Now()));
  }
  if (extra_at_.has_value()) {
    // The random extra sample (paper 001 section IV.B). When it shows a
    // change the period is back at its minimum, counted from this sample.
    const absl::Time at = *extra_at_;
    extra_at_.reset();
    if (TakeSample(AdaptivePeriod::Kind::kExtra).changed) {
      next_regular_ = at + adaptive_->period();
    }
    return {*next_regular_, false};
  }
  const absl::Time at = *next_regular_;
  const TickResult r = TakeSample(AdaptivePeriod::Kind::kRegular);
  if (!r.sampled && !retrying_) {
    // Nothing came of it (the first reading, a failed read, a counter
    // reset): the next regular sample is a minimum period on, not a whole
    // period, so that one lost sample at the maximum period never leaves a
    // gap of two maximum periods for the state manager to take for a
    // revocation. Once: a /proc that keeps failing is not read every second.
    retrying_ = true;
    next_regular_ = at + min_period;
    return {*next_regular_, false};
  }
  retrying_ = false;
  const absl::Duration period = adaptive_->period();
  next_regular_ = at + period;
  // Behind schedule (the process was stopped, the machine suspended): go
  // on from now rather than catching up with a burst of samples.
  if (const absl::Time now = clock_.Now(); *next_regular_ < now) {
    next_regular_ = absl::FromUnixSeconds(absl::ToUnixSeconds(now)) + min_period;
  }
  if (std::optional<absl::Duration> offset = adaptive_->DrawExtraOffset();
      offset.has_value() && at + *offset < *next_regular_) {
    extra_at_ = at + *offset;
    return {*extra_at_, true};
  }
  return {*next_regular_, false};
}

absl::Duration Monitor::period() const {
  absl::MutexLock l(&mu_);
  return current_period_;
}

void Monitor::PruneGuests() {
  std::map<int, Guest> registered;
  {
    absl::MutexLock l(&mu_);
    registered = guests_;
  }
  struct Drop {
    int pid;
    uint64_t registration;
    const char* reason;
    bool reused;
  };
  std::vector<Drop> drops;
  std::vector<std::pair<int, Guest>> learned;  // start times first known now
  for (const auto& [pid, g] : registered) {
    absl::StatusOr<ProcessInfo> p = sampler_.Process(pid);
    if (absl::IsNotFound(p.status()) || (p.ok() && p->exited())) {
      drops.push_back({pid, g.registration, "exited", false});
    } else if (!p.ok()) {
      // Unreadable (not gone): kept; its CPU time is read (or not) as before.
      continue;
    } else if (g.start_ticks.has_value() && p->start_ticks.has_value() &&
               *g.start_ticks != *p->start_ticks) {
      drops.push_back({pid, g.registration, "pid_reused", true});
    } else if (!g.start_ticks.has_value() && p->start_ticks.has_value()) {
      learned.emplace_back(pid, Guest{p->start_ticks, g.registration});
    }
  }
  if (drops.empty() && learned.empty()) return;
  std::vector<Drop> dropped;
  {
    absl::MutexLock l(&mu_);
    // Only the registrations seen above: one made meanwhile stays.
    for (const Drop& d : drops) {
      auto it = guests_.find(d.pid);
      if (it == guests_.end() || it->second.registration != d.registration) continue;
      guests_.erase(it);
      dropped.push_back(d);
    }
    for (const auto& [pid, g] : learned) {
      auto it = guests_.find(pid);
      if (it != guests_.end() && it->second.registration == g.registration) {
        it->second.start_ticks = g.start_ticks;
      }
    }
  }
  for (const Drop& d : dropped) {
    metrics_.Increment(kGuestsPruned, kGuestsPrunedHelp, {{"reason", d.reason}});
    SOJOURN_LOG(INFO, "guest %d unregistered (%s): %s", d.pid, d.reason,
                d.reused ? "its pid now names another process" : "the process exited");
    // The gateway must not signal (or renice) the pid any more: it is gone,
    // or another process's.
    if (gateway_ != nullptr) gateway_->Forget(d.pid);
  }
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
  while (!stopping_) {
    mu_.Unlock();
    const NextSample next = Step();
    mu_.Lock();
    clock_.SleepUntil(next.at, &mu_, &stopping_);
  }
}

absl::Status Monitor::RegisterGuest(int pid) {
  if (pid <= 0) return absl::InvalidArgumentError(absl::StrCat("pid must be > 0, got ", pid));
  // Guest load is subtracted from the host's: registering init or the monitor
  // itself would hide the owner's load (or the monitor's own cost) by mistake.
  if (pid == 1 || pid == getpid()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "pid ", pid, pid == 1 ? " is init" : " is this monitor", ", not a guest job"));
  }
  // Nor one of the monitor's threads (a thread id is a pid to kill(2)): the
  // gateway would stop (SIGSTOP), renice or end the monitor itself. The real
  // /proc, whatever --proc_root samples.
  if (std::error_code ec; std::filesystem::exists(absl::StrCat("/proc/self/task/", pid), ec)) {
    return absl::InvalidArgumentError(
        absl::StrCat("pid ", pid, " is a thread of this monitor, not a guest job"));
  }
  // Looked up where the samples read it (--proc_root), so that a guest
  // registered here is one the next sample keeps (PruneGuests).
  Guest g;
  absl::StatusOr<ProcessInfo> p = sampler_.Process(pid);
  if (p.ok()) {
    if (p->exited()) {
      return absl::NotFoundError(absl::StrCat("pid ", pid, " has exited (a zombie process)"));
    }
    g.start_ticks = p->start_ticks;
  } else if (absl::IsNotFound(p.status())) {
    return absl::NotFoundError(absl::StrCat("no process with pid ", pid));
  } else if (kill(pid, 0) != 0 && errno == ESRCH) {
    // Its /proc entry unreadable: the kernel says whether it exists.
    return absl::NotFoundError(absl::StrCat("no process with pid ", pid));
  }
  absl::MutexLock l(&mu_);
  g.registration = ++registrations_;
  guests_[pid] = g;
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
  std::set<int> out;
  for (const auto& [pid, g] : guests_) out.insert(pid);
  return out;
}

std::optional<HostSample> Monitor::last_sample() const {
  absl::MutexLock l(&mu_);
  return last_;
}

}  // namespace sojourn::monitor
