// The five-state availability model of paper 000 section 4 (paper 001 section
// III.C) and the classifier that maps host samples onto it.
//
//   S1  host CPU load < Th1: the guest runs at default priority
//   S2  Th1 <= load <= Th2: the guest runs at lowest priority
//   S3  load > Th2 for longer than the grace period (1 min): guest terminated
//   S4  free memory below the guest's working set: guest terminated
//   S5  the host is revoked (no monitoring sample for longer than a gap)
//
// S3..S5 are unrecoverable for a guest (absorbing in the SMP of section 6).
// Transient load spikes above Th2 that are shorter than the grace period stay
// in the state the host was in before the spike (S1 or S2), as section 4 says.
#ifndef SOJOURN_MODELS_AVAILABILITY_STATE_H_
#define SOJOURN_MODELS_AVAILABILITY_STATE_H_

#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/host_sample.h"

namespace sojourn::availability {

enum class HostState : uint8_t { kS1 = 1, kS2 = 2, kS3 = 3, kS4 = 4, kS5 = 5 };

// S3..S5 are absorbing for a guest.
inline bool IsFailure(HostState s) { return s >= HostState::kS3; }
inline int StateIndex(HostState s) { return static_cast<int>(s); }

// Classifier thresholds; defaults are paper 000 section 4's.
struct ClassifierConfig {
  // CPU load thresholds (fractions of the machine).
  double th1 = 0.20;
  double th2 = 0.60;
  // Load above th2 for longer than this (seconds) gives S3; shorter spikes stay
  // S1/S2. A sample's load is taken to describe the interval since the previous
  // sample (monitors report averages), so with 300 s samples one sample above
  // th2 already lasts 300 s > 60 s and gives S3.
  int64_t grace_seconds = 60;
  // Free memory below this (MiB) gives S4. Unknown free memory never gives S4.
  double guest_working_set_mb = 256;
  // No sample for longer than this (seconds) gives S5 until samples resume.
  int64_t revocation_gap_seconds = 60;
};

// Online classifier: the statemgr feeds it one sample at a time, in time
// order. Not thread-safe (one instance per host).
class StateClassifier {
 public:
  explicit StateClassifier(const ClassifierConfig& config);

  // Adds a sample (its time must not be before the previous sample's; an
  // out-of-order sample is ignored and the current state returned) and
  // returns the state at s.unix_seconds.
  HostState Add(const sojourn::HostSample& s);

  // State at `unix_seconds` >= the last sample's time: S5 when more than the
  // revocation gap has passed since the last sample (or no sample was added
  // yet), else the state of the last sample.
  HostState StateAt(int64_t unix_seconds) const;

  // The revocation gap for the next Add and StateAt (a host whose period
  // changed: the gaps of its older samples are judged by their period).
  void set_revocation_gap_seconds(int64_t gap) { config_.revocation_gap_seconds = gap; }

  // The state returned by the last Add (S5 before the first sample).
  HostState current() const { return current_; }
  // Whether the last Add was inside a transient load spike: load above Th2
  // for no longer than the grace period, so the state is still S1/S2 while
  // the guest is suspended (section 4).
  bool in_spike() const { return high_since_ != kNone && !IsFailure(current_); }
  std::optional<int64_t> last_sample_unix() const {
    return last_unix_ == kNone ? std::nullopt : std::optional<int64_t>(last_unix_);
  }

 private:
  // "No such time" (plain integers rather than std::optional: GCC 12 warns
  // that a copied optional's value may be uninitialized).
  static constexpr int64_t kNone = INT64_MIN;

