// The state manager's view of its hosts: every sample persisted through
// SampleStore, the recent ones also in memory, the five-state classification
// on a regular grid extended as samples arrive, and the per-window statistics
// the predictor asks for.
#ifndef SOJOURN_SERVICES_STATEMGR_HOST_BOOK_H_
#define SOJOURN_SERVICES_STATEMGR_HOST_BOOK_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/clock.h"
#include "common/host_sample.h"
#include "models/availability/frailty.h"
#include "models/availability/load_band.h"
#include "models/availability/kernel.h"
#include "models/availability/sojourn_stats.h"
#include "models/availability/state.h"
#include "models/availability/window.h"
#include "models/baselines/baselines.h"
#include "services/statemgr/sample_store.h"

namespace sojourn::statemgr {

struct HostBookConfig {
  // Classifier thresholds (paper 000 section 4 defaults). The revocation gap
  // of a host is max(classifier.revocation_gap_seconds, 1.5 x its period), so
  // one missed sample of a slow source is a revocation and jitter is not;
  // after a change of period, the samples stored before it keep the gap of
  // the period(s) they were sent at (HostMeta::history_period_seconds).
  availability::ClassifierConfig classifier;
  // Sampling period assumed for a host whose sender does not say (seconds).
  int64_t default_period_seconds = 6;
  // Longest grid of states kept per host (and up to an eighth more;
  // availability::GridBuilder): the state grid is dense (one point per
  // period from the first sample to the last), so one old sample (1970)
  // beside a current one would otherwise cost gigabytes. Older samples stay
  // stored but are left out of the grid: 4,000,000 points (8 MB) are 278
  // days at the default 6 s period and 38 years at 300 s.
  int64_t max_grid_points = 4'000'000;
  // Samples of the last this many seconds before a host's newest stay in
  // memory (the newest always does); older ones are read from the store when
  // asked for (Series, the usage analysis, a change of period). The window
  // statistics need only the grid and the last 4 hours. At the default 6 s
  // period a day is 14,400 samples, 0.6 MB; a year in memory was 0.5 GB.
  int64_t memory_seconds = 86400;
  // A host whose grid has at least this many points keeps what a request
  // for a window from now asks of the whole grid (its failure exposure, 200
  // bytes per day; its exits by load band, 18 kB per window length and time
  // zone, up to 8; HTCondor's and BOINC's estimates) and counts only the new
  // points; a smaller grid is counted anew for each request, in proportion
  // to its points. Keeping them for every host would cost a state manager of
  // 1,000 hosts of 12 weeks at 300 s about 160 MB for 8 window lengths.
  int64_t keep_counts_from_points = 65536;
  // Load() reads a host's stored samples this many at a time (2.6 MB).
  int64_t load_chunk_samples = 65536;
  // Load() leaves out stored samples stamped later than the clock plus this
  // (the PushSamples bound, --max_clock_skew_seconds): one sample from the
  // future would make every real sample after it a "duplicate", acknowledged
  // and never stored.
  int64_t max_clock_skew_seconds = 3600;
};

// What one PushSamples message says about its host besides the samples
// (statemgr.proto, PushSamplesRequest). Only what is set changes the stored
// HostMeta: a multi-message stream whose later messages carry no attributes
// must not erase the ones the first message sent.
struct MetaUpdate {
  // Set: replaces the stored attributes whole (an explicit update; all-zero
  // attributes make them unknown). Unset: the stored attributes are kept.
  std::optional<sojourn::v1::HostAttributes> attributes;
  // > 0: replaces the stored period. 0: the stored period is kept.
  int64_t period_seconds = 0;
  bool empty() const { return !attributes.has_value() && period_seconds <= 0; }
};

struct AppendResult {
  int64_t persisted = 0;
  int64_t duplicates = 0;
  int64_t last_persisted_unix = 0;
};

struct HostInfo {
  std::string host;
  int64_t first_unix = 0;
  int64_t last_unix = 0;
  // CPU load of the newest sample (-1 without samples).
  double last_cpu_load = -1;
  int64_t samples = 0;
  availability::HostState state = availability::HostState::kS5;
  int64_t state_since_unix = 0;
  // Band of the newest sample's load within `state`'s load range
  // (availability::LoadBandOf; kLoadBandUnknown for a failure state).
  uint8_t load_band = availability::kLoadBandUnknown;
  // Step of the host's state grid (its period), seconds.
  int64_t step_seconds = 0;
  // With no sample after last_unix + this the host is S5 (0 without samples).
  int64_t revocation_gap_seconds = 0;
  HostMeta meta;
};

struct WindowStatsResult {
  availability::SojournStats stats;
  std::vector<int64_t> window_starts_unix;
  bool whole_history_fallback = false;
  HostInfo info;
  // (horizon seconds, mean load) from the last hours of samples before the
  // window start.
  std::vector<std::pair<int64_t, double>> load_forecast;
  // With opt.host_frailty: the host's failure exposure over its history up
  // to the window's end (availability::CountFailureExposure).
  std::optional<availability::FailureExposure> failure_exposure;
  // With opt.load_band_first_sojourn: the host's first-sojourn exits by load
  // band up to the window's end (availability::CountBandExposure) and its
  // band at the window start (the last sample's, or the grid point's for a
  // window in the past).
  std::optional<availability::BandExposure> band_exposure;
  uint8_t load_band = availability::kLoadBandUnknown;
  // With `deployed_estimates`: HTCondor's and BOINC's estimates of the
  // window from the history up to its start (baselines::DeployedEstimatesAt
  // at the window's start point; at a current S5 the host is down).
  std::optional<baselines::DeployedEstimates> deployed;
};

// What one HostBook::Retain pass did.
struct RetainResult {
  // Hosts whose samples before the cut were deleted and whose grid was
  // rebuilt.
  int64_t hosts = 0;
  // Sample records deleted (SampleStore::DeleteBefore).
  int64_t deleted_samples = 0;
  // Hosts whose deletion or rebuild failed, each logged; the next pass tries
  // again (a rebuild that failed after the deletion leaves the book as it
  // was until then, or until a restart).
  int64_t failed_hosts = 0;
};

// The latest sample stamp the state manager accepts at `now_unix`: now plus
// --max_clock_skew_seconds, INT64_MAX where that would overflow. PushSamples
// refuses later ones, and Load() (and a retention pass) leave stored ones out.
int64_t LatestAcceptedUnix(int64_t now_unix, int64_t max_clock_skew_seconds);

// The cut of --retention_days at `now_unix`: local midnight (UTC +
// `utc_offset_seconds`) of the day `days` days back, so whole local days go.
int64_t RetentionCutoff(int64_t now_unix, int64_t days, int64_t utc_offset_seconds);

struct StateInterval {
  availability::HostState state;
  int64_t start_unix;
  int64_t end_unix;
};

// One state change of a host, as HostBook's watchers receive it
// (statemgr.proto, StateTransition).
struct StateChange {
  std::string host;
  // The state left; unset in a snapshot and for a host's first sample.
  std::optional<availability::HostState> from;
  availability::HostState to = availability::HostState::kS5;
  // When `to` was entered: the sample that showed it; for S5, the last
  // sample before the silence or the gap.
  int64_t since_unix = 0;
  bool snapshot = false;
  std::string reason;
};

// Receives state changes (HostBook::AddWatcher). Calls come in time order per
// host, one at a time per watcher, under the book's append lock: a watcher
// must only queue the change (never block, never call back into the book).
class StateWatcher {
 public:
  virtual ~StateWatcher() = default;
  virtual void OnStateChange(const StateChange& change) = 0;
  // The book stops serving its watchers (HostBook::CloseWatchers).
  virtual void OnClose() {}
};

// A HostBook is safe for concurrent use.
class HostBook {
 public:
  // `store` and `clock` must outlive the HostBook.
  HostBook(const HostBookConfig& config, SampleStore& store, Clock& clock);

