// Ranks hosts for a job with the policies of models/scheduling (paper 000
// section 8.4; default "proactive"). For each live host it needs the TR curve
// from now over a horizon (from the predictor) and the recent CPU load (from
// the host's state manager, for the aggregated one-step-ahead forecast).
// Both are cached per host and horizon: an entry is reused until its TTL
// passes (by default at the entry's own phase of the TTL, so that the
// refreshes of many hosts spread over it instead of all falling on one
// ranking, and fetched again in the background shortly before, so that no
// ranking waits for them), the host reports a change of what the prediction is conditioned on
// (HistoryVersion), or the host has been silent for longer than its
// revocation gap (the prediction's valid_until_unix_seconds: it is S5 now),
// so a ranking over many hosts does not recompute every TR curve. Misses are
// fetched concurrently on a bounded pool.
#ifndef SOJOURN_SERVICES_BROKER_RANKER_H_
#define SOJOURN_SERVICES_BROKER_RANKER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/host_sample.h"
#include "common/metrics.h"
#include "common/thread_pool.h"
#include "models/scheduling/load_forecast.h"
#include "models/scheduling/policy.h"
#include "sojourn/v1/broker.pb.h"
#include "sojourn/v1/predictor.pb.h"

namespace sojourn::broker {

// Where TR predictions come from (the predictor service in production).
// Must be thread-safe (called concurrently for a ranking's misses).
class TrSource {
 public:
  virtual ~TrSource() = default;
  virtual absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request) = 0;
};

// The error a TrSource returns when the predictor itself cannot be reached
// (nothing listens, or it does not answer), as opposed to the predictor
// answering with an error about one host (e.g. that host's state manager is
// down). UNAVAILABLE, "predictor ADDRESS unreachable: DETAIL".
absl::Status PredictorUnreachableError(absl::string_view address, absl::string_view detail);
// Whether `status` came from PredictorUnreachableError.
bool IsPredictorUnreachable(const absl::Status& status);

// Recent raw samples of a host (its state manager's GetSeries in production).
// Must be thread-safe.
class LoadSource {
 public:
  virtual ~LoadSource() = default;
  // Samples of `host.host()` in [start_unix, now], oldest first.
  virtual absl::StatusOr<std::vector<HostSample>> RecentSamples(
      const sojourn::v1::RegisteredHost& host, int64_t start_unix) = 0;
};

// What a host's cached predictions are keyed on (common.proto
// HostCondition). A host whose state manager reports its condition (state,
// its start, load band, grid step) keeps a prediction while its registered
// condition is the one the prediction was computed from: a monitor's new
// sample every few seconds in the same condition changes the TR curve from
// now by no more than the clock does, and the TTL bounds that. Without a
// condition, any newer last sample is new history and recomputes (the only
// signal an older state manager sends).
struct HistoryVersion {
  // The host's last sample time as registered (0 = unknown).
  int64_t last_sample_unix = 0;
  bool has_condition = false;
  int state = 0;
  int64_t state_since_unix = 0;
  int load_band = -1;
  int64_t step_seconds = 0;

  void SetCondition(const sojourn::v1::HostCondition& c);
  // The host as registered now.
  static HistoryVersion Of(const sojourn::v1::RegisteredHost& host);
  // A prediction fetched for `host`: the condition is the prediction's own
  // when it has one (the state manager's, newer than the registration).
  static HistoryVersion OfFetch(const sojourn::v1::RegisteredHost& host,
                                const sojourn::v1::PredictAvailabilityResponse& r);
  // Whether a prediction computed when the host was at `cached` still holds
  // for it now, at *this.
  bool Keeps(const HistoryVersion& cached) const;
};

// What the broker knows about one host for one horizon.
struct HostPrediction {
  sojourn::v1::PredictAvailabilityResponse response;  // without the curve
  std::shared_ptr<const scheduling::TrCurve> tr;
  scheduling::LoadForecast load;
  // The host's registration when the entry was fetched, and when.
  HistoryVersion version;
  absl::Time fetched;
};

