#include "models/usage/patterns.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "gtest/gtest.h"
#include "tests/models/usage/synthetic.h"

namespace sojourn::usage {
namespace {

using testing::MakeSeries;
using testing::Office;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// One 48 h object per midnight, overlapping by a day; variational objects
// have mean zero and pure ones keep their level.
TEST(PatternsTest, BuildsOverlappingObjectsAndNormalises) {
  const UsageSeries s = MakeSeries(
      5, [](int d, int) { return 0.1 * (d + 1); }, [](int, int) { return 0.5; });
  PatternOptions pure;
  pure.normalization = Normalization::kPure;
  std::vector<int> days;
  const Eigen::MatrixXd objects = BuildObjects(s, Resource::kCpu, pure, s.bins(), &days);
  ASSERT_EQ(objects.rows(), 4);  // days 0-1, 1-2, 2-3, 3-4
  EXPECT_EQ(days, (std::vector<int>{0, 1, 2, 3}));
  EXPECT_NEAR(objects(1, 0), 0.2, 1e-12);
  EXPECT_NEAR(objects(1, kBinsPerDay), 0.3, 1e-12);
  PatternOptions var;
  const Eigen::MatrixXd v = BuildObjects(s, Resource::kCpu, var, s.bins());
  for (int r = 0; r < v.rows(); ++r) EXPECT_NEAR(v.row(r).mean(), 0.0, 1e-12);
  EXPECT_NEAR(v(1, 0), -0.05, 1e-12);
}

// Objects with down-time are dropped, or kept with 100 % use.
TEST(PatternsTest, DowntimeDiscardedOrFullUse) {
  UsageSeries s = MakeSeries(
      6, [](int, int) { return 0.2; }, [](int, int) { return 0.2; });
  s.cpu[3 * kBinsPerDay + 10] = kNaN;  // day 3 has a missing bin
  PatternOptions o;
  o.normalization = Normalization::kPure;
  o.downtime = DowntimePolicy::kDiscard;
  std::vector<int> days;
  BuildObjects(s, Resource::kCpu, o, s.bins(), &days);
  EXPECT_EQ(days, (std::vector<int>{0, 1, 4}));  // objects 2-3 and 3-4 dropped
  o.downtime = DowntimePolicy::kFullUse;
  const Eigen::MatrixXd full = BuildObjects(s, Resource::kCpu, o, s.bins(), &days);
  ASSERT_EQ(full.rows(), 5);
  EXPECT_DOUBLE_EQ(full(3, 10), 1.0);                // object of day 3, first half
  EXPECT_DOUBLE_EQ(full(2, kBinsPerDay + 10), 1.0);  // object of day 2, second half
}

// Four kinds of 48 h object (weekday/weekend pairs) give four classes whose
// sizes are the numbers of such pairs; the prototypes are their profiles.
TEST(PatternsTest, RecoversWeekdayWeekendClasses) {
  const int days = 28;
  const UsageSeries s = MakeSeries(
      days, [](int d, int b) { return Office(d, b); }, [](int, int) { return 0.3; });
  for (Linkage l : {Linkage::kCentroid, Linkage::kWard, Linkage::kSingle, Linkage::kComplete}) {
    PatternOptions o;
    o.clusters = 4;
    o.linkage = l;
    o.normalization = Normalization::kPure;
    auto p = AnalysePatterns(s, Resource::kCpu, o, s.UnixOfBin(s.bins()));
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->objects, days - 1);
    std::vector<int> sizes = p->cluster_sizes;
    std::sort(sizes.begin(), sizes.end());
    // Of 27 day pairs: weekday-weekday 16, weekday-weekend 4, weekend-weekend 4, weekend-weekday 3.
    EXPECT_EQ(sizes, (std::vector<int>{3, 4, 4, 16})) << LinkageName(l);
    for (const auto& proto : p->prototypes) {
      // Every prototype is an exact office profile: 0.05 at 3:00 of both days.
      EXPECT_NEAR(proto[3 * kBinsPerHour], 0.05, 1e-9);
      EXPECT_NEAR(proto[kBinsPerDay + 3 * kBinsPerHour], 0.05, 1e-9);
    }
  }
}

// Training stops at until_unix; no complete object is an error.
TEST(PatternsTest, RespectsTrainingEnd) {
  const UsageSeries s = MakeSeries(
      10, [](int d, int b) { return Office(d, b); }, [](int, int) { return 0.3; });
  auto p = AnalysePatterns(s, Resource::kCpu, {}, s.UnixOfBin(5 * kBinsPerDay));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->objects, 4);
  auto none = AnalysePatterns(s, Resource::kCpu, {}, s.UnixOfBin(kBinsPerDay));
  EXPECT_EQ(none.status().code(), absl::StatusCode::kFailedPrecondition);
  PatternOptions bad;
  bad.clusters = 0;
  EXPECT_EQ(AnalysePatterns(s, Resource::kCpu, bad, s.UnixOfBin(s.bins())).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// The serialized form round-trips and rejects damaged input.
TEST(PatternsTest, SerializationRoundTrips) {
  const UsageSeries s = MakeSeries(
      12, [](int d, int b) { return Office(d, b); },
      [](int d, int b) { return 0.2 + 0.1 * Office(d, b); });
  HostPatterns h = AnalyseHost(s, {}, s.UnixOfBin(s.bins()), 7);
  ASSERT_FALSE(h.cpu.empty());
  ASSERT_FALSE(h.mem_backtest.empty());
  EXPECT_LT(h.cpu_backtest.objects, h.cpu.objects);
  const std::string bytes = h.Serialize();
  auto back = HostPatterns::Parse(bytes);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->cpu.prototypes, h.cpu.prototypes);
  EXPECT_EQ(back->mem.cluster_sizes, h.mem.cluster_sizes);
  EXPECT_EQ(back->cpu_backtest.trained_until_unix, h.cpu_backtest.trained_until_unix);
  EXPECT_EQ(back->mem.resource, Resource::kMemory);
  EXPECT_EQ(back->cpu.residual_phi, h.cpu.residual_phi);
  EXPECT_EQ(back->cpu.residual_pairs, h.cpu.residual_pairs);
  EXPECT_GT(h.cpu.residual_pairs, 0);
  EXPECT_FALSE(HostPatterns::Parse(bytes.substr(0, bytes.size() - 3)).ok());
  EXPECT_FALSE(UsagePatterns::Parse("garbage").ok());
}

// Patterns stored before the residual coefficient existed (format version 1)
// still load, with residual_phi = 0 (the paper's forecast).
TEST(PatternsTest, ReadsVersionOnePatterns) {
  auto u32 = [](std::string* o, uint32_t v) {
    for (int i = 0; i < 4; ++i) o->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  auto u64 = [](std::string* o, uint64_t v) {
    for (int i = 0; i < 8; ++i) o->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  };
  // SJUP version 1: header, one prototype of 576 bins, nothing after it.
  std::string v1("SJUP");
  u32(&v1, 1);            // version
  u32(&v1, 0);            // resource cpu
  u32(&v1, 5);            // clusters
  u32(&v1, 0);            // centroid
  u32(&v1, 1);            // variational
  u32(&v1, 0);            // discard
  u64(&v1, 1372636800);   // trained until
  u32(&v1, 9);            // objects
  u32(&v1, 1);            // k
  u32(&v1, 9);            // cluster size
  u32(&v1, kObjectBins);  // bins
  const double x = 0.25;
  uint64_t bits;
  std::memcpy(&bits, &x, 8);
  for (int i = 0; i < kObjectBins; ++i) u64(&v1, bits);
  auto p = UsagePatterns::Parse(v1);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->residual_phi, 0.0);
  EXPECT_EQ(p->residual_pairs, 0);
  EXPECT_EQ(p->objects, 9);
  EXPECT_EQ(p->prototypes[0][100], 0.25);
  EXPECT_EQ(p->trained_until_unix, 1372636800);
  // Inside a host envelope (unchanged, version 1), as the statemgr stored it.
  std::string host("SJHP");
  u32(&host, 1);
  for (int m = 0; m < 4; ++m) {
    u32(&host, static_cast<uint32_t>(m == 0 ? v1.size() : 0));
    if (m == 0) host += v1;
  }
  auto h = HostPatterns::Parse(host);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->cpu.residual_phi, 0.0);
  EXPECT_TRUE(h->mem.empty());
  // A version-1 blob with trailing bytes is still rejected.
  EXPECT_FALSE(UsagePatterns::Parse(v1 + "x").ok());
  // The current form re-encodes it with the residual fields.
  UsagePatterns q = *p;
  q.residual_phi = 0.8;
  q.residual_pairs = 1234;
  q.residual_phi_by_step = {0.8, 0.7, 0.65};
  auto back = UsagePatterns::Parse(q.Serialize());
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->residual_phi, 0.8);
  EXPECT_EQ(back->residual_pairs, 1234);
  EXPECT_EQ(back->residual_phi_by_step, q.residual_phi_by_step);
  q.residual_phi = 1.5;
  EXPECT_FALSE(UsagePatterns::Parse(q.Serialize()).ok());
}

}  // namespace
}  // namespace sojourn::usage
