#include "services/statemgr/host_book.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/text.h"
#include "models/availability/predict.h"
#include "models/scheduling/load_forecast.h"

namespace sojourn::statemgr {

using availability::HostState;
using availability::StateSeries;

namespace {

const char* StateName(HostState s) {
  switch (s) {
    case HostState::kS1: return "S1";
    case HostState::kS2: return "S2";
    case HostState::kS3: return "S3";
    case HostState::kS4: return "S4";
    case HostState::kS5: return "S5";
  }
  return "S?";
}

// Why `sample` puts the host in `state` (paper 000 section 4's rules).
std::string Describe(HostState state, const HostSample& sample,
                     const availability::ClassifierConfig& c, bool in_spike) {
  const std::string load = absl::StrFormat("load %.2f", sample.cpu_load);
  switch (state) {
    case HostState::kS1:
    case HostState::kS2: {
      std::string out = state == HostState::kS1
                            ? absl::StrFormat("%s below Th1 %.2f", load, c.th1)
                            : absl::StrFormat("%s between Th1 %.2f and Th2 %.2f", load, c.th1,
                                              c.th2);
      if (in_spike) {
        out = absl::StrFormat("%s above Th2 %.2f for no longer than the grace period (%d s): "
                              "a transient spike keeps %s",
                              load, c.th2, c.grace_seconds, StateName(state));
      }
      return out;
    }
    case HostState::kS3:
      return absl::StrFormat("%s above Th2 %.2f for longer than the grace period (%d s)", load,
                             c.th2, c.grace_seconds);
    case HostState::kS4:
      return absl::StrFormat("free memory %.0f MiB below the guest working set %.0f MiB",
                             sample.free_mem_mb, c.guest_working_set_mb);
    case HostState::kS5:
      break;
  }
  return "revoked";
}

}  // namespace

HostBook::HostBook(const HostBookConfig& config, SampleStore& store, Clock& clock)
    : config_(config), store_(store), clock_(clock) {}

absl::Status HostBook::Load(int64_t* skipped) {
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  const int64_t latest = LatestAcceptedUnix(now, config_.max_clock_skew_seconds);
  int64_t bad = 0;
  // The host being loaded (its samples come in chunks) and what was left out
  // of its samples so far.
  std::string current;
  int64_t left_out = 0;
  std::string first_reason;
  auto report = [&]() {
    if (left_out > 0) {
      bad += left_out;
      SOJOURN_LOG(WARNING, "host %s: %d stored samples left out (%s); they stay stored, unread",
                  Excerpt(current), left_out, first_reason);
    }
    left_out = 0;
  };
  absl::MutexLock l(&mu_);
  RETURN_IF_ERROR(store_.ForEachHost(
      [&](const std::string& host, const HostMeta& meta, std::vector<HostSample> samples)
          ABSL_NO_THREAD_SAFETY_ANALYSIS {
            Host& h = hosts_[host];
            if (host != current) {
              report();
              current = host;
              h.meta = meta;
              if (meta.period_seconds < 0 || meta.period_seconds > kMaxPeriodSeconds) {
                ++bad;
                SOJOURN_LOG(WARNING, "host %s: stored period %d s is outside [1, %d]; using %d s",
                            Excerpt(host), meta.period_seconds, kMaxPeriodSeconds,
                            config_.default_period_seconds);
                h.meta.period_seconds = 0;
              }
              if (meta.history_period_seconds < 0 ||
                  meta.history_period_seconds > kMaxPeriodSeconds) {
                ++bad;
                SOJOURN_LOG(WARNING, "host %s: stored history period %d s is outside [0, %d]; "
                            "ignored", Excerpt(host), meta.history_period_seconds,
                            kMaxPeriodSeconds);
                h.meta.history_period_seconds = 0;
              }
              const auto& a = meta.attributes;
              if (absl::Status s = ValidateHostAttributes(Excerpt(host), a.cpu_mhz(),
                                                          a.cpu_cores(), a.total_mem_mb());
                  !s.ok()) {
                ++bad;
                SOJOURN_LOG(WARNING, "stored attributes left out: %s", s.message());
                h.meta.attributes.Clear();
              }
            }
            for (const HostSample& s : samples) {
              const char* problem = SampleProblem(s);
              if (problem == nullptr && s.unix_seconds > latest) {
                problem = "stamped after the clock plus --max_clock_skew_seconds";
              }
              if (problem != nullptr) {
                if (left_out++ == 0) {
                  first_reason = absl::StrCat("first at ", s.unix_seconds, ": ", problem);
                }
                continue;
              }
              Feed(host, h, s, nullptr);
              Remember(h, s);
              Forget(h);
            }
          },
      &bad, static_cast<size_t>(std::max<int64_t>(1, config_.load_chunk_samples))));
  report();
  for (auto& [name, h] : hosts_) h.recent.shrink_to_fit();
  // A host silent since before the start is gone now: watchers are told S5
  // in their snapshot, and its next samples announce its return.
  SilenceLocked(now, nullptr);
  if (skipped != nullptr) *skipped = bad;
  return absl::OkStatus();
}

int64_t HostBook::PeriodOf(const Host& h) const {
  return h.meta.period_seconds > 0 ? h.meta.period_seconds : config_.default_period_seconds;
}

availability::ClassifierConfig HostBook::ClassifierFor(const Host& h) const {
  availability::ClassifierConfig c = config_.classifier;
  c.revocation_gap_seconds =
      std::max<int64_t>(c.revocation_gap_seconds, (PeriodOf(h) * 3 + 1) / 2);
  return c;
}

int64_t HostBook::GapAfter(const Host& h, int64_t unix_seconds) const {
  // A sample stored before the period last changed was sent at the older
  // period(s): the silence after it is judged by them (up to the first
  // sample sent at the new period), or a host replayed at 300 s and then fed
  // every 6 s would have every old gap turned into a revocation. After a
  // sample sent at the current period: its gap.
  if (h.meta.history_period_seconds > 0 && unix_seconds <= h.meta.period_changed_unix) {
    return std::max<int64_t>(config_.classifier.revocation_gap_seconds,
                             (h.meta.history_period_seconds * 3 + 1) / 2);
  }
  return ClassifierFor(h).revocation_gap_seconds;
}

int64_t HostBook::LastGap(const Host& h) const {
  return h.recent.empty() ? ClassifierFor(h).revocation_gap_seconds
                          : GapAfter(h, h.recent.back().unix_seconds);
}

void HostBook::SetGapBefore(Host& h, int64_t* gap) const {
  const std::optional<int64_t> prev = h.grid->classifier().last_sample_unix();
  *gap = prev.has_value() ? GapAfter(h, *prev) : ClassifierFor(h).revocation_gap_seconds;
  h.grid->SetRevocationGap(*gap);
}

namespace {

// baselines::DeployedEstimatesAt at grid point t of `series`.
baselines::DeployedEstimates DeployedAt(const StateSeries& series, size_t t, int64_t window_steps,
                                        double down_after_seconds) {
  std::vector<bool> up(t + 1);
  for (size_t i = 0; i < up.size(); ++i) up[i] = !availability::IsFailure(series.states[i]);
  return baselines::DeployedEstimatesAt(up, t, window_steps,
                                        static_cast<double>(series.step_seconds),
                                        down_after_seconds);
}

// At most this many counts of each kind (time zones; window lengths and age
// classes) are kept per host: the predictor asks for the windows its callers
// ask for, and one not kept is counted over the whole grid again.
constexpr size_t kCountersKept = 8;

}  // namespace

class HostBook::GridCounts {
 public:
  availability::FailureExposure Failure(const StateSeries& series, int64_t end_unix,
                                        const availability::LocalClock& clock) {
    absl::MutexLock l(&mu_);
    return Find(
               failure_,
               [&](const availability::FailureExposureCounter& c) { return c.clock() == clock; },
               clock)
        .Count(series, end_unix);
  }

