#include "common/clock.h"

namespace sojourn {

Clock& Clock::Real() {
  static RealClock* clock = new RealClock();
  return *clock;
}

void RealClock::SleepUntil(absl::Time deadline, absl::Mutex* mu, bool* woken) {
  // The caller holds *mu; *woken is guarded by it and set by whoever wants the
  // sleeper to return early (shutdown).
  mu->AwaitWithDeadline(absl::Condition(woken), deadline);
}

void FakeClock::SleepUntil(absl::Time deadline, absl::Mutex* mu, bool* woken) {
  {
    absl::MutexLock l(&mu_);
    ++sleepers_;
  }
  // Wait (in short real-time slices, never observed by test assertions) until
  // the test has advanced the fake time past the deadline or woke us.
  while (!*woken && Now() < deadline) {
    mu->AwaitWithTimeout(absl::Condition(woken), absl::Milliseconds(1));
  }
  absl::MutexLock l(&mu_);
  --sleepers_;
}

void FakeClock::AwaitSleepers(int n) const {
  absl::MutexLock l(&mu_);
  auto reached = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return sleepers_ >= n; };
  mu_.Await(absl::Condition(&reached));
}

void RunEvery(Clock& clock, absl::Duration every, absl::Mutex* mu, bool* stopping,
              const std::function<void()>& fn) {
  absl::MutexLock l(mu);
  while (!*stopping) {
    mu->Unlock();
    fn();
    mu->Lock();
    clock.SleepUntil(clock.Now() + every, mu, stopping);
  }
}

}  // namespace sojourn