  ClassifierConfig config_;
  HostState current_ = HostState::kS5;
  // The S1/S2 state before the current load spike (spikes keep it).
  HostState base_ = HostState::kS1;
  int64_t last_unix_ = kNone;
  // Start of the current run of load > th2, if the last sample was above th2.
  int64_t high_since_ = kNone;
};

// Within-state load band of an up state, the first-sojourn covariate of
// load_band.h: 0 = the lower half of the state's load range (S1: load below
// Th1 / 2; S2: Th1 up to (Th1 + Th2) / 2), 1 = the upper half (including a
// transient spike above Th2 that the grace period keeps in S1/S2),
// kLoadBandUnknown for a failure state or an unknown load.
inline constexpr uint8_t kLoadBandUnknown = 255;
uint8_t LoadBandOf(HostState s, double load, const ClassifierConfig& cfg);

// A regular grid of states: states[k] is the state at start_unix + k*step_seconds.
struct StateSeries {
  int64_t start_unix = 0;
  int64_t step_seconds = 0;
  std::vector<HostState> states;
  // Empty (unknown) or one LoadBandOf per state: the band of the load of the
  // last sample at or before the grid point.
  std::vector<uint8_t> load_band;
};

// ClassifyToGrid one sample at a time: the state manager extends a host's
// grid as its samples arrive instead of classifying its whole history again
// for every request after new samples. A grid point is final once a sample
// after it has arrived (it is the state after every sample at or before it),
// so the grid only grows at its end; the point at the last sample's own time
// is redone if another sample with that time follows. Fed the same samples,
// in any batches, the grid equals ClassifyToGrid's. Not thread-safe.
class GridBuilder {
 public:
  // `max_points` > 0 bounds the grid to the most recent max_points points
  // (and up to an eighth more, trimmed in steps so the cost stays constant
  // per sample): older points are dropped, and a sample more than
  // max_points steps after the last one starts the grid anew at itself
  // rather than filling the gap with S5 points. 0 = unbounded.
  GridBuilder(const ClassifierConfig& cfg, int64_t step_seconds, int64_t grid_origin_unix,
              int64_t max_points = 0);

  // Adds a sample (not before the previous one; an out-of-order sample is
  // ignored) and returns the classifier's state at its time.
  HostState Add(const sojourn::HostSample& s);
  void Reserve(size_t points);

  const StateClassifier& classifier() const { return classifier_; }
  // StateClassifier::set_revocation_gap_seconds, for the next Add.
  void SetRevocationGap(int64_t gap) { classifier_.set_revocation_gap_seconds(gap); }
  // Time of the first point of the run of equal states that ends the grid
  // (the grid's first point when the run began before it); 0 for an empty
  // grid. Kept as points are added, so it costs nothing to read: walking back
  // over a host's grid costs up to max_points for a host long in one state.
  int64_t run_start_unix() const {
    return series_->states.empty() ? 0 : std::max(run_start_, series_->start_unix);
  }
  // The grid so far. It is shared, not copied: a later Add copies the grid
  // first while a snapshot is still held, so a snapshot never changes.
  std::shared_ptr<const StateSeries> Snapshot() const { return series_; }
  // The grid, leaving the builder empty.
  StateSeries Release() &&;

 private:
  // The series, copied first when a snapshot shares it.
  StateSeries& Mutable();
  void Emit(int64_t t, bool redo);

  ClassifierConfig cfg_;
  int64_t origin_;
  int64_t max_points_;
  StateClassifier classifier_;
  std::shared_ptr<StateSeries> series_;
  // The next grid point to fill (its index from the origin), once started.
  bool started_ = false;
  int64_t next_k_ = 0;
  // Load of the last sample.
  double last_load_ = 0;
  // Start of the last run of equal points and of the run before it (kept
  // for a redo of the last point that joins it to that run again; 0 when
  // unknown, which a redo never needs then).
  int64_t run_start_ = 0;
  int64_t prev_run_start_ = 0;
};

// Classifies a time-sorted sample series onto a grid of `step_seconds` whose
// points are aligned to `grid_origin_unix` (e.g. local midnight): the grid
// runs from the first grid point at or after the first sample to the last
// grid point at or before the newest sample (a sample out of order is
// ignored, as StateClassifier ignores it), and each point gets the state of
// StateClassifier after all samples at or before it (so gaps longer than the
// revocation gap are S5), and the load band of the last sample. Returns an empty series for no samples or a
// non-positive step.
StateSeries ClassifyToGrid(const std::vector<sojourn::HostSample>& samples,
                           const ClassifierConfig& cfg, int64_t step_seconds,
                           int64_t grid_origin_unix);

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_STATE_H_
