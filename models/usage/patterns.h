// Use-pattern analysis (paper 003, section 2.1): 48 h objects starting at
// midnight are clustered into k use classes, each represented by its
// centroid prototype. Value types; thread-compatible.
#ifndef SOJOURN_MODELS_USAGE_PATTERNS_H_
#define SOJOURN_MODELS_USAGE_PATTERNS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "models/usage/clustering.h"
#include "models/usage/series.h"

namespace sojourn::usage {

// Section 2.1, "Data normalisation": kPure keeps the values; kVariational
// subtracts each object's mean (at runtime the recent mean is added back).
enum class Normalization { kPure, kVariational };
// Section 2.1, treatments of down-time: drop objects with missing bins, or
// count a missing bin as 100 % use (no availability).
enum class DowntimePolicy { kDiscard, kFullUse };

const char* NormalizationName(Normalization n);  // "pure", "variational"
absl::StatusOr<Normalization> ParseNormalization(absl::string_view name);
const char* DowntimePolicyName(DowntimePolicy p);  // "discard", "full-use"
absl::StatusOr<DowntimePolicy> ParseDowntimePolicy(absl::string_view name);

// Upper bound of UPA's residual coefficient phi (FitResidualPhi).
inline constexpr double kMaxResidualPhi = 0.999;

struct PatternOptions {
  // Number of use classes k; the paper uses 5 or 10. Default 5 (section 3.2).
  int clusters = 5;
  // Default centroid: the least complex linkage, LUPA's choice (section 3.1.3).
  Linkage linkage = Linkage::kCentroid;
  // Default variational, better in every experiment of section 3.1.2.
  Normalization normalization = Normalization::kVariational;
  // Default discard, LUPA's choice; kFullUse suits hosts switched off daily.
  DowntimePolicy downtime = DowntimePolicy::kDiscard;
  // UPA's residual correction: 0 = AR(1), phi^k for a residual k bins old;
  // K > 0 = also fit the k-step coefficients phi_k for k = 1..K
  // (residual_phi_by_step); not part of the serialized options.
  int residual_steps = 0;
  // UPA's residual coefficient where it cannot be estimated (FitResidualPhi):
  // default kMaxResidualPhi (the deviation persists); 0 gives the paper's
  // forecast there. Not part of the serialized options.
  double unestimated_residual_phi = kMaxResidualPhi;
};

// Result of one pattern analysis: the k prototypes of one resource, in the
// normalised space (for kVariational each has mean 0). Serializable so the
// statemgr can keep it (e.g. in RocksDB) and rebuild a predictor without
// redoing the clustering.
struct UsagePatterns {
  Resource resource = Resource::kCpu;
  PatternOptions options;
  // Objects were taken from bins before this time (exclusive).
  int64_t trained_until_unix = 0;
  // Number of 48 h objects clustered.
  int objects = 0;
  // Each prototype has kObjectBins values; bin 0 is a midnight.
  std::vector<std::vector<double>> prototypes;
  // Members of each class, parallel to prototypes.
  std::vector<int> cluster_sizes;
  // Lag-one (5-minute) autocorrelation of the residuals of the matched,
  // re-centred prototypes on the training data (FitResidualPhi), used by the
  // UPA forecast's decaying correction; 0 = the paper's forecast. Patterns
  // stored in format version 1 read as 0.
  double residual_phi = 0;
  // Number of residual pairs behind residual_phi.
  int residual_pairs = 0;
  // Optional k-step coefficients, [k - 1] = phi_k (options.residual_steps);
  // past the last one the correction decays by residual_phi per bin.
  std::vector<double> residual_phi_by_step;

  bool empty() const { return prototypes.empty(); }
  // Compact binary encoding ("SJUP" magic, version 2, little-endian; version 1,
  // without the residual fields, is still read).
  std::string Serialize() const;
  static absl::StatusOr<UsagePatterns> Parse(absl::string_view bytes);
};

// The 48 h objects of `r` that end at or before bin `end_bin` (exclusive):
// one per midnight, consecutive objects overlapping by 24 h. Objects with a
// missing bin are dropped (kDiscard) or completed with 1.0 (kFullUse; only
// objects overlapping the span between the first and last bin with data).
// Normalised as options.normalization says. One object per row; if
// `day_index` is not null it receives the day of each row.
Eigen::MatrixXd BuildObjects(const UsageSeries& series, Resource r, const PatternOptions& options,
                             int64_t end_bin, std::vector<int>* day_index = nullptr);

// Clusters the objects of `r` before `until_unix` into at most
// options.clusters classes and returns their centroids, and fits the
// residual coefficient of the UPA forecast on the same data (FitResidualPhi). FailedPrecondition
// when there is no complete object; InvalidArgument on bad options.
absl::StatusOr<UsagePatterns> AnalysePatterns(const UsageSeries& series, Resource r,
                                              const PatternOptions& options, int64_t until_unix);

// Everything the daily analysis of one host produces: for each resource the
// current prototypes and the "backtest" prototypes trained on data before the
// best-of selector's replay window, so that the selector scores UPA on days
// its prototypes have not seen. Any member may be empty.
struct HostPatterns {
  UsagePatterns cpu, mem;
  UsagePatterns cpu_backtest, mem_backtest;

  const UsagePatterns& current(Resource r) const { return r == Resource::kCpu ? cpu : mem; }
  const UsagePatterns& backtest(Resource r) const {
    return r == Resource::kCpu ? cpu_backtest : mem_backtest;
  }
  std::string Serialize() const;
  static absl::StatusOr<HostPatterns> Parse(absl::string_view bytes);
};

// Runs the daily pattern analysis of a host: both resources, trained on the
// whole days before `now_unix`, and the backtest set trained on the days
// before now - backtest_days. Resources without a complete object get empty
// patterns (not an error).
HostPatterns AnalyseHost(const UsageSeries& series, const PatternOptions& options, int64_t now_unix,
                         int backtest_days);

}  // namespace sojourn::usage

#endif  // SOJOURN_MODELS_USAGE_PATTERNS_H_
