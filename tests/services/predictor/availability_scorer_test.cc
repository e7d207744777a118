// WindowSurvived: a window's outcome from its host's state intervals
// (GetStateIntervals over it) and the host's revocation gap.
#include "services/predictor/availability_scorer.h"

#include <initializer_list>
#include <tuple>

#include "gtest/gtest.h"

namespace sojourn::predictor {
namespace {

constexpr int64_t kStart = 1700000000;
constexpr int64_t kStep = 300;
constexpr int64_t kGap = 450;

// Intervals of (state, start, end).
sojourn::v1::GetStateIntervalsResponse States(
    std::initializer_list<std::tuple<sojourn::v1::HostState, int64_t, int64_t>> intervals) {
  sojourn::v1::GetStateIntervalsResponse r;
  r.set_step_seconds(kStep);
  for (const auto& [state, start, end] : intervals) {
    auto* i = r.add_intervals();
    i->set_state(state);
    i->set_start_unix_seconds(start);
    i->set_end_unix_seconds(end);
  }
  return r;
}

TEST(WindowSurvivedTest, UpThroughTheWindow) {
  const int64_t end = kStart + 3600;
  auto s = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart + 200, kStart + 1000},
                   {sojourn::v1::HOST_STATE_S2_BUSY, kStart + 1000, end + 100}});
  EXPECT_EQ(WindowSurvived(s, kStart, end, kGap), true);
}

TEST(WindowSurvivedTest, AFailureStateInTheWindowFailsIt) {
  const int64_t end = kStart + 3600;
  for (auto failure :
       {sojourn::v1::HOST_STATE_S3_OVERLOADED, sojourn::v1::HOST_STATE_S4_MEMORY_THRASHING,
        sojourn::v1::HOST_STATE_S5_REVOKED}) {
    auto s = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart, kStart + 1200},
                     {failure, kStart + 1200, kStart + 1500},
                     {sojourn::v1::HOST_STATE_S1_IDLE, kStart + 1500, end}});
    EXPECT_EQ(WindowSurvived(s, kStart, end, kGap), false) << failure;
  }
  // One starting at the end is after the window.
  auto after = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart, end},
                       {sojourn::v1::HOST_STATE_S3_OVERLOADED, end, end + kStep}});
  EXPECT_EQ(WindowSurvived(after, kStart, end, kGap), true);
}

// The grid ends at the last sample: a host silent for longer than its gap
// before the end was S5 in the window; one whose silence ends after it was
// not (yet).
TEST(WindowSurvivedTest, SilenceLongerThanTheGapBeforeTheEndFailsIt) {
  const int64_t end = kStart + 3600;
  auto long_silence = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart, kStart + 1800}});
  EXPECT_EQ(WindowSurvived(long_silence, kStart, end, kGap), false);
  auto short_silence = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart, end - kGap}});
  EXPECT_EQ(WindowSurvived(short_silence, kStart, end, kGap), true);
  auto just_over = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart, end - kGap - 1}});
  EXPECT_EQ(WindowSurvived(just_over, kStart, end, kGap), false);
}

// No states from the window's start (history cut by retention, or none):
// nothing to score.
TEST(WindowSurvivedTest, NoStatesFromTheStartIsUnknown) {
  const int64_t end = kStart + 3600;
  EXPECT_EQ(WindowSurvived(States({}), kStart, end, kGap), std::nullopt);
  auto late = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart + kStep + 1, end}});
  EXPECT_EQ(WindowSurvived(late, kStart, end, kGap), std::nullopt);
}

}  // namespace
}  // namespace sojourn::predictor