  // Loads every stored host (call once, before serving). Damaged records are
  // left out with a WARNING naming them and stay stored untouched
  // (SampleStore::ForEachHost); so are samples PushSamples would refuse (bad
  // values, a time later than now + max_clock_skew_seconds), and a meta with
  // an out-of-range period or invalid attributes loads as unknown. `*skipped`
  // (when not null) receives the number of records left out. Fails only when
  // RocksDB does.
  absl::Status Load(int64_t* skipped = nullptr);

  // Persists the new samples of `host` (timestamps after its last persisted
  // sample; older ones are counted as duplicates), then adds them in memory.
  // Samples must be in time order. `update` changes only what it sets (see
  // MetaUpdate): a message without attributes keeps the stored ones. A gap
  // since the last persisted sample longer than the revocation gap is
  // recorded as a revocation (S5).
  absl::StatusOr<AppendResult> Append(const std::string& host,
                                      const std::vector<HostSample>& samples,
                                      const MetaUpdate& update = MetaUpdate());

  // Retention (statemgr --retention_days): deletes every host's samples
  // stamped before `before_unix` from the store and from memory, and
  // rebuilds the host's state grid and the counts kept from it from the
  // samples left, so the book answers as one loaded from the store
  // afterwards would (a restart). A host with nothing left keeps its meta,
  // as a host registered before its first sample (its meta stored, so a
  // restart lists it too). The stored samples from the cut on are read and
  // classified again without a lock (about 3 s per year of 6 s samples,
  // bench BM_RetainOneDay); PushSamples waits while the deletion is written
  // (counting the samples deleted) and the samples in memory (a day's) are
  // fed, and requests only while the new grid is swapped in. The deleted
  // ranges are compacted after every host's deletion, so the disk space
  // comes back.
  // `stop` (when set) is asked between hosts: true ends the pass there (a
  // shutdown).
  RetainResult Retain(int64_t before_unix, const std::function<bool()>& stop = nullptr);