  availability::BandExposure Band(const StateSeries& series, int64_t end_unix,
                                  const availability::LocalClock& clock, int64_t cap_steps,
                                  int64_t recent_seconds, int64_t long_seconds) {
    absl::MutexLock l(&mu_);
    return Find(
               band_,
               [&](const availability::BandExposureCounter& c) {
                 return c.Counts(clock, cap_steps, recent_seconds, long_seconds);
               },
               clock, cap_steps, recent_seconds, long_seconds)
        .Count(series, end_unix);
  }

  // DeployedAt(series, its last point, ...) from the points before it kept.
  baselines::DeployedEstimates Deployed(const StateSeries& series, int64_t window_steps,
                                        double down_after_seconds) {
    absl::MutexLock l(&mu_);
    const size_t last = series.states.size() - 1;
    if (!deployed_.has_value() || series.start_unix != deployed_start_ ||
        series.step_seconds != deployed_step_) {
      // Another series (a grid trimmed at its start): start over.
      deployed_.emplace(static_cast<double>(series.step_seconds));
      deployed_start_ = series.start_unix;
      deployed_step_ = series.step_seconds;
    }
    if (deployed_->size() > last) {  // a snapshot older than the last one kept
      return DeployedAt(series, last, window_steps, down_after_seconds);
    }
    // Every grid point but the last is final (GridBuilder).
    for (size_t i = deployed_->size(); i < last; ++i) {
      deployed_->Add(!availability::IsFailure(series.states[i]));
    }
    return deployed_->At(!availability::IsFailure(series.states[last]), window_steps,
                         down_after_seconds);
  }

 private:
  // The counter `matches` picks, made from `args` if none does (the least
  // recently used one dropped beyond kCountersKept), kept last.
  template <typename Counter, typename Match, typename... Args>
  static Counter& Find(std::vector<Counter>& counters, Match matches, Args... args) {
    auto it = std::find_if(counters.begin(), counters.end(), matches);
    if (it == counters.end()) {
      if (counters.size() >= kCountersKept) counters.erase(counters.begin());
      counters.emplace_back(args...);
    } else {
      std::rotate(it, it + 1, counters.end());
    }
    return counters.back();
  }

