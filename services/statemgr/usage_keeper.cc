#include "services/statemgr/usage_keeper.h"

#include <algorithm>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "common/text.h"

namespace sojourn::statemgr {
namespace {
// Stored value: 8-byte analysis time, then HostPatterns::Serialize() (the
// prototypes and UPA's fitted residual coefficient; values stored before the
// coefficient existed load with phi = 0, the paper's forecast, until the next
// daily analysis).
std::string Encode(int64_t analyzed, const std::string& patterns) {
  std::string out(8, '\0');
  std::memcpy(out.data(), &analyzed, 8);
  return out + patterns;
}
}  // namespace

UsageKeeper::UsageKeeper(const UsageKeeperConfig& config, HostBook& book, SampleStore& store,
                         Clock& clock)
    : config_(config), book_(book), store_(store), clock_(clock) {}

absl::StatusOr<UsageKeeper::Model> UsageKeeper::Get(const std::string& host) {
  std::optional<Cached> cached;
  {
    absl::MutexLock l(&mu_);
    auto it = cache_.find(host);
    if (it != cache_.end() && clock_.Now() - it->second.built < config_.model_max_age) {
      cached = it->second;
    }
  }
  if (cached.has_value()) {
    // Unless retention (HostBook::Retain) moved the host's first sample
    // since: the model would still see the deleted days.
    absl::StatusOr<HostInfo> info = book_.Info(host);
    if (info.ok() && info->first_unix == cached->resampled.first_unix) return cached->model;
  }
  return Build(host, false);
}

absl::StatusOr<UsageKeeper::Model> UsageKeeper::Analyze(const std::string& host) {
  return Build(host, true);
}

absl::StatusOr<UsageKeeper::Model> UsageKeeper::Build(const std::string& host,
                                                      bool force_analysis) {
  ASSIGN_OR_RETURN(HostInfo info, book_.Info(host));
  if (info.samples == 0) {
    return absl::FailedPreconditionError(absl::StrCat("host '", Excerpt(host), "' has no samples yet"));
  }
  Resampled cached;
  {
    absl::MutexLock l(&mu_);
    auto it = cache_.find(host);
    if (it != cache_.end()) cached = it->second.resampled;
  }
  ASSIGN_OR_RETURN(Resampled resampled, Resample(host, info, &cached));
  usage::UsageSeries series = *resampled.series;
  const double total_mem = resampled.total_mem_mb;
  const int64_t now = absl::ToUnixSeconds(clock_.Now());

  usage::HostPatterns patterns;
  int64_t analyzed = 0;
  auto stored = store_.GetBlob('u', host);
  if (!force_analysis && stored.ok() && stored->size() >= 8) {
    std::memcpy(&analyzed, stored->data(), 8);
    auto parsed = usage::HostPatterns::Parse(absl::string_view(*stored).substr(8));
    if (parsed.ok() && now - analyzed < absl::ToInt64Seconds(config_.analysis_max_age)) {
      patterns = std::move(*parsed);
    } else {
      analyzed = 0;
    }
  }
  if (analyzed == 0) {
    patterns = usage::AnalyseHost(series, config_.model.patterns, now,
                                  config_.model.selector.window_days);
    analyzed = now;
    absl::Status s = store_.PutBlob('u', host, Encode(analyzed, patterns.Serialize()));
    if (!s.ok()) SOJOURN_LOG(WARNING, "storing usage patterns of %s: %s", host, s.ToString());
  }
  Model m;
  m.model = std::make_shared<const usage::UsageModel>(std::move(series), std::move(patterns),
                                                      config_.model, now);
  m.total_mem_mb = total_mem;
  m.analyzed_unix = analyzed;
  absl::MutexLock l(&mu_);
  cache_[host] = Cached{m, clock_.Now(), std::move(resampled)};
  return m;
}

absl::StatusOr<UsageKeeper::Resampled> UsageKeeper::Resample(const std::string& host,
                                                             const HostInfo& info,
                                                             const Resampled* cached) {
  const double known = info.meta.attributes.total_mem_mb();
  HostTrace trace;
  trace.host = host;
  trace.period_seconds = info.meta.period_seconds;
  usage::ResampleOptions ro;
  ro.utc_offset_seconds = config_.utc_offset_seconds;
  bool truncated = false;
  const usage::UsageSeries* old = cached != nullptr ? cached->series.get() : nullptr;
  if (old != nullptr && old->bins() > 0 && cached->period_seconds == info.meta.period_seconds &&
      cached->first_unix == info.first_unix &&
      old->utc_offset_seconds == config_.utc_offset_seconds &&
      (known > 0 ? cached->total_known && cached->total_mem_mb == known : !cached->total_known)) {
    // Resample again from the old series' last bin on: it holds the old last
    // sample (so no sample before it carries into a later bin) and may have
    // had only some of its samples.
    const int64_t last_bin = old->bins() - 1;
    ASSIGN_OR_RETURN(trace.samples, book_.Series(host, old->UnixOfBin(last_bin), 0,
                                                 std::numeric_limits<size_t>::max(), &truncated));
    double top = 0;
    for (const HostSample& s : trace.samples) {
      if (s.has_free_mem()) top = std::max(top, s.free_mem_mb);
    }
    // Bins are normalised by the capacity (known, or the largest free memory
    // seen): a new largest free memory changes every bin.
    if (!trace.samples.empty() && (known > 0 || top <= cached->total_mem_mb)) {
      trace.total_mem_mb = known > 0 ? known : cached->total_mem_mb;
      ro.origin_unix = old->origin_unix;
      ASSIGN_OR_RETURN(usage::UsageSeries tail, usage::Resample(trace, ro));
      auto out = std::make_shared<usage::UsageSeries>(*old);
      out->Resize(std::max(tail.bins(), old->bins()));
      for (int64_t b = last_bin; b < tail.bins(); ++b) {
        out->cpu[static_cast<size_t>(b)] = tail.cpu[static_cast<size_t>(b)];
        out->mem[static_cast<size_t>(b)] = tail.mem[static_cast<size_t>(b)];
      }
      Resampled r = *cached;
      r.series = std::move(out);
      return r;
    }
  }
  ASSIGN_OR_RETURN(trace.samples,
                   book_.Series(host, 0, 0, std::numeric_limits<size_t>::max(), &truncated));
  trace.total_mem_mb = known;
  Resampled r;
  r.total_known = known > 0;
  r.period_seconds = trace.period_seconds;
  r.first_unix = info.first_unix;
  r.total_mem_mb = known;
  if (!r.total_known) {
    // Unknown capacity: the largest free memory seen (what Resample assumes).
    for (const HostSample& s : trace.samples) {
      if (s.has_free_mem()) r.total_mem_mb = std::max(r.total_mem_mb, s.free_mem_mb);
    }
  }
  ASSIGN_OR_RETURN(usage::UsageSeries series, usage::Resample(trace, ro));
  r.series = std::make_shared<const usage::UsageSeries>(std::move(series));
  return r;
}

}  // namespace sojourn::statemgr
