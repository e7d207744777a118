#include "models/usage/series.h"

#include <cmath>

#include "gtest/gtest.h"

namespace sojourn::usage {
namespace {

HostSample Sample(int64_t t, double cpu, double free_mb) {
  HostSample s;
  s.unix_seconds = t;
  s.cpu_load = cpu;
  s.free_mem_mb = free_mb;
  return s;
}

// Samples land in 5-minute bins counted from the first midnight; several in
// one bin are averaged; memory use is 1 - free / total.
TEST(SeriesTest, ResamplesIntoFiveMinuteBinsFromMidnight) {
  HostTrace t;
  t.host = "h";
  t.period_seconds = 300;
  t.total_mem_mb = 1000;
  const int64_t midnight = 1372636800;
  t.samples = {Sample(midnight + 3600 + 10, 0.2, 750), Sample(midnight + 3600 + 200, 0.4, 250),
               Sample(midnight + 3900 + 5, 0.6, 500)};
  auto s = Resample(t);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->origin_unix, midnight);
  ASSERT_EQ(s->bins(), 14);
  EXPECT_TRUE(std::isnan(s->cpu[11]));
  EXPECT_NEAR(s->cpu[12], 0.3, 1e-12);
  EXPECT_NEAR(s->mem[12], 0.5, 1e-12);
  EXPECT_NEAR(s->cpu[13], 0.6, 1e-12);
  EXPECT_EQ(s->FirstValidBin(Resource::kCpu), 12);
  EXPECT_EQ(s->BinOf(midnight + 3900 + 5), 13);
}

// An hourly probe fills its hour; a missing probe leaves its hour empty (down).
TEST(SeriesTest, HourlySamplesHoldForOnePeriod) {
  HostTrace t;
  t.period_seconds = 3600;
  const int64_t midnight = 931219200;
  t.samples = {Sample(midnight, 0.0, NAN), Sample(midnight + 7200, 0.0, NAN)};
  auto s = Resample(t);
  ASSERT_TRUE(s.ok());
  ASSERT_EQ(s->bins(), 25);
  for (int b = 0; b < 12; ++b) EXPECT_EQ(s->cpu[b], 0.0) << b;
  for (int b = 12; b < 24; ++b) EXPECT_TRUE(std::isnan(s->cpu[b])) << b;
  EXPECT_EQ(s->cpu[24], 0.0);
  EXPECT_TRUE(std::isnan(s->mem[0]));  // no memory data
}

// Days can start at local midnight.
TEST(SeriesTest, UtcOffsetMovesTheOrigin) {
  HostTrace t;
  t.samples = {Sample(1372636800 + 3600, 0.1, 1)};
  ResampleOptions o;
  o.utc_offset_seconds = 2 * 3600;
  auto s = Resample(t, o);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->origin_unix, 1372636800 - 2 * 3600);
}

// An earlier origin (the state manager's kept series, extended with the
// latest samples only) shifts the bins by whole days; an origin that is not a
// local midnight at or before the first sample is refused.
TEST(SeriesTest, AGivenOriginLinesUpWithItsDays) {
  HostTrace t;
  t.period_seconds = 300;
  const int64_t midnight = 1372636800;
  t.samples = {Sample(midnight + 3600, 0.2, 500), Sample(midnight + 3900, 0.4, 250)};
  auto own = Resample(t);
  ResampleOptions o;
  o.utc_offset_seconds = 3600;
  o.origin_unix = midnight - 2 * 86400 - 3600;
  auto early = Resample(t, o);
  ASSERT_TRUE(own.ok() && early.ok()) << early.status();
  EXPECT_EQ(early->origin_unix, midnight - 2 * 86400 - 3600);
  ASSERT_EQ(early->bins(), own->bins() + 2 * 288 + 12);
  for (int64_t b = 0; b < own->bins(); ++b) {
    const size_t k = static_cast<size_t>(b), e = static_cast<size_t>(b + 2 * 288 + 12);
    EXPECT_TRUE(std::isnan(own->cpu[k]) ? std::isnan(early->cpu[e]) : own->cpu[k] == early->cpu[e])
        << b;
  }
  for (int64_t bad : {midnight - 3600 + 86400, midnight - 3600 + 300}) {
    o.origin_unix = bad;
    auto r = Resample(t, o);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(r.status().message().find("local midnight"), std::string::npos);
  }
}

TEST(SeriesTest, RejectsEmptyAndUnorderedTraces) {
  HostTrace t;
  EXPECT_EQ(Resample(t).status().code(), absl::StatusCode::kInvalidArgument);
  t.samples = {Sample(1000, 0.1, 1), Sample(900, 0.1, 1)};
  EXPECT_EQ(Resample(t).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace sojourn::usage