  absl::Mutex mu_;
  std::vector<availability::FailureExposureCounter> failure_ ABSL_GUARDED_BY(mu_);
  std::vector<availability::BandExposureCounter> band_ ABSL_GUARDED_BY(mu_);
  // The series the deployed estimates were kept for (its first point and step).
  std::optional<baselines::DeployedEstimatesKeeper> deployed_ ABSL_GUARDED_BY(mu_);
  int64_t deployed_start_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t deployed_step_ ABSL_GUARDED_BY(mu_) = 0;
};

void HostBook::NewGrid(Host& h) const {
  h.grid.emplace(ClassifierFor(h), PeriodOf(h), 0, config_.max_grid_points);
  h.counts = std::make_shared<GridCounts>();
}

std::shared_ptr<const StateSeries> HostBook::SeriesOf(const Host& h) const {
  if (h.grid.has_value()) return h.grid->Snapshot();
  auto empty = std::make_shared<StateSeries>();
  empty->step_seconds = PeriodOf(h);
  return empty;
}

void HostBook::Remember(Host& h, const HostSample& s) const {
  if (h.samples++ == 0) h.first_unix = s.unix_seconds;
  h.recent.push_back(s);
}

void HostBook::Forget(Host& h) const {
  if (h.recent.empty()) return;
  const int64_t newest = h.recent.back().unix_seconds;
  const int64_t keep = std::max<int64_t>(0, config_.memory_seconds);
  if (h.recent.front().unix_seconds >= newest - keep - keep / 4) return;
  auto first = std::lower_bound(h.recent.begin(), h.recent.end() - 1, newest - keep,
                                [](const HostSample& s, int64_t t) { return s.unix_seconds < t; });
  h.recent.erase(h.recent.begin(), first);
  // erase keeps the capacity: a backfill's batch of weeks stayed allocated
  // whole (176 KB a host after 14 days at 300 s, where a day is 11 KB: 1.8
  // GB at 10,000 hosts in the session 43 scale audit). At most one copy a
  // trim, every memory_seconds / 4 of samples.
  if (h.recent.capacity() > 2 * h.recent.size() + 64) h.recent.shrink_to_fit();
}

absl::StatusOr<std::vector<HostSample>> HostBook::Gather(const std::string& host,
                                                        int64_t from_unix, int64_t to_unix,
                                                        size_t max,
                                                        std::vector<HostSample> recent,
                                                        int64_t memory_from_unix, bool older,
                                                        bool* truncated) const {
  std::vector<HostSample> out;
  *truncated = false;
  if (older && from_unix < memory_from_unix) {
    // Read as Load() reads: a stored sample PushSamples would refuse is left out.
    RETURN_IF_ERROR(store_.ForEachSample(
        host, from_unix, std::min(to_unix, memory_from_unix), [&](const HostSample& s) {
          if (SampleProblem(s) != nullptr) return true;
          if (out.size() >= max) {
            *truncated = true;
            return false;
          }
          out.push_back(s);
          return true;
        }));
  }
  for (const HostSample& s : recent) {
    if (out.size() >= max) {
      *truncated = true;
      break;
    }
    out.push_back(s);
  }
  return out;
}

HostInfo HostBook::InfoOf(const std::string& name, const Host& h) const {
  HostInfo info;
  info.host = name;
  info.meta = h.meta;
  info.samples = h.samples;
  if (h.recent.empty()) return info;
  info.first_unix = h.first_unix;
  info.last_unix = h.recent.back().unix_seconds;
  info.last_cpu_load = h.recent.back().cpu_load;
  info.revocation_gap_seconds = LastGap(h);
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  auto series = SeriesOf(h);
  info.step_seconds = series->step_seconds;
  if (now - info.last_unix > info.revocation_gap_seconds) {
    // Nothing heard for longer than the revocation gap: the host is gone now.
    info.state = HostState::kS5;
    info.state_since_unix = info.last_unix;
    return info;
  }
  if (series->states.empty()) {
    // No grid point yet: the state after every sample.
    info.state = h.grid->classifier().current();
    info.state_since_unix = info.first_unix;
  } else {
    info.state = series->states.back();
    // Kept by the grid as it grows: a walk back over a long run cost up to
    // max_grid_points for each host at each registration.
    info.state_since_unix = h.grid->run_start_unix();
  }
  // The band a window from now starts in (WindowStats, load_band_first_sojourn).
  info.load_band = availability::LoadBandOf(info.state, info.last_cpu_load, ClassifierFor(h));
  return info;
}

absl::StatusOr<AppendResult> HostBook::Append(const std::string& host,
                                              const std::vector<HostSample>& samples,
                                              const MetaUpdate& update) {
  absl::MutexLock append_lock(&append_mu_);
  int64_t last = INT64_MIN;
  int64_t gap = 0;
  HostMeta new_meta;
  int64_t old_period = 0;  // the period of the samples stored (0 = none stored)
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = hosts_.find(host);
    if (it != hosts_.end()) {
      if (!it->second.recent.empty()) last = it->second.recent.back().unix_seconds;
      new_meta = it->second.meta;
      gap = LastGap(it->second);
      if (it->second.samples > 0) old_period = PeriodOf(it->second);
    }
  }
  // Only what the message sets: a later message of a stream (or a sender)
  // without attributes must not overwrite the stored ones with empty ones.
  if (update.attributes.has_value()) new_meta.attributes = *update.attributes;
  if (update.period_seconds > 0) {
    if (old_period > 0 && update.period_seconds != old_period) {
      // The samples stored so far were sent at the old period: their gaps
      // stay judged by it (GapAfter), up to the newest of them.
      new_meta.history_period_seconds = std::max(new_meta.history_period_seconds, old_period);
      new_meta.period_changed_unix = last;
    }
    new_meta.period_seconds = update.period_seconds;
  }
  AppendResult result;
  std::vector<StateChange> changes;
  std::vector<HostSample> fresh;
  for (const HostSample& s : samples) {
    if (s.unix_seconds <= last) {
      ++result.duplicates;
      continue;
    }
    fresh.push_back(s);
    last = s.unix_seconds;
  }
  result.last_persisted_unix = last == INT64_MIN ? 0 : last;
  if (fresh.empty() && update.empty()) return result;
  if (absl::Status s = store_.Append(host, fresh, update.empty() ? nullptr : &new_meta);
      !s.ok()) {
    // Logged when the store starts failing and when it works again, not per
    // batch: the clients see every failure, the operator had seen none (a
    // full disk: RocksDB stops writing until 64 MiB are free again, session
    // 43 durability audit).
    if (!store_failing_) {
      SOJOURN_LOG(ERROR, "storing samples failed (host %s): %s; the clients are told and resend; "
                  "logged again when a write succeeds", host, s.ToString());
    }
    store_failing_ = true;
    return s;
  }
  if (store_failing_) {
    SOJOURN_LOG(INFO, "storing samples works again (host %s)", host);
    store_failing_ = false;
  }
  {
    absl::MutexLock l(&mu_);
    Host& h = hosts_[host];
    if (gap == 0) gap = LastGap(h);
    if (!fresh.empty() && !h.recent.empty() &&
        fresh.front().unix_seconds - h.recent.back().unix_seconds > gap) {
      const int64_t from = h.recent.back().unix_seconds;
      const int64_t length = fresh.front().unix_seconds - from;
      absl::Status s = store_.RecordRevocation(host, from, length);
      SOJOURN_LOG(INFO, "host %s: revocation (S5) of %d s recorded after a gap in samples", host,
                  length);
      if (!s.ok()) SOJOURN_LOG(WARNING, "recording revocation: %s", s.ToString());
    }
    const bool period_changed = PeriodOf(h) != (new_meta.period_seconds > 0
                                                    ? new_meta.period_seconds
                                                    : config_.default_period_seconds);
    h.meta = new_meta;
    if (period_changed) Refeed(host, h, &changes);
    for (const HostSample& s : fresh) {
      Feed(host, h, s, &changes);
      Remember(h, s);
    }
    Forget(h);
  }
  // Still under append_mu_: watchers see each host's changes in time order.
  Deliver(changes);
  result.persisted = static_cast<int64_t>(fresh.size());
  return result;
}

