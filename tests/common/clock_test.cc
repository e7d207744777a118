#include "common/clock.h"

#include <thread>

#include "gtest/gtest.h"

namespace sojourn {
namespace {

struct Calls {
  absl::Mutex mu;
  int count ABSL_GUARDED_BY(mu) = 0;
  int want = 0;
  bool Reached() const ABSL_SHARED_LOCKS_REQUIRED(mu) { return count >= want; }
  // Waits until `n` calls were made (at most `timeout`); the count then.
  int Await(int n, absl::Duration timeout = absl::InfiniteDuration()) {
    absl::MutexLock l(&mu);
    want = n;
    mu.AwaitWithTimeout(absl::Condition(this, &Calls::Reached), timeout);
    return count;
  }
};

// RunEvery calls its function at once, again only once the clock has moved
// on by the period, never with the lock held, and returns when told to stop,
// also in the middle of a sleep.
TEST(RunEveryTest, CallsAtOnceThenEveryPeriodUntilStopped) {
  FakeClock clock(absl::FromUnixSeconds(1000));
  absl::Mutex mu;
  bool stopping = false;
  Calls calls;
  std::thread loop([&] {
    RunEvery(clock, absl::Seconds(60), &mu, &stopping, [&] {
      EXPECT_TRUE(mu.TryLock());  // not held by the loop
      mu.Unlock();
      absl::MutexLock l(&calls.mu);
      ++calls.count;
    });
  });
  EXPECT_EQ(calls.Await(1), 1);
  // Asleep, its deadline taken: an Advance before it would move the
  // deadline (it hung for ctest's timeout under load).
  clock.AwaitSleepers(1);
  clock.Advance(absl::Seconds(30));
  // Half a period on, no second call (a bounded wait for one that must not
  // come; it cannot pass by timing out early).
  EXPECT_EQ(calls.Await(2, absl::Milliseconds(50)), 1);
  clock.Advance(absl::Seconds(30));
  EXPECT_EQ(calls.Await(2), 2);
  clock.AwaitSleepers(1);
  {
    absl::MutexLock l(&mu);
    stopping = true;  // while it sleeps: it returns without another call
  }
  loop.join();
  EXPECT_EQ(calls.Await(2), 2);
}

}  // namespace
}  // namespace sojourn
