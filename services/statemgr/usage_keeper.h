// Usage forecasts of the hosts a state manager holds (paper 003): keeps each
// host's pattern analysis in RocksDB, redoes it when it is a day old (lazily,
// on the first question of a new day) or on demand, and answers
// PredictUsage / CanRun / HowLong with a UsageModel built from the host's own
// samples, so the history never leaves the host.
#ifndef SOJOURN_SERVICES_STATEMGR_USAGE_KEEPER_H_
#define SOJOURN_SERVICES_STATEMGR_USAGE_KEEPER_H_

#include <map>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "models/usage/usage_model.h"
#include "services/statemgr/host_book.h"
#include "services/statemgr/sample_store.h"

namespace sojourn::statemgr {

struct UsageKeeperConfig {
  usage::UsageModelOptions model;
  // Days start at local midnight (UTC + this offset).
  int64_t utc_offset_seconds = 0;
  // Redo the pattern analysis when it is older than this.
  absl::Duration analysis_max_age = absl::Hours(24);
  // Reuse a built model for questions within this long (a new 5-minute bin).
  absl::Duration model_max_age = absl::Minutes(5);
};

// Thread-safe.
class UsageKeeper {
 public:
  // All references must outlive the keeper.
  UsageKeeper(const UsageKeeperConfig& config, HostBook& book, SampleStore& store, Clock& clock);

  struct Model {
    std::shared_ptr<const usage::UsageModel> model;
    // Memory capacity used to turn MiB into fractions (MiB).
    double total_mem_mb = 0;
    int64_t analyzed_unix = 0;
  };
  // The host's current model. NOT_FOUND for an unknown host,
  // FAILED_PRECONDITION for a host without samples.
  absl::StatusOr<Model> Get(const std::string& host);
  // Redoes the analysis now and stores it.
  absl::StatusOr<Model> Analyze(const std::string& host);

 private:
  absl::StatusOr<Model> Build(const std::string& host, bool force_analysis);

  const UsageKeeperConfig config_;
  HostBook& book_;
  SampleStore& store_;
  Clock& clock_;
  absl::Mutex mu_;
  // The host's samples resampled into 5-minute bins (usage::Resample) as of
  // the last build, kept so the next build resamples only what came since:
  // a year of 6 s samples is 5 million to read back from the store, a year
  // of bins 105,000.
  struct Resampled {
    std::shared_ptr<const usage::UsageSeries> series;
    // The memory capacity the bins were normalised by, and whether it was
    // the host's own (else the largest free memory seen, which a later
    // sample may raise).
    double total_mem_mb = 0;
    bool total_known = false;
    int64_t period_seconds = 0;
    // The host's first sample then: retention (HostBook::Retain) moves it,
    // and the bins before the new one must go.
    int64_t first_unix = 0;
  };
  // The host's series: the cached one extended with the samples since its
  // last bin, or all samples resampled again.
  absl::StatusOr<Resampled> Resample(const std::string& host, const HostInfo& info,
                                     const Resampled* cached);
  struct Cached {
    Model model;
    absl::Time built;
    Resampled resampled;
  };
  std::map<std::string, Cached> cache_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sojourn::statemgr

#endif  // SOJOURN_SERVICES_STATEMGR_USAGE_KEEPER_H_