// Thread-safe cache of HostPrediction per (host, horizon).
class PredictionCache {
 public:
  // With `spread_refreshes`, an entry expires at the first of its key's
  // refresh times after it was fetched: the times phase + k x ttl, the phase
  // fixed in [0, ttl) by a hash of (host, horizon). An entry so lives at most
  // the TTL after it was asked for (HostPrediction::fetched; fetched again
  // right after its refresh time, it lives to the next one), but the entries
  // fetched by one
  // ranking (the first one, or any after a predictor restart) no longer all
  // expire on the same later ranking: their expiries are spread evenly over
  // the TTL from the start. Without it, an entry lives the TTL from its
  // fetch, and 1,000 hosts fetched together were all fetched again together
  // at every TTL (bench/cluster/rank_live.py: a 1.3 s ranking each minute).
  PredictionCache(Clock& clock, absl::Duration ttl, bool spread_refreshes = false)
      : clock_(clock), ttl_(ttl), spread_refreshes_(spread_refreshes) {}
  // When an entry of (host, horizon) fetched at `fetched` expires (see the
  // constructor); in (fetched, fetched + ttl], or fetched for a TTL <= 0. An
  // entry refreshed ahead of its expiry (Put's `refreshed`) lives the TTL
  // from its fetch instead: fetched before its key's refresh time, it could
  // not live to the next one without outliving the TTL.
  absl::Time ExpiryOf(const std::string& host, int64_t horizon_seconds, absl::Time fetched) const;
  // An entry, and whether it is due to be refreshed ahead of its expiry:
  // from ttl / 6 before its expiry, but not before the middle of its own
  // life, so that an entry fetched just before its key's refresh time is not
  // refreshed at once.
  struct Found {
    std::shared_ptr<const HostPrediction> entry;
    bool refresh_due = false;
  };
  // The entry if present, before its expiry (ExpiryOf), kept by the host's
  // `version` now (HistoryVersion::Keeps), and not past its prediction's
  // valid_until_unix_seconds moved on by the samples registered since
  // (`version.last_sample_unix`; a host silent for longer than its
  // revocation gap is S5); else null.
  std::shared_ptr<const HostPrediction> Get(const std::string& host, int64_t horizon_seconds,
                                            const HistoryVersion& version) const {
    return Find(host, horizon_seconds, version).entry;
  }
  // Get, and whether the entry is due for a refresh ahead of its expiry.
  Found Find(const std::string& host, int64_t horizon_seconds, const HistoryVersion& version) const;
  // Whether `entry` is the one cached for (host, horizon), and not expired.
  bool Holds(const std::string& host, int64_t horizon_seconds, const HostPrediction* entry) const;
  // Makes `entry`, if it is the one cached, never due for a refresh ahead.
  void KeepUntilExpiry(const std::string& host, int64_t horizon_seconds,
                       const HostPrediction* entry);
  // Stores the entry; once per TTL it also drops the entries past their
  // expiry (those of hosts gone from the registry and of horizons no one asks for
  // any more stayed for good: an entry of 7 days is 33 kB).
  // `refreshed`: fetched ahead of the expiry of the entry it replaces
  // (ExpiryOf). An entry fetched (asked for) before the one cached does not
  // replace it.
  void Put(const std::string& host, int64_t horizon_seconds,
           std::shared_ptr<const HostPrediction> entry, bool refreshed = false);
  void Clear();
  size_t size() const;

 private:
  struct Slot {
    std::shared_ptr<const HostPrediction> entry;
    absl::Time expires;
    absl::Time refresh_from;  // Found::refresh_due from then on
  };
  Clock& clock_;
  const absl::Duration ttl_;
  const bool spread_refreshes_;
  mutable absl::Mutex mu_;
  std::map<std::pair<std::string, int64_t>, Slot> entries_ ABSL_GUARDED_BY(mu_);
  absl::Time last_sweep_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

struct RankerConfig {
  // TR curves cover max(horizon, 2 x the job's duration) rounded up to whole
  // days, at most 7 days (MTTF and JCTF are restricted to it).
  int64_t horizon_seconds = 86400;
  // Resolution requested for the TR curve (points = horizon / this).
  int64_t curve_resolution_seconds = 300;
  // Cached predictions expire after this (the window start moves with time).
  absl::Duration cache_ttl = absl::Seconds(60);
  // Each (host, horizon) expires at its own phase of the TTL
  // (PredictionCache); false = the TTL from the fetch.
  bool spread_cache_refreshes = true;
  // A ranking that finds a cached entry due for a refresh (from TTL / 6
  // before its expiry; PredictionCache::Found::refresh_due) uses it and has
  // it fetched again in the background on this many threads, so that no
  // ranking waits for the TTL's refreshes, only for hosts that changed
  // condition (or that no ranking asked for while due). A refreshed entry
  // lives the TTL from its fetch, so a host is fetched about every 5/6 TTL:
  // 1.2 times the predictor's work. 0 = off: entries are fetched when they
  // have expired, by the ranking that needs them.
  int refresh_threads = 2;
  // Recent history fetched for the load forecast (0 = no load: L = 0).
  int64_t load_history_seconds = 4 * 3600;
  // Concurrent fetches for cache misses (0 = one after the other).
  int fanout_threads = 16;
};

// Thread-safe.
class Ranker {
 public:
  // `tr_source`, `load_source` (may be null) and `clock` must outlive the ranker.
  Ranker(TrSource& tr_source, LoadSource* load_source, Clock& clock, const RankerConfig& config);
  ~Ranker();

