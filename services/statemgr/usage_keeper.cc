#include "services/statemgr/usage_keeper.h"

#include <algorithm>
#include <cstring>

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
  {
    absl::MutexLock l(&mu_);
    auto it = cache_.find(host);
    if (it != cache_.end() && clock_.Now() - it->second.built < config_.model_max_age) {
      return it->second.model;
    }
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
  bool truncated = false;
  ASSIGN_OR_RETURN(std::vector<HostSample> samples,
                   book_.Series(host, 0, 0, std::numeric_limits<size_t>::max(), &truncated));
  HostTrace trace;
  trace.host = host;
  trace.period_seconds = info.meta.period_seconds;
  trace.total_mem_mb = info.meta.attributes.total_mem_mb();
  trace.samples = std::move(samples);
  double total_mem = trace.total_mem_mb;
  if (total_mem <= 0) {
    // Unknown capacity: the largest free memory seen (what Resample assumes).
    for (const HostSample& s : trace.samples) {
      if (s.has_free_mem()) total_mem = std::max(total_mem, s.free_mem_mb);
    }
  }
  usage::ResampleOptions ro;
  ro.utc_offset_seconds = config_.utc_offset_seconds;
  ASSIGN_OR_RETURN(usage::UsageSeries series, usage::Resample(trace, ro));
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
  cache_[host] = Cached{m, clock_.Now()};
  return m;
}

}  // namespace sojourn::statemgr
