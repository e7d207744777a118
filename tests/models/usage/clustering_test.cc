#include "models/usage/clustering.h"

#include <algorithm>
#include <limits>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace sojourn::usage {
namespace {

// Three groups of noisy 48-point objects around well separated centres.
Eigen::MatrixXd ThreeGroups(std::vector<int>* truth) {
  std::mt19937 rng(7);
  std::normal_distribution<double> noise(0.0, 0.02);
  const int sizes[3] = {6, 4, 5};
  Eigen::MatrixXd x(15, 48);
  int row = 0;
  for (int g = 0; g < 3; ++g) {
    for (int i = 0; i < sizes[g]; ++i, ++row) {
      for (int c = 0; c < 48; ++c) {
        const double centre = g == 0 ? 0.1 : g == 1 ? (c < 24 ? 0.9 : 0.1) : 0.6;
        x(row, c) = centre + noise(rng);
      }
      truth->push_back(g);
    }
  }
  return x;
}

// True when two labelings define the same partition.
bool SamePartition(const std::vector<int>& a, const std::vector<int>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    for (size_t j = 0; j < a.size(); ++j) {
      if ((a[i] == a[j]) != (b[i] == b[j])) return false;
    }
  }
  return true;
}

// Reference: naive agglomeration recomputing cluster distances from members.
std::vector<int> NaiveCluster(const Eigen::MatrixXd& x, int k, Linkage linkage) {
  std::vector<std::vector<int>> clusters;
  for (int i = 0; i < x.rows(); ++i) clusters.push_back({i});
  auto dist = [&](const std::vector<int>& a, const std::vector<int>& b) {
    switch (linkage) {
      case Linkage::kSingle:
      case Linkage::kComplete: {
        double best = linkage == Linkage::kSingle ? 1e300 : -1;
        for (int i : a)
          for (int j : b) {
            const double d = (x.row(i) - x.row(j)).norm();
            best = linkage == Linkage::kSingle ? std::min(best, d) : std::max(best, d);
          }
        return best;
      }
      case Linkage::kCentroid:
      case Linkage::kWard: {
        Eigen::RowVectorXd ca = Eigen::RowVectorXd::Zero(x.cols()), cb = ca;
        for (int i : a) ca += x.row(i);
        for (int j : b) cb += x.row(j);
        ca /= a.size();
        cb /= b.size();
        const double d2 = (ca - cb).squaredNorm();
        if (linkage == Linkage::kCentroid) return d2;
        // Growth of the within-cluster sum of squares when uniting a and b.
        return d2 * a.size() * b.size() / (a.size() + b.size());
      }
    }
    return 0.0;
  };
  while (static_cast<int>(clusters.size()) > k) {
    size_t bi = 0, bj = 1;
    double best = 1e300;
    for (size_t i = 0; i < clusters.size(); ++i)
      for (size_t j = i + 1; j < clusters.size(); ++j) {
        const double d = dist(clusters[i], clusters[j]);
        if (d < best) {
          best = d;
          bi = i;
          bj = j;
        }
      }
    clusters[bi].insert(clusters[bi].end(), clusters[bj].begin(), clusters[bj].end());
    clusters.erase(clusters.begin() + bj);
  }
  std::vector<int> labels(x.rows());
  for (size_t c = 0; c < clusters.size(); ++c)
    for (int i : clusters[c]) labels[i] = static_cast<int>(c);
  return labels;
}

// Reference: the Lance-Williams agglomeration scanning every pair at every
// step (the O(n^3) form), lowest (row, column) pair on ties.
std::vector<int> FullScanCluster(const Eigen::MatrixXd& x, int k, Linkage linkage) {
  const int n = static_cast<int>(x.rows());
  Eigen::MatrixXd d(n, n);
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j) d(i, j) = (x.row(i) - x.row(j)).squaredNorm();
  std::vector<int> size(n, 1), parent(n);
  std::vector<char> active(n, 1);
  for (int i = 0; i < n; ++i) parent[i] = i;
  for (int clusters = n; clusters > k; --clusters) {
    int bi = -1, bj = -1;
    double best = 1e300;
    for (int i = 0; i < n; ++i)
      for (int j = i + 1; j < n; ++j)
        if (active[i] && active[j] && d(i, j) < best) {
          best = d(i, j);
          bi = i;
          bj = j;
        }
    if (bi < 0) break;
    const double ni = size[bi], nj = size[bj], dij = d(bi, bj);
    for (int m = 0; m < n; ++m) {
      if (!active[m] || m == bi || m == bj) continue;
      const double dim = d(bi, m), djm = d(bj, m), nm = size[m];
      double v = linkage == Linkage::kSingle     ? std::min(dim, djm)
                 : linkage == Linkage::kComplete ? std::max(dim, djm)
                 : linkage == Linkage::kCentroid
                     ? (ni / (ni + nj)) * dim + (nj / (ni + nj)) * djm -
                           (ni * nj / ((ni + nj) * (ni + nj))) * dij
                     : ((ni + nm) * dim + (nj + nm) * djm - nm * dij) / (ni + nj + nm);
      d(bi, m) = d(m, bi) = std::max(0.0, v);
    }
    size[bi] += size[bj];
    active[bj] = 0;
    for (int r = 0; r < n; ++r)
      if (parent[r] == bj) parent[r] = bi;
  }
  std::vector<int> id(n, -1), labels(n);
  int next = 0;
  for (int r = 0; r < n; ++r) {
    if (id[parent[r]] < 0) id[parent[r]] = next++;
    labels[r] = id[parent[r]];
  }
  return labels;
}