void HostBook::Feed(const std::string& name, Host& h, const HostSample& s,
                    std::vector<StateChange>* out) const {
  const availability::ClassifierConfig c = ClassifierFor(h);
  // Grid points on multiples of the period since the epoch: aligned to local
  // midnight for any whole-period UTC offset.
  if (!h.grid.has_value()) NewGrid(h);
  const std::optional<int64_t> prev = h.grid->classifier().last_sample_unix();
  int64_t gap = 0;
  SetGapBefore(h, &gap);
  auto announce = [&](HostState to, int64_t since, std::string reason) {
    if (out != nullptr) {
      StateChange change;
      change.host = name;
      change.from = h.announced;
      change.to = to;
      change.since_unix = since;
      change.reason = std::move(reason);
      out->push_back(std::move(change));
    }
    h.announced = to;
    h.announced_since = since;
  };
  std::string prefix;
  if (!prev.has_value()) {
    prefix = "first sample: ";
  } else if (s.unix_seconds - *prev > gap) {
    // The gap is a revocation (section 4, S5) whether or not the silence was
    // announced while it lasted.
    if (h.announced != HostState::kS5) {
      announce(HostState::kS5, *prev,
               absl::StrCat("no sample for ", s.unix_seconds - *prev, " s (revocation gap ",
                            gap, " s)"));
    }
    prefix = absl::StrCat("samples resumed after ", s.unix_seconds - *prev, " s; ");
  } else if (h.announced == HostState::kS5) {
    // Announced gone by silence, yet its samples have no gap: the state
    // manager (or the way to it) was away, not the host.
    prefix = "samples resumed with no gap in them (the state manager or the network was away, "
             "not the host); ";
  }
  const HostState state = h.grid->Add(s);
  h.grid->SetRevocationGap(GapAfter(h, s.unix_seconds));  // the silence after it
  if (!h.announced.has_value() || state != *h.announced) {
    announce(state, s.unix_seconds,
             prefix + Describe(state, s, c, h.grid->classifier().in_spike()));
  }
}

int64_t LatestAcceptedUnix(int64_t now_unix, int64_t max_clock_skew_seconds) {
  return now_unix > INT64_MAX - max_clock_skew_seconds ? INT64_MAX
                                                       : now_unix + max_clock_skew_seconds;
}

int64_t RetentionCutoff(int64_t now_unix, int64_t days, int64_t utc_offset_seconds) {
  const int64_t local = now_unix + utc_offset_seconds - days * 86400;
  const int64_t day = local >= 0 ? local / 86400 : -((-local + 86399) / 86400);
  return day * 86400 - utc_offset_seconds;
}

RetainResult HostBook::Retain(int64_t before_unix, const std::function<bool()>& stop) {
  absl::MutexLock retain_lock(&retain_mu_);
  std::vector<std::string> due;
  {
    absl::ReaderMutexLock l(&mu_);
    for (const auto& [name, h] : hosts_) {
      if (h.samples > 0 && h.first_unix < before_unix) due.push_back(name);
    }
  }
  RetainResult result;
  std::vector<std::string> compact;
  for (const std::string& name : due) {
    if (stop && stop()) break;  // a shutdown: the next start's pass goes on
    int64_t deleted = 0;
    if (!RetainHost(name, before_unix, &deleted)) {
      ++result.failed_hosts;
    } else {
      ++result.hosts;
    }
    result.deleted_samples += deleted;
    if (deleted > 0) compact.push_back(name);
  }
  // The space back on disk, after every host's deletion: the first
  // compaction flushes the memtable holding all the pass's range tombstones,
  // the others find it empty. Without it the space would come back only
  // when compactions reach the last level, which a slowly growing database
  // may take months to do.
  for (const std::string& name : compact) {
    if (stop && stop()) break;
    if (absl::Status s = store_.CompactBefore(name, before_unix); !s.ok()) {
      SOJOURN_LOG(WARNING,
                  "host %s: retention: compacting the deleted samples: %s (they are deleted; "
                  "their space comes back with RocksDB's own compactions)",
                  Excerpt(name), s.ToString());
    }
  }
  return result;
}

