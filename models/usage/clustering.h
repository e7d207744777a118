// Agglomerative hierarchical clustering of use objects (paper 003, section
// 2.1, "Clustering algorithms" and "Similarity measurement"). Pure functions,
// thread-safe.
#ifndef SOJOURN_MODELS_USAGE_CLUSTERING_H_
#define SOJOURN_MODELS_USAGE_CLUSTERING_H_

#include <vector>

#include "Eigen/Dense"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sojourn::usage {

// Distance between two clusters (section 2.1), all built on the Euclidean
// distance between objects:
//   kCentroid: distance between the centroids;
//   kWard:     Ward's minimum-variance criterion (the growth of the
//              within-cluster variance when the two are united);
//   kSingle:   smallest distance between any two members;
//   kComplete: largest distance between any two members.
enum class Linkage { kCentroid, kWard, kSingle, kComplete };

const char* LinkageName(Linkage linkage);  // "centroid", "ward", "single", "complete"
absl::StatusOr<Linkage> ParseLinkage(absl::string_view name);

// Clusters the rows of `objects` bottom-up, each step uniting the two closest
// clusters, until `k` clusters remain (fewer rows than k: one cluster per row).
// Returns one label per row in 0..k-1, clusters numbered in the order of their
// first member. Uses the Lance-Williams update on squared Euclidean
// distances, exact for all four linkages, with a cached nearest neighbour per
// row: O(n^2 d) for n rows of d values in the usual case (O(n^3) at worst).
// Ties are broken by the lowest (row, column) pair, so the result is
// deterministic.
std::vector<int> ClusterHierarchical(const Eigen::MatrixXd& objects, int k, Linkage linkage);

}  // namespace sojourn::usage

#endif  // SOJOURN_MODELS_USAGE_CLUSTERING_H_