  // INVALID_ARGUMENT for a bad job or an unknown (or simulation-only) policy.
  // UNAVAILABLE naming the predictor when the policy needs predictions
  // (proactive, tr) and no live host has one because the predictor is
  // unreachable: an outage is not "no host fits". Otherwise every host of
  // `hosts` appears in the answer, those without a prediction with the reason
  // (which names the predictor when it was unreachable). Hosts outside the
  // job's only_hosts are listed as not allowed without asking the predictor.
  //
  // `stop`, when given, is asked before each prediction is fetched; once it
  // says true (the caller went away or its deadline passed) no further
  // prediction is fetched and DEADLINE_EXCEEDED is returned, so an abandoned
  // ranking of thousands of hosts does not keep the predictor busy.
  absl::StatusOr<sojourn::v1::RankHostsResponse> Rank(
      const sojourn::v1::RankHostsRequest& request,
      const std::vector<sojourn::v1::RegisteredHost>& hosts,
      const std::function<bool()>& stop = nullptr);

  PredictionCache& cache() { return cache_; }
  // Counts the refreshes ahead in sojourn_broker_prediction_refreshes_total
  // {outcome="ok"|"error"|"skipped"} (exported at 0 from this call).
  // `metrics` must outlive the ranker. Call before the first ranking.
  void ExportMetrics(Metrics& metrics);
  // Blocks until no refresh ahead is scheduled or running (tests).
  void WaitForRefreshes();
  // Refreshes ahead that asked the predictor so far (successful or not).
  int64_t refreshes() const {
    absl::MutexLock l(&refresh_mu_);
    return refreshes_;
  }
  // Refreshes ahead scheduled from now on return without fetching; those
  // running finish. The destructor calls it.
  void StopRefreshes();
  const Clock& clock() const { return clock_; }
  // The horizon used for a job of `duration_seconds`.
  int64_t HorizonFor(int64_t duration_seconds) const;

 private:
  absl::StatusOr<std::shared_ptr<const HostPrediction>> Fetch(
      const sojourn::v1::RegisteredHost& host, int64_t horizon);
  // Has (host, horizon) fetched again on refresh_ unless that is already
  // scheduled. Returns whether it scheduled it.
  // `cached` is the entry found due: the refresh is skipped once the cache
  // no longer holds it.
  bool RefreshAhead(const sojourn::v1::RegisteredHost& host, int64_t horizon,
                    std::shared_ptr<const HostPrediction> cached);

  TrSource& tr_source_;
  LoadSource* load_source_;
  Clock& clock_;
  const RankerConfig config_;
  PredictionCache cache_;
  std::unique_ptr<ThreadPool> fanout_;
  std::atomic<uint64_t> round_robin_{0};
  Metrics* metrics_ = nullptr;
  mutable absl::Mutex refresh_mu_;
  // Keys with a refresh ahead scheduled or running.
  std::set<std::pair<std::string, int64_t>> refreshing_ ABSL_GUARDED_BY(refresh_mu_);
  int64_t refreshes_ ABSL_GUARDED_BY(refresh_mu_) = 0;
  // Set by the destructor: scheduled refreshes return without fetching.
  std::atomic<bool> stopping_{false};
  // Last, so that it is joined first, while the rest is alive.
  std::unique_ptr<ThreadPool> refresh_;
};

// Converts a predictor TR curve (points evenly spaced up to the window end)
// into a regular-grid curve; empty when the response has no curve.
scheduling::TrCurve CurveFromResponse(const sojourn::v1::PredictAvailabilityResponse& response);

// One-shot ranking without cache, load or concurrency (tests, tools).
absl::StatusOr<sojourn::v1::RankHostsResponse> RankHosts(
    const sojourn::v1::RankHostsRequest& request,
    const std::vector<sojourn::v1::RegisteredHost>& hosts, TrSource& tr_source);

}  // namespace sojourn::broker

#endif  // SOJOURN_SERVICES_BROKER_RANKER_H_
