// Buffers samples of one host and streams them to its state manager with
// PushSamples. A sample leaves the buffer only once the state manager has
// acknowledged it as persisted; while the state manager is unreachable the
// sender backs off exponentially (1 s doubling to 60 s) and keeps buffering
// (up to max_buffer samples; when full, the oldest sixteenth is dropped at
// once). With a spool
// file, every buffered sample is also appended to it and the file is
// rewritten with what is left after each acknowledgement, so samples taken
// while the state manager is down survive a restart of the monitor too.
#ifndef SOJOURN_SERVICES_MONITOR_SAMPLE_SENDER_H_
#define SOJOURN_SERVICES_MONITOR_SAMPLE_SENDER_H_

#include <deque>
#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/host_sample.h"
#include "common/tls.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::monitor {

struct SenderConfig {
  std::string host;
  std::string statemgr_address;
  // Sent in every message of every stream (they replace the stored ones).
  sojourn::v1::HostAttributes attributes;
  int64_t period_seconds = 6;
  size_t max_buffer = 200000;
  size_t batch_size = 2000;
  absl::Duration min_backoff = absl::Seconds(1);
  absl::Duration max_backoff = absl::Seconds(60);
  // Spool file for unacknowledged samples (empty = memory only). Loaded by
  // the constructor: lines that do not parse, values the state manager
  // would refuse (SampleProblem) and times more than max_spool_future after
  // the clock are moved to <spool_path>.rejected with a WARNING, never
  // dropped silently; the rest is put in time order (duplicate times once).
  std::string spool_path;
  absl::Duration max_spool_future = absl::Hours(24);
  // TLS to the state manager (common/tls.h); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

// Thread-safe.
class SampleSender {
 public:
  SampleSender(const SenderConfig& config, Clock& clock);

  // Buffers `sample` in time order (a clock stepped back inserts it before
  // later ones; a time already buffered is dropped as a duplicate), so a
  // batch never holds out-of-order samples the state manager would refuse.
  void Add(const HostSample& sample);
  // Sends every buffered sample in one stream now, ignoring the backoff. On
  // failure, the state manager's status code (UNAVAILABLE when unreachable).
  absl::Status Flush();
  // Flushes unless a previous failure's backoff has not yet passed. Returns
  // the flush status (OK when skipped).
  absl::Status MaybeFlush();

  size_t unacknowledged() const;
  // Samples loaded from the spool file at construction.
  size_t restored() const { return restored_; }
  // Spool lines moved to <spool_path>.rejected at construction.
  size_t rejected() const { return rejected_; }
  int64_t acknowledged() const;
  bool connected() const;
  // Spool writes that failed (a full or read-only disk): logged once per run
  // of failures, the samples kept in memory.
  size_t spool_write_errors() const;
  const SenderConfig& config() const { return config_; }

 private:
  // Rewrites the spool with the buffer (after an acknowledgement).
  void RewriteSpool() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the spool into buffer_ (constructor).
  void LoadSpool() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SpoolWriteFailed(const std::string& what) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void SpoolWriteSucceeded() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const SenderConfig config_;
  size_t restored_ = 0;
  size_t rejected_ = 0;
  Clock& clock_;
  std::unique_ptr<sojourn::v1::StateManager::Stub> stub_;
  absl::Mutex flush_mu_;  // one stream at a time
  mutable absl::Mutex mu_;
  std::deque<HostSample> buffer_ ABSL_GUARDED_BY(mu_);
  size_t spool_write_errors_ ABSL_GUARDED_BY(mu_) = 0;
  bool spool_failing_ ABSL_GUARDED_BY(mu_) = false;
  int64_t acknowledged_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t dropped_full_ ABSL_GUARDED_BY(mu_) = 0;  // dropped because the buffer was full
  bool connected_ ABSL_GUARDED_BY(mu_) = false;
  absl::Duration backoff_ ABSL_GUARDED_BY(mu_) = absl::ZeroDuration();
  absl::Time next_try_ ABSL_GUARDED_BY(mu_) = absl::InfinitePast();
};

}  // namespace sojourn::monitor

#endif  // SOJOURN_SERVICES_MONITOR_SAMPLE_SENDER_H_
