// Time source injected into every component that reads the time, so tests
// drive heartbeats, sampling periods and expiry with a fake clock instead of
// sleeping (cf. envoy/common/time.h TimeSource).
#ifndef SOJOURN_COMMON_CLOCK_H_
#define SOJOURN_COMMON_CLOCK_H_

#include <functional>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace sojourn {

// A Clock is safe for concurrent use from multiple threads.
class Clock {
 public:
  virtual ~Clock() = default;
  virtual absl::Time Now() const = 0;
  // Blocks until Now() >= deadline or Wake() is called; returns Now().
  // RealClock waits on the wall clock; FakeClock returns when the test
  // advances time past the deadline.
  virtual void SleepUntil(absl::Time deadline, absl::Mutex* mu, bool* woken) = 0;

  // The process-wide wall clock.
  static Clock& Real();
};

// Wall clock.
class RealClock final : public Clock {
 public:
  absl::Time Now() const override { return absl::Now(); }
  void SleepUntil(absl::Time deadline, absl::Mutex* mu, bool* woken) override;
};

// A clock that only moves when a test calls Advance()/Set().
class FakeClock final : public Clock {
 public:
  explicit FakeClock(absl::Time start = absl::FromUnixSeconds(1'700'000'000)) : now_(start) {}
  absl::Time Now() const override {
    absl::MutexLock l(&mu_);
    return now_;
  }
  void Advance(absl::Duration d) {
    absl::MutexLock l(&mu_);
    now_ += d;
  }
  void Set(absl::Time t) {
    absl::MutexLock l(&mu_);
    now_ = t;
  }
  void SleepUntil(absl::Time deadline, absl::Mutex* mu, bool* woken) override;
  // Waits until `n` threads are in SleepUntil: their deadlines are fixed,
  // so a test's Advance after it is measured against them (one before it
  // could move a deadline that was yet to be taken from Now()).
  void AwaitSleepers(int n) const;

 private:
  mutable absl::Mutex mu_;
  absl::Time now_ ABSL_GUARDED_BY(mu_);
  int sleepers_ ABSL_GUARDED_BY(mu_) = 0;
};

// The loop of a service's background thread: calls `fn`, then sleeps `every`
// on `clock` and calls it again, until `*stopping` (guarded by `mu`) is set,
// which also ends the sleep. `fn` runs without `mu` held, the first time at
// once.
void RunEvery(Clock& clock, absl::Duration every, absl::Mutex* mu, bool* stopping,
              const std::function<void()>& fn);

}  // namespace sojourn

#endif  // SOJOURN_COMMON_CLOCK_H_