  // Every host, sorted by name; each one's state as Info() gives it, in
  // O(1) per host (the registrar lists them all every period).
  std::vector<HostInfo> List() const;
  size_t size() const;
  // The samples kept in memory over every host (HostBookConfig::memory_seconds)
  // and the bytes their vectors hold.
  struct MemoryUse {
    int64_t samples = 0;
    int64_t bytes = 0;
  };
  MemoryUse memory_use() const;
  // The clock the book reads "now" from.
  Clock& clock() const { return clock_; }
  absl::StatusOr<HostInfo> Info(const std::string& host) const;

  // Statistics of the same-clock windows of `spec` ending by `end_unix`
  // (0 = the last sample), collected as `opt` says (availability::CollectStats:
  // neighbouring start times, other-day-type borrowing, age split). NOT_FOUND
  // for an unknown host.
  absl::StatusOr<WindowStatsResult> WindowStats(
      const std::string& host, const availability::WindowSpec& spec, int64_t end_unix,
      const availability::EstimatorOptions& opt = availability::EstimatorOptions(),
      bool deployed_estimates = false) const;
  // The host's states on its grid over [start_unix, end_unix) (end 0 = up
  // to the newest sample), runs of equal states merged. With
  // `through_silence` and end_unix > 0, the grid goes on after the newest
  // sample up to end_unix (at most now): its state until the revocation gap
  // has passed, S5 after it, as the silence check announces it.
  absl::StatusOr<std::vector<StateInterval>> Intervals(const std::string& host, int64_t start_unix,
                                                       int64_t end_unix, int64_t* step,
                                                       bool through_silence = false) const;
  absl::StatusOr<std::vector<HostSample>> Series(const std::string& host, int64_t start_unix,
                                                 int64_t end_unix, size_t max_samples,
                                                 bool* truncated) const;

  // State transitions (DESIGN.md "statemgr: streams state transitions to
  // watchers"). Every host is also classified online, one sample at a time,
  // with the same StateClassifier as the grid, so a change is known when its
  // sample arrives. AddWatcher first announces the hosts that fell silent
  // (CheckSilence), then, with `snapshot`, gives `watcher` the current state
  // of every host matching `host` ("" = all hosts, including later ones),
  // then every change. `watcher` must stay valid until RemoveWatcher(watcher)
  // returns; RemoveWatcher waits for a delivery in progress to it.
  void AddWatcher(StateWatcher* watcher, const std::string& host, bool snapshot);
  void RemoveWatcher(StateWatcher* watcher);
  size_t watchers() const;
  // Announces S5 for every host silent (no sample) for longer than its
  // revocation gap by the clock, once per silence. The state manager calls it
  // every few seconds; returns the number of hosts announced.
  int CheckSilence();
  // Calls OnClose of every watcher (a shutdown); they stay registered until
  // they remove themselves.
  void CloseWatchers();

