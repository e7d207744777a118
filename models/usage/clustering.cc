#include "models/usage/clustering.h"

#include <algorithm>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace sojourn::usage {

const char* LinkageName(Linkage linkage) {
  switch (linkage) {
    case Linkage::kCentroid:
      return "centroid";
    case Linkage::kWard:
      return "ward";
    case Linkage::kSingle:
      return "single";
    case Linkage::kComplete:
      return "complete";
  }
  return "?";
}

absl::StatusOr<Linkage> ParseLinkage(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  for (Linkage l : {Linkage::kCentroid, Linkage::kWard, Linkage::kSingle, Linkage::kComplete}) {
    if (n == LinkageName(l)) return l;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown linkage '", name, "' (centroid, ward, single or complete)"));
}

std::vector<int> ClusterHierarchical(const Eigen::MatrixXd& objects, int k, Linkage linkage) {
  const int n = static_cast<int>(objects.rows());
  std::vector<int> labels(n, 0);
  if (n == 0) return labels;
  k = std::max(1, k);

  // Squared Euclidean distances from the Gram matrix.
  const Eigen::VectorXd sq = objects.rowwise().squaredNorm();
  Eigen::MatrixXd d = -2.0 * (objects * objects.transpose());
  d.colwise() += sq;
  d.rowwise() += sq.transpose();
  d = d.cwiseMax(0.0);

  std::vector<int> size(n, 1);
  std::vector<int> parent(n);  // cluster representative of each row
  for (int i = 0; i < n; ++i) parent[i] = i;
  std::vector<char> active(n, 1);
  int clusters = n;
  // Each active row i caches its nearest active row j > i (lowest j on ties)
  // and that distance, so a step scans n cached minima instead of n^2 / 2
  // distances; after a merge only the rows whose cached neighbour was one of
  // the two merged clusters, or that are now closer to the merged one, change
  // (the "generic" scheme of Muellner, arXiv:1109.2378, with a linear scan in
  // place of the priority queue). Typically O(n^2) instead of O(n^3); the
  // merges, and so the labels, are exactly those of the full scan (lowest
  // (row, column) pair on ties).
  constexpr double kInf = std::numeric_limits<double>::infinity();
  std::vector<int> nn(n, -1);
  std::vector<double> nn_dist(n, kInf);
  auto nearest = [&](int i) {
    nn[i] = -1;
    nn_dist[i] = kInf;
    const double* col = d.col(i).data();  // symmetric: column i == row i
    for (int j = i + 1; j < n; ++j) {
      if (active[j] && (nn[i] < 0 || col[j] < nn_dist[i])) {
        nn_dist[i] = col[j];
        nn[i] = j;
      }
    }
  };
  for (int i = 0; i < n; ++i) nearest(i);
  while (clusters > k) {
    int bi = -1;
    double best = kInf;
    for (int i = 0; i < n; ++i) {
      // (bi < 0 ||: a pair is taken even if every distance overflowed to inf.)
      if (active[i] && nn[i] >= 0 && (bi < 0 || nn_dist[i] < best)) {
        best = nn_dist[i];
        bi = i;
      }
    }
    const int bj = nn[bi];
    // Unite bj into bi; Lance-Williams update of the distances to bi.
    const double ni = size[bi], nj = size[bj], dij = d(bi, bj);
    for (int m = 0; m < n; ++m) {
      if (!active[m] || m == bi || m == bj) continue;
      const double dim = d(bi, m), djm = d(bj, m), nm = size[m];
      double v = 0;
      switch (linkage) {
        case Linkage::kSingle:
          v = std::min(dim, djm);
          break;
        case Linkage::kComplete:
          v = std::max(dim, djm);
          break;
        case Linkage::kCentroid: {
          const double t = ni + nj;
          v = (ni / t) * dim + (nj / t) * djm - (ni * nj / (t * t)) * dij;
          break;
        }
        case Linkage::kWard: {
          const double t = ni + nj + nm;
          v = ((ni + nm) * dim + (nj + nm) * djm - nm * dij) / t;
          break;
        }
      }
      d(bi, m) = d(m, bi) = std::max(0.0, v);
    }
    size[bi] += size[bj];
    active[bj] = 0;
    for (int i = 0; i < bj; ++i) {
      if (!active[i] || i == bi) continue;
      if (nn[i] == bj || (i < bi && nn[i] == bi)) {
        nearest(i);
      } else if (i < bi && (d(i, bi) < nn_dist[i] || (d(i, bi) == nn_dist[i] && bi < nn[i]))) {
        nn[i] = bi;
        nn_dist[i] = d(i, bi);
      }
    }
    nearest(bi);
    for (int r = 0; r < n; ++r) {
      if (parent[r] == bj) parent[r] = bi;
    }
    --clusters;
  }
  std::vector<int> id(n, -1);
  int next = 0;
  for (int r = 0; r < n; ++r) {
    if (id[parent[r]] < 0) id[parent[r]] = next++;
    labels[r] = id[parent[r]];
  }
  return labels;
}

}  // namespace sojourn::usage
