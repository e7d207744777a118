// A fixed pool of worker threads for blocking or CPU-heavy work that must not
// run on gRPC's callback threads (STYLE.md "Ownership and threads").
#ifndef SOJOURN_COMMON_THREAD_POOL_H_
#define SOJOURN_COMMON_THREAD_POOL_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace sojourn {

// Most worker threads a service flag (--threads, --fanout_threads) may ask
// for: beyond it thread creation fails (an uncaught std::system_error at
// start-up) long before the pool would help.
inline constexpr int kMaxServiceThreads = 1024;

// Safe for concurrent Schedule() calls. The destructor runs every task
// already scheduled, then joins the workers.
class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  void Schedule(std::function<void()> task);

 private:
  void Work();
  absl::Mutex mu_;
  std::deque<std::function<void()>> tasks_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace sojourn

#endif  // SOJOURN_COMMON_THREAD_POOL_H_
