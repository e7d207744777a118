// WindowSurvived: a window's outcome from its host's state intervals
// (GetStateIntervals over it, through the host's silence).
#include "services/predictor/availability_scorer.h"

#include <initializer_list>
#include <tuple>

#include "gtest/gtest.h"

namespace sojourn::predictor {
namespace {

constexpr int64_t kStart = 1700000000;
constexpr int64_t kStep = 300;

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
  EXPECT_EQ(WindowSurvived(s, kStart, end), true);
}

TEST(WindowSurvivedTest, AFailureStateInTheWindowFailsIt) {
  const int64_t end = kStart + 3600;
  for (auto failure :
       {sojourn::v1::HOST_STATE_S3_OVERLOADED, sojourn::v1::HOST_STATE_S4_MEMORY_THRASHING,
        sojourn::v1::HOST_STATE_S5_REVOKED}) {
    auto s = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart, kStart + 1200},
                     {failure, kStart + 1200, kStart + 1500},
                     {sojourn::v1::HOST_STATE_S1_IDLE, kStart + 1500, end}});
    EXPECT_EQ(WindowSurvived(s, kStart, end), false) << failure;
  }
  // One starting at the end is after the window.
  auto after = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart, end},
                       {sojourn::v1::HOST_STATE_S3_OVERLOADED, end, end + kStep}});
  EXPECT_EQ(WindowSurvived(after, kStart, end), true);
}

// States that stop before the end (a state manager that does not report
// the host's silence, or a window not over yet) say nothing.
TEST(WindowSurvivedTest, StatesThatStopBeforeTheEndAreUnknown) {
  const int64_t end = kStart + 3600;
  auto short_of_it = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart, end - 1}});
  EXPECT_EQ(WindowSurvived(short_of_it, kStart, end), std::nullopt);
  // A failure before they stop still fails it.
  auto failed = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart, kStart + 600},
                        {sojourn::v1::HOST_STATE_S5_REVOKED, kStart + 600, kStart + 900}});
  EXPECT_EQ(WindowSurvived(failed, kStart, end), false);
}

// No states from the window's start (history cut by retention, or none):
// nothing to score.
TEST(WindowSurvivedTest, NoStatesFromTheStartIsUnknown) {
  const int64_t end = kStart + 3600;
  EXPECT_EQ(WindowSurvived(States({}), kStart, end), std::nullopt);
  auto late = States({{sojourn::v1::HOST_STATE_S1_IDLE, kStart + kStep + 1, end}});
  EXPECT_EQ(WindowSurvived(late, kStart, end), std::nullopt);
}

}  // namespace
}  // namespace sojourn::predictor