bool HostBook::RetainHost(const std::string& name, int64_t before_unix, int64_t* deleted) {
  HostMeta meta;
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = hosts_.find(name);
    if (it == hosts_.end() || it->second.samples == 0 || it->second.first_unix >= before_unix) {
      return true;
    }
    meta = it->second.meta;
  }
  // The book as a Load() of the store would build it after the deletion: the
  // samples left, fed as Load feeds them. What is stored before the samples
  // in memory never changes, so the stored samples from the cut on are read
  // without a lock. Then, under the append lock (so that no sample arrives
  // meanwhile, stamped before the cut or not), the deletion is written, what
  // left memory since is read, the samples in memory from the cut on are
  // fed, and the result replaces the host's grid and memory. A change of
  // period meanwhile (a Refeed) starts the rebuild over.
  constexpr int kRetainAttempts = 3;
  for (int attempt = 0;; ++attempt) {
    Host fresh;
    fresh.meta = meta;
    auto add = [&](const HostSample& s) {
      if (SampleProblem(s) != nullptr) return true;
      Feed(name, fresh, s, nullptr);
      Remember(fresh, s);
      Forget(fresh);
      return true;
    };
    // Stored samples as Load() reads them: those stamped after the clock
    // (read now: the samples that left memory during the pass came after
    // its start) plus the skew left out. Those in memory were accepted by
    // PushSamples on its own clock.
    auto read = [&](int64_t from, int64_t to) {
      const int64_t latest = LatestAcceptedUnix(absl::ToUnixSeconds(clock_.Now()),
                                                config_.max_clock_skew_seconds);
      absl::Status s = store_.ForEachSample(
          name, from, to, [&](const HostSample& x) { return x.unix_seconds > latest || add(x); });
      if (!s.ok()) {
        SOJOURN_LOG(WARNING, "host %s: retention: reading the samples left: %s", Excerpt(name),
                    s.ToString());
      }
      return s.ok();
    };
    auto period_changed = [&](const Host& h) {
      if (PeriodOf(h) == PeriodOf(fresh)) return false;
      meta = h.meta;
      return true;
    };
    auto give_up = [&]() {
      SOJOURN_LOG(WARNING,
                  "host %s: retention: its period kept changing; the next pass tries again",
                  Excerpt(name));
      return false;
    };
    // Fed: the stored samples in [before_unix, fed_to).
    int64_t fed_to = before_unix;
    {
      absl::ReaderMutexLock l(&mu_);
      const Host& h = hosts_.at(name);
      if (period_changed(h)) {
        if (attempt >= kRetainAttempts) return give_up();
        continue;
      }
      if (HasOlder(h)) fed_to = std::max(before_unix, h.recent.front().unix_seconds);
    }
    if (!read(before_unix, fed_to)) return false;
    absl::MutexLock append_lock(&append_mu_);
    {
      absl::ReaderMutexLock l(&mu_);
      if (period_changed(hosts_.at(name))) {
        if (attempt >= kRetainAttempts) return give_up();
        continue;
      }
    }
    absl::StatusOr<int64_t> n = store_.DeleteBefore(name, before_unix);
    if (!n.ok()) {
      SOJOURN_LOG(WARNING, "host %s: retention: %s (nothing deleted; the next pass tries again)",
                  Excerpt(name), n.status().ToString());
      return false;
    }
    *deleted += *n;
    {
      absl::ReaderMutexLock l(&mu_);
      const Host& h = hosts_.at(name);
      if (HasOlder(h) && h.recent.front().unix_seconds > fed_to) {
        // Left memory since (Forget): a few hours at most.
        if (!read(fed_to, h.recent.front().unix_seconds)) return false;
        fed_to = h.recent.front().unix_seconds;
      }
      for (const HostSample& s : h.recent) {
        if (s.unix_seconds >= fed_to) add(s);
      }
    }
    if (fresh.samples == 0) {
      // Nothing left: the host stays known, as one registered before its
      // first sample, after a restart too (its meta stored).
      if (absl::Status s = store_.Append(name, {}, &fresh.meta); !s.ok()) {
        SOJOURN_LOG(WARNING, "host %s: retention: storing its meta: %s", Excerpt(name),
                    s.ToString());
      }
    }
    fresh.recent.shrink_to_fit();
    absl::MutexLock l(&mu_);
    Host& h = hosts_[name];
    h.samples = fresh.samples;
    h.first_unix = fresh.first_unix;
    h.recent = std::move(fresh.recent);
    h.grid = std::move(fresh.grid);
    h.counts = std::move(fresh.counts);
    // The state announced to watchers and since when, as Load() gives it;
    // a host announced gone (silent) stays so until its next sample.
    if (fresh.samples == 0) {
      h.announced.reset();
      h.announced_since = 0;
    } else if (h.announced != HostState::kS5) {
      h.announced = fresh.announced;
      h.announced_since = fresh.announced_since;
    }
    return true;
  }
}

