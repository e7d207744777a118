// Round trip of the window statistics through the statemgr contract
// (services/convert.cc): every age class, the exact-age table and the
// borrowed windows arrive as they left; malformed counts are rejected.
#include "services/convert.h"

#include <limits>
#include <vector>

#include "gtest/gtest.h"

namespace sojourn {
namespace {

using availability::HostState;

availability::SojournStats SampleStats() {
  using S = HostState;
  const std::vector<S> fail = {S::kS1, S::kS2, S::kS2, S::kS3};
  const std::vector<S> live = {S::kS2, S::kS2, S::kS1, S::kS1};
  availability::SojournStats s;
  s.step_seconds = 300;
  availability::AccumulateWindow(fail.data(), fail.size(), 1.0, &s, availability::kAgeRecent, 0);
  availability::AccumulateWindow(live.data(), live.size(), 0.5, &s, availability::kAgeSettled, 80);
  availability::AccumulateWindow(live.data(), live.size(), 2.0, &s, availability::kAgeLong, 400);
  availability::AccumulateWindow(fail.data(), fail.size(), 0.25, &s, -1);
  s.own_up_windows = 3;
  s.own_up_survived = 2;
  availability::SojournStats borrowed;
  availability::AccumulateWindow(fail.data(), fail.size(), 0.25, &borrowed, availability::kAgeLong);
  s.borrowed.push_back(borrowed);
  s.num_windows += borrowed.num_windows;
  return s;
}

TEST(ConvertTest, SojournStatsRoundTripKeepsEveryAgeClass) {
  const availability::SojournStats s = SampleStats();
  ASSERT_FALSE(s.first_by_age[availability::kAgeLong][2].empty());
  ASSERT_GT(s.initial_by_age[availability::kAgeLong][2], 0);
  const absl::StatusOr<availability::SojournStats> back = FromProto(ToProto(s));
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_TRUE(*back == s);
  EXPECT_DOUBLE_EQ(back->initial_by_age[availability::kAgeLong][2], 2.0);
  EXPECT_DOUBLE_EQ(back->initial_by_age[availability::kAgeSettled][2], 0.5);
  EXPECT_DOUBLE_EQ(back->initial_by_age[availability::kAgeRecent][1], 1.0);
  EXPECT_EQ(back->first_by_exact_age[2].count(400), 1u);
  // Dropping the long class on the wire would be noticed.
  v1::SojournStats p = ToProto(s);
  p.clear_initial_weight_long();
  EXPECT_FALSE(*FromProto(p) == s);
}

TEST(ConvertTest, RejectsUnknownAgeClass) {
  v1::SojournStats p = ToProto(SampleStats());
  ASSERT_GT(p.sojourns_size(), 0);
  v1::SojournCount* c = nullptr;
  for (v1::SojournCount& x : *p.mutable_sojourns()) {
    if (x.age_class() == 4) c = &x;
  }
  ASSERT_NE(c, nullptr);  // the long class travels as age_class 4
  c->set_age_class(5);
  const absl::StatusOr<availability::SojournStats> back = FromProto(p);
  ASSERT_FALSE(back.ok());
  EXPECT_EQ(back.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(back.status().message().find("age class"), std::string::npos);
  // An age class on an ordinary (not first) sojourn is malformed too.
  c->set_age_class(4);
  c->set_first_in_window(false);
  EXPECT_FALSE(FromProto(p).ok());
  p.add_initial_weight_long(1.0);
  for (int i = 0; i < 6; ++i) p.add_initial_weight_long(1.0);
  c->set_first_in_window(true);
  EXPECT_FALSE(FromProto(p).ok());  // more than 6 long-class weights
}

TEST(ConvertTest, BandExposureRoundTripsAndRejectsBadCounts) {
  availability::BandExposure e;
  e.observed[1][0][1][1] = 144;
  e.expected[1][0][1][1] = 92.5;
  e.observed[0][1][0][0] = 3;
  e.expected[0][1][0][0] = 2.25;
  const v1::BandExposure p = ToProto(e);
  ASSERT_EQ(p.observed_size(), 16);
  // The documented layout: ((day_type * 2 + state) * 2 + band) * 2 + cause.
  EXPECT_EQ(p.observed(((1 * 2 + 0) * 2 + 1) * 2 + 1), 144);
  auto back = FromProto(p);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_DOUBLE_EQ(back->Ratio(1, 0, 1, 1), e.Ratio(1, 0, 1, 1));
  EXPECT_DOUBLE_EQ(back->expected[0][1][0][0], 2.25);
  v1::BandExposure bad = p;
  bad.set_expected(3, -1);
  EXPECT_EQ(FromProto(bad).status().code(), absl::StatusCode::kInvalidArgument);
  bad = p;
  bad.set_observed(0, std::numeric_limits<double>::infinity());
  EXPECT_FALSE(FromProto(bad).ok());
  bad = p;
  bad.add_observed(1);
  EXPECT_FALSE(FromProto(bad).ok());
  EXPECT_EQ(LoadBandToProto(0), v1::LOAD_BAND_LOW);
  EXPECT_EQ(LoadBandToProto(1), v1::LOAD_BAND_HIGH);
  EXPECT_EQ(LoadBandToProto(availability::kLoadBandUnknown), v1::LOAD_BAND_UNKNOWN);
  EXPECT_EQ(LoadBandFromProto(v1::LOAD_BAND_HIGH), 1);
  EXPECT_EQ(LoadBandFromProto(static_cast<v1::LoadBand>(7)), availability::kLoadBandUnknown);
}

}  // namespace
}  // namespace sojourn