 private:
  // What the default request asks of the host's whole grid (its failure
  // exposure, exits by load band, HTCondor's and BOINC's estimates), kept as
  // the grid grows (host_book.cc).
  class GridCounts;
  struct Host {
    HostMeta meta;
    // The samples of the last config_.memory_seconds (at least the newest);
    // older ones are only in the store.
    std::vector<HostSample> recent;
    // All the host's samples, stored or in memory: how many, the first time.
    int64_t samples = 0;
    int64_t first_unix = 0;
    // The online classification of every sample (for watchers) and the grid
    // it gives, extended sample by sample (unset before the first sample).
    std::optional<availability::GridBuilder> grid;
    // Counted from that grid (set with it: NewGrid); shared with the
    // requests that count outside mu_.
    std::shared_ptr<GridCounts> counts;
    // The state last announced (unset before the first sample) and its start.
    std::optional<availability::HostState> announced;
    int64_t announced_since = 0;
  };
  // The host's samples in [from_unix, to_unix) (at most `max`; `*truncated`
  // says whether there were more): the stored ones from before those in
  // memory, then those. Call without mu_ held, with `recent` and `older`
  // taken under it (the in-memory samples in the range, and whether the host
  // has samples before its first in memory): what is stored before the
  // first in memory never changes.
  absl::StatusOr<std::vector<HostSample>> Gather(const std::string& host, int64_t from_unix,
                                                 int64_t to_unix, size_t max,
                                                 std::vector<HostSample> recent,
                                                 int64_t memory_from_unix, bool older,
                                                 bool* truncated) const;
  // Whether some of the host's samples are only in the store.
  static bool HasOlder(const Host& h) {
    return h.samples > static_cast<int64_t>(h.recent.size());
  }
  // Starts the host's grid (and the counts kept from it) anew.
  void NewGrid(Host& h) const;
  // Retain() for one host, adding the samples deleted to `*deleted`; false
  // when it failed (logged).
  bool RetainHost(const std::string& name, int64_t before_unix, int64_t* deleted)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(retain_mu_) ABSL_LOCKS_EXCLUDED(append_mu_, mu_);
  // Adds one sample (after the host's newest) to its memory and counts.
  void Remember(Host& h, const HostSample& s) const;
  // Drops from memory the samples older than config_.memory_seconds before
  // the newest, in steps (when they are a quarter of memory_seconds over).
  void Forget(Host& h) const;
  // Feeds one sample (after the host's last) to the host's online classifier
  // and appends the changes it makes to `out` (when not null).
  void Feed(const std::string& name, Host& h, const HostSample& s,
            std::vector<StateChange>* out) const;
  // Restarts the host's online classifier from its samples (a new period
  // changes its revocation gap) and appends to `out` the change of state the
  // reclassified history shows, if any (a host announced S5 stays so until
  // its next sample).
  void Refeed(const std::string& name, Host& h, std::vector<StateChange>* out) const;
  void SilenceLocked(int64_t now, std::vector<StateChange>* out)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Deliver(const std::vector<StateChange>& changes) ABSL_LOCKS_EXCLUDED(watch_mu_);
  int64_t PeriodOf(const Host& h) const;
  availability::ClassifierConfig ClassifierFor(const Host& h) const;
  // The revocation gap of the silence after the sample at `unix_seconds`:
  // the current period's (ClassifierFor), or for a sample stored before the
  // period last changed, that of the longest period before (HostMeta).
  int64_t GapAfter(const Host& h, int64_t unix_seconds) const;
  // GapAfter the host's newest sample.
  int64_t LastGap(const Host& h) const;
  // Before h.grid->Add(s): sets the grid's gap for the silence before the
  // sample (GapAfter the previous one), and returns it in *gap.
  void SetGapBefore(Host& h, int64_t* gap) const;
  std::shared_ptr<const availability::StateSeries> SeriesOf(const Host& h) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);
  HostInfo InfoOf(const std::string& name, const Host& h) const ABSL_SHARED_LOCKS_REQUIRED(mu_);

  const HostBookConfig config_;
  SampleStore& store_;
  Clock& clock_;
  mutable absl::Mutex mu_;
  std::map<std::string, Host> hosts_ ABSL_GUARDED_BY(mu_);
  // Serialises Append so the store and memory see the same order (and
  // watchers see each host's changes in time order). Taken before mu_ and
  // watch_mu_.
  absl::Mutex append_mu_;
  // The last write to the store failed (logged once until one succeeds).
  bool store_failing_ ABSL_GUARDED_BY(append_mu_) = false;
  // Serialises Retain passes. Taken before append_mu_.
  absl::Mutex retain_mu_;
  mutable absl::Mutex watch_mu_;
  struct Watch {
    StateWatcher* watcher;
    std::string host;  // "" = all
  };
  std::vector<Watch> watches_ ABSL_GUARDED_BY(watch_mu_);
};

}  // namespace sojourn::statemgr

#endif  // SOJOURN_SERVICES_STATEMGR_HOST_BOOK_H_