void HostBook::Refeed(const std::string& name, Host& h, std::vector<StateChange>* out) const {
  h.grid.reset();
  h.counts.reset();
  if (h.recent.empty()) return;
  const availability::ClassifierConfig c = ClassifierFor(h);
  NewGrid(h);
  // The state the history gives now, and since when (as Feed would have
  // announced it: a return after a revocation starts anew).
  HostState state = HostState::kS5;
  int64_t since = 0;
  std::optional<int64_t> prev;
  auto add = [&](const HostSample& s) {
    int64_t gap = 0;
    SetGapBefore(h, &gap);
    const HostState now = h.grid->Add(s);
    h.grid->SetRevocationGap(GapAfter(h, s.unix_seconds));
    if (!prev.has_value() || s.unix_seconds - *prev > gap || now != state) {
      state = now;
      since = s.unix_seconds;
    }
    prev = s.unix_seconds;
    return true;
  };
  if (HasOlder(h)) {
    // The history before the samples in memory, read as Load() reads it. A
    // change of period is rare (the monitor's --period_seconds), so the
    // store is read under the lock.
    absl::Status s = store_.ForEachSample(name, INT64_MIN, h.recent.front().unix_seconds,
                                          [&](const HostSample& sample) {
                                            return SampleProblem(sample) != nullptr || add(sample);
                                          });
    if (!s.ok()) {
      SOJOURN_LOG(WARNING, "host %s: reclassifying from the samples in memory only: %s",
                  Excerpt(name), s.ToString());
      NewGrid(h);
      prev.reset();
      state = HostState::kS5;
    }
  }
  for (const HostSample& sample : h.recent) add(sample);
  // Announced gone (S5) stays so until its next sample, as after a silence.
  if (!h.announced.has_value() || *h.announced == HostState::kS5) return;
  if (state != *h.announced && out != nullptr) {
    StateChange change;
    change.host = name;
    change.from = h.announced;
    change.to = state;
    change.since_unix = since;
    change.reason = absl::StrCat("reclassified with the new period of ", PeriodOf(h),
                                 " s (revocation gap ", c.revocation_gap_seconds, " s)");
    out->push_back(std::move(change));
  }
  h.announced = state;
  h.announced_since = since;
}

void HostBook::SilenceLocked(int64_t now, std::vector<StateChange>* out) {
  for (auto& [name, h] : hosts_) {
    if (!h.grid.has_value() || h.announced == HostState::kS5) continue;
    const std::optional<int64_t> last = h.grid->classifier().last_sample_unix();
    if (!last.has_value()) continue;
    const int64_t gap = GapAfter(h, *last);
    if (now - *last <= gap) continue;
    if (out != nullptr) {
      StateChange change;
      change.host = name;
      change.from = h.announced;
      change.to = HostState::kS5;
      change.since_unix = *last;
      change.reason = absl::StrCat("no sample for ", now - *last, " s (revocation gap ", gap,
                                   " s)");
      out->push_back(std::move(change));
    }
    h.announced = HostState::kS5;
    h.announced_since = *last;
  }
}

void HostBook::Deliver(const std::vector<StateChange>& changes) {
  if (changes.empty()) return;
  absl::MutexLock l(&watch_mu_);
  for (const StateChange& c : changes) {
    for (const Watch& w : watches_) {
      if (w.host.empty() || w.host == c.host) w.watcher->OnStateChange(c);
    }
  }
}

int HostBook::CheckSilence() {
  absl::MutexLock append_lock(&append_mu_);
  std::vector<StateChange> changes;
  {
    absl::MutexLock l(&mu_);
    SilenceLocked(absl::ToUnixSeconds(clock_.Now()), &changes);
  }
  Deliver(changes);
  return static_cast<int>(changes.size());
}

void HostBook::AddWatcher(StateWatcher* watcher, const std::string& host, bool snapshot) {
  absl::MutexLock append_lock(&append_mu_);
  std::vector<StateChange> changes, current;
  {
    absl::MutexLock l(&mu_);
    SilenceLocked(absl::ToUnixSeconds(clock_.Now()), &changes);
    if (snapshot) {
      for (const auto& [name, h] : hosts_) {
        if (!h.announced.has_value() || (!host.empty() && name != host)) continue;
        StateChange c;
        c.host = name;
        c.to = *h.announced;
        c.since_unix = h.announced_since;
        c.snapshot = true;
        c.reason = "current state";
        current.push_back(std::move(c));
      }
    }
  }
  Deliver(changes);
  absl::MutexLock l(&watch_mu_);
  for (const StateChange& c : current) watcher->OnStateChange(c);
  watches_.push_back({watcher, host});
}

void HostBook::RemoveWatcher(StateWatcher* watcher) {
  absl::MutexLock l(&watch_mu_);
  watches_.erase(std::remove_if(watches_.begin(), watches_.end(),
                                [&](const Watch& w) { return w.watcher == watcher; }),
                 watches_.end());
}

size_t HostBook::watchers() const {
  absl::MutexLock l(&watch_mu_);
  return watches_.size();
}

void HostBook::CloseWatchers() {
  absl::MutexLock l(&watch_mu_);
  for (const Watch& w : watches_) w.watcher->OnClose();
}

size_t HostBook::size() const {
  absl::ReaderMutexLock l(&mu_);
  return hosts_.size();
}

HostBook::MemoryUse HostBook::memory_use() const {
  absl::ReaderMutexLock l(&mu_);
  MemoryUse out;
  for (const auto& [name, h] : hosts_) {
    out.samples += static_cast<int64_t>(h.recent.size());
    out.bytes += static_cast<int64_t>(h.recent.capacity() * sizeof(HostSample));
  }
  return out;
}

std::vector<HostInfo> HostBook::List() const {
  absl::ReaderMutexLock l(&mu_);
  std::vector<HostInfo> out;
  for (const auto& [name, h] : hosts_) out.push_back(InfoOf(name, h));
  return out;
}

absl::StatusOr<HostInfo> HostBook::Info(const std::string& host) const {
  absl::ReaderMutexLock l(&mu_);
  auto it = hosts_.find(host);
  if (it == hosts_.end()) return absl::NotFoundError(absl::StrCat("unknown host '", Excerpt(host), "'"));
  return InfoOf(host, it->second);
}

