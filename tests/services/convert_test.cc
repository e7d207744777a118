// Round trip of the window statistics through the statemgr contract
// (services/convert.cc): every age class, the exact-age table and the
// borrowed windows arrive as they left; malformed counts are rejected.
#include "services/convert.h"

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

}  // namespace
}  // namespace sojourn