class ClusteringTest : public ::testing::TestWithParam<Linkage> {};

// Every linkage recovers three well separated groups.
TEST_P(ClusteringTest, RecoversKnownGroups) {
  std::vector<int> truth;
  const Eigen::MatrixXd x = ThreeGroups(&truth);
  const std::vector<int> labels = ClusterHierarchical(x, 3, GetParam());
  EXPECT_TRUE(SamePartition(labels, truth));
  EXPECT_EQ(std::set<int>(labels.begin(), labels.end()), (std::set<int>{0, 1, 2}));
}

// The Lance-Williams updates agree with recomputing the linkage from the
// members, on random data where the merge order is not obvious.
TEST_P(ClusteringTest, MatchesNaiveRecomputation) {
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  for (int trial = 0; trial < 5; ++trial) {
    Eigen::MatrixXd x(20, 6);
    for (int i = 0; i < x.rows(); ++i)
      for (int j = 0; j < x.cols(); ++j) x(i, j) = u(rng);
    for (int k : {2, 5}) {
      EXPECT_TRUE(
          SamePartition(ClusterHierarchical(x, k, GetParam()), NaiveCluster(x, k, GetParam())))
          << LinkageName(GetParam()) << " trial " << trial << " k " << k;
    }
  }
}

// The cached nearest neighbours give exactly the labels of the full pair
// scan, also on data with many tied distances (small integer coordinates).
TEST_P(ClusteringTest, MatchesFullScanWithTies) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int> u(0, 2);
  for (int trial = 0; trial < 6; ++trial) {
    Eigen::MatrixXd x(70, 3);
    for (int i = 0; i < x.rows(); ++i)
      for (int j = 0; j < x.cols(); ++j) x(i, j) = trial % 2 == 0 ? u(rng) : u(rng) + 0.001 * i;
    for (int k : {1, 4, 12}) {
      EXPECT_EQ(ClusterHierarchical(x, k, GetParam()), FullScanCluster(x, k, GetParam()))
          << LinkageName(GetParam()) << " trial " << trial << " k " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(AllLinkages, ClusteringTest,
                         ::testing::Values(Linkage::kCentroid, Linkage::kWard, Linkage::kSingle,
                                           Linkage::kComplete),
                         [](const auto& info) { return std::string(LinkageName(info.param)); });

// Single and complete linkage differ on a chain: single follows the chain,
// complete splits it.
TEST(ClusteringLinkageTest, SingleChainsCompleteDoesNot) {
  // 1-D points: a chain 0..5 step 1, and a pair at 7.2 / 8.2.
  const double pts[] = {0, 1, 2, 3, 4, 5, 7.2, 8.2};
  Eigen::MatrixXd x(8, 1);
  for (int i = 0; i < 8; ++i) x(i, 0) = pts[i];
  const std::vector<int> single = ClusterHierarchical(x, 2, Linkage::kSingle);
  EXPECT_TRUE(SamePartition(single, {0, 0, 0, 0, 0, 0, 1, 1}));
  const std::vector<int> complete = ClusterHierarchical(x, 2, Linkage::kComplete);
  EXPECT_FALSE(SamePartition(complete, single));
}

// Fewer objects than clusters: each object is its own cluster.
TEST(ClusteringLinkageTest, FewerRowsThanClusters) {
  Eigen::MatrixXd x(3, 4);
  x.setRandom();
  EXPECT_EQ(ClusterHierarchical(x, 5, Linkage::kWard), (std::vector<int>{0, 1, 2}));
  EXPECT_TRUE(ClusterHierarchical(Eigen::MatrixXd(0, 4), 5, Linkage::kWard).empty());
  // A non-finite object (never built by BuildObjects, but the function is
  // public) still gives k clusters, not a crash.
  Eigen::MatrixXd bad = Eigen::MatrixXd::Zero(6, 3);
  for (int i = 0; i < 6; ++i) bad(i, 0) = i;
  bad(2, 1) = std::numeric_limits<double>::quiet_NaN();
  for (Linkage l : {Linkage::kCentroid, Linkage::kWard, Linkage::kSingle, Linkage::kComplete}) {
    const std::vector<int> labels = ClusterHierarchical(bad, 2, l);
    ASSERT_EQ(labels.size(), 6u);
    EXPECT_EQ(std::set<int>(labels.begin(), labels.end()), (std::set<int>{0, 1})) << LinkageName(l);
  }
  // Distances that overflow to inf still merge down to k clusters.
  const Eigen::MatrixXd huge = 1e300 * bad.cwiseMax(0.0).leftCols(1).replicate(1, 3);
  const std::vector<int> labels = ClusterHierarchical(huge, 2, Linkage::kCentroid);
  EXPECT_EQ(std::set<int>(labels.begin(), labels.end()), (std::set<int>{0, 1}));
}

TEST(ClusteringLinkageTest, ParsesNames) {
  EXPECT_EQ(*ParseLinkage("Ward"), Linkage::kWard);
  EXPECT_FALSE(ParseLinkage("average").ok());
}

}  // namespace
}  // namespace sojourn::usage