absl::StatusOr<WindowStatsResult> HostBook::WindowStats(
    const std::string& host, const availability::WindowSpec& spec, int64_t end_unix,
    const availability::EstimatorOptions& opt, bool deployed_estimates) const {
  WindowStatsResult out;
  std::shared_ptr<const StateSeries> series;
  std::shared_ptr<GridCounts> counts;
  // The samples of the last 4 hours before the window start, for the
  // predicted load L_t0(t) (paper 000 section 8.4): those in memory, and
  // whether older ones must be read from the store (a window in the past).
  constexpr int64_t kLoadHistorySeconds = 4 * 3600;
  std::vector<HostSample> recent;
  int64_t t0 = 0, memory_from = 0;
  bool older = false;
  {
    // The grid is shared, not copied (GridBuilder::Snapshot); counting
    // windows happens outside the lock.
    absl::ReaderMutexLock l(&mu_);
    auto it = hosts_.find(host);
    if (it == hosts_.end()) return absl::NotFoundError(absl::StrCat("unknown host '", Excerpt(host), "'"));
    series = SeriesOf(it->second);
    if (static_cast<int64_t>(series->states.size()) >= config_.keep_counts_from_points) {
      counts = it->second.counts;
    }
    out.info = InfoOf(host, it->second);
    const Host& h = it->second;
    if (opt.load_band_first_sojourn && !h.recent.empty()) out.load_band = out.info.load_band;
    t0 = end_unix > 0 ? end_unix : out.info.last_unix;
    auto lo = std::lower_bound(h.recent.begin(), h.recent.end(), t0 - kLoadHistorySeconds,
                               [](const HostSample& s, int64_t t) { return s.unix_seconds < t; });
    auto hi = std::upper_bound(lo, h.recent.end(), t0,
                               [](int64_t t, const HostSample& s) { return t < s.unix_seconds; });
    recent.assign(lo, hi);
    if (!h.recent.empty()) memory_from = h.recent.front().unix_seconds;
    older = HasOlder(h);
  }
  if (older && t0 - kLoadHistorySeconds < memory_from) {
    bool truncated = false;
    const int64_t to = std::min(t0, INT64_MAX - 1) + 1;  // t0 included
    ASSIGN_OR_RETURN(recent, Gather(host, t0 - kLoadHistorySeconds, to,
                                    std::numeric_limits<size_t>::max(), std::move(recent),
                                    memory_from, older, &truncated));
  }
  if (!recent.empty()) {
    out.load_forecast =
        scheduling::LoadForecast::FromSamples(recent, recent.back().unix_seconds).points();
  }
  out.stats.step_seconds = series->step_seconds;
  // The oldest time with a state: the first sample, or the grid's first
  // point when the grid starts later (at the first point on the step grid, or
  // trimmed to --max_grid_points).
  const int64_t oldest = series->states.empty()
                             ? out.info.first_unix
                             : std::max(out.info.first_unix, series->start_unix);
  if (end_unix > 0 && oldest > 0 && end_unix < oldest) {
    // Nothing is kept of the host then: no state to start the window in, no
    // history to learn from (answering with today's state would make one up).
    return absl::FailedPreconditionError(
        absl::StrCat("host '", Excerpt(host), "' has no state before ", end_unix,
                     " (its oldest kept state is at ", oldest,
                     "): ask for a window that starts after it"));
  }
  if (series->states.empty()) {
    out.whole_history_fallback = true;
    return out;
  }
  const int64_t end = end_unix > 0 ? end_unix : out.info.last_unix;
  if (end_unix > 0 && end_unix >= series->start_unix && end_unix < out.info.last_unix) {
    // A window in the past starts in the state the host was in then.
    size_t k = static_cast<size_t>((end_unix - series->start_unix) / series->step_seconds);
    k = std::min(k, series->states.size() - 1);
    out.info.state = series->states[k];
    if (opt.load_band_first_sojourn) {
      out.load_band = k < series->load_band.size() ? series->load_band[k]
                                                   : availability::kLoadBandUnknown;
    }
    while (k > 0 && series->states[k - 1] == out.info.state) --k;
    out.info.state_since_unix = series->start_unix + static_cast<int64_t>(k) * series->step_seconds;
  }
  if (opt.host_frailty) {
    out.failure_exposure =
        counts != nullptr
            ? counts->Failure(*series, end, spec.clock)
            : availability::CountFailureExposure(*series, end, spec.clock);
  }
  const int steps = availability::WindowSteps(*series, spec);
  if (deployed_estimates) {
    // The window's start point: the grid point at `end` (the last one for a
    // window starting now, in the state the host is in now, which is S5 once
    // it has been silent past its revocation gap).
    int64_t t = (end - series->start_unix) / series->step_seconds;
    if (end < series->start_unix) t = -1;
    const int64_t last = static_cast<int64_t>(series->states.size()) - 1;
    t = std::min<int64_t>(t, last);
    if (t >= 0) {
      // Down now (silent past its revocation gap, or S3/S4): since the last
      // sample the host has been off.
      double down_after = 0;
      if ((end_unix <= 0 || end_unix >= out.info.last_unix) &&
          availability::IsFailure(out.info.state)) {
        const int64_t now = end_unix > 0 ? end_unix : absl::ToUnixSeconds(clock_.Now());
        down_after = static_cast<double>(std::max<int64_t>(1, now - out.info.last_unix));
      }
      out.deployed = counts != nullptr && t == last
                         ? counts->Deployed(*series, steps, down_after)
                         : DeployedAt(*series, static_cast<size_t>(t), steps, down_after);
    } else {
      out.deployed = baselines::DeployedEstimates{};  // nothing seen before the window
    }
  }
  if (opt.load_band_first_sojourn) {
    out.band_exposure =
        counts != nullptr
            ? counts->Band(*series, end, spec.clock, steps,
                             opt.recent_age_seconds, opt.long_age_seconds)
            : availability::CountBandExposure(*series, end, spec.clock, steps,
                                              opt.recent_age_seconds, opt.long_age_seconds);
  }
  const std::vector<size_t> starts = availability::HistoryWindowStarts(*series, spec, end);
  for (size_t s : starts) {
    out.window_starts_unix.push_back(series->start_unix +
                                     static_cast<int64_t>(s) * series->step_seconds);
  }
  if (!starts.empty()) {
    // The same collection as sojourn-eval's (predict.h), so both agree.
    out.stats = availability::CollectStats(*series, spec, end, opt);
  } else {
    // No same-clock window fits yet (a new host): estimate from windows of
    // the requested length at any clock time, every quarter window, over the
    // whole history (one window when the history is shorter), and say so.
    // One window over everything would keep only the path up to the first
    // failure (S3..S5 are absorbing) and ignore every later sojourn.
    // "Whole" is the history up to `end`: a window in the past must not
    // learn from what happened after it.
    out.whole_history_fallback = true;
    const int64_t upto = end < series->start_unix
                             ? 0
                             : (end - series->start_unix) / series->step_seconds + 1;
    const size_t n =
        static_cast<size_t>(std::min<int64_t>(upto, static_cast<int64_t>(series->states.size())));
    const size_t len = std::min<size_t>(static_cast<size_t>(steps) + 1, n);
    const size_t stride = std::max<size_t>(1, len / 4);
    for (size_t s = 0; len > 0 && s + len <= n; s += stride) {
      availability::AccumulateWindow(&series->states[s], len, &out.stats);
    }
  }
  out.stats.step_seconds = series->step_seconds;
  return out;
}

absl::StatusOr<std::vector<StateInterval>> HostBook::Intervals(const std::string& host,
                                                               int64_t start_unix, int64_t end_unix,
                                                               int64_t* step,
                                                               bool through_silence) const {
  std::shared_ptr<const StateSeries> series;
  // A copy: after the newest sample, its StateAt is the host's state.
  std::optional<availability::StateClassifier> classifier;
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = hosts_.find(host);
    if (it == hosts_.end()) return absl::NotFoundError(absl::StrCat("unknown host '", Excerpt(host), "'"));
    series = SeriesOf(it->second);
    if (through_silence && it->second.grid.has_value()) {
      classifier.emplace(it->second.grid->classifier());
    }
  }
  *step = series->step_seconds;
  std::vector<StateInterval> out;
  if (series->step_seconds <= 0) return out;
  const int64_t period = series->step_seconds;
  // Grid points from the first at or after `t` (0 for one before the grid);
  // unsigned, so that no time overflows.
  auto first_point_from = [&](int64_t t) -> uint64_t {
    if (t <= series->start_unix) return 0;
    const uint64_t d = static_cast<uint64_t>(t) - static_cast<uint64_t>(series->start_unix);
    return d / period + (d % period != 0 ? 1 : 0);
  };
  auto add = [&](HostState state, int64_t t) {
    if (!out.empty() && out.back().state == state) {
      out.back().end_unix = t + period;
    } else {
      out.push_back({state, t, t + period});
    }
  };
  const uint64_t n = series->states.size();
  const uint64_t k_end = end_unix > 0 ? std::min(n, first_point_from(end_unix)) : n;
  for (uint64_t k = first_point_from(start_unix); k < k_end; ++k) {
    add(series->states[k], series->start_unix + static_cast<int64_t>(k) * period);
  }
  if (classifier.has_value() && end_unix > 0 && n > 0) {
    // The grid ends at the newest sample; after it, up to now at most.
    const int64_t until = std::min(end_unix, absl::ToUnixSeconds(clock_.Now()) + 1);
    for (uint64_t k = std::max(n, first_point_from(start_unix)); start_unix < until; ++k) {
      const int64_t t = series->start_unix + static_cast<int64_t>(k) * period;
      if (t >= until) break;
      add(classifier->StateAt(t), t);
    }
  }
  return out;
}

absl::StatusOr<std::vector<HostSample>> HostBook::Series(const std::string& host,
                                                         int64_t start_unix, int64_t end_unix,
                                                         size_t max_samples,
                                                         bool* truncated) const {
  const int64_t to = end_unix > 0 ? end_unix : INT64_MAX;
  std::vector<HostSample> recent;
  int64_t memory_from = 0;
  bool older = false;
  {
    absl::ReaderMutexLock l(&mu_);
    auto it = hosts_.find(host);
    if (it == hosts_.end()) return absl::NotFoundError(absl::StrCat("unknown host '", Excerpt(host), "'"));
    const Host& h = it->second;
    auto lo = std::lower_bound(h.recent.begin(), h.recent.end(), start_unix,
                               [](const HostSample& s, int64_t t) { return s.unix_seconds < t; });
    auto hi = std::lower_bound(lo, h.recent.end(), to,
                               [](const HostSample& s, int64_t t) { return s.unix_seconds < t; });
    // No more than can be returned (one over, to know it was truncated).
    if (static_cast<size_t>(hi - lo) > max_samples) {
      hi = lo + static_cast<ptrdiff_t>(max_samples) + 1;
    }
    recent.assign(lo, hi);
    if (!h.recent.empty()) memory_from = h.recent.front().unix_seconds;
    older = HasOlder(h);
  }
  return Gather(host, start_unix, to, max_samples, std::move(recent), memory_from, older,
                truncated);
}

}  // namespace sojourn::statemgr
