// The broker's queue of guest jobs (DESIGN.md, "broker": job queue and job
// events): jobs middleware submitted and has not yet reported finished,
// waiting in submission order or running on named hosts. With a directory it
// is kept in RocksDB, so a restarted broker has the same queue.
//
// The queue also builds the cluster snapshot of the CISNE turnaround kernels
// (paper 002 section 4: the nodes with their local load, the running and the
// waiting jobs) from itself and the host registry; see BuildSnapshot.
#ifndef SOJOURN_SERVICES_BROKER_JOB_QUEUE_H_
#define SOJOURN_SERVICES_BROKER_JOB_QUEUE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "sojourn/v1/broker.pb.h"
#include "sojourn/v1/turnaround.pb.h"

namespace rocksdb {
class DB;
}

namespace sojourn::broker {

// Default of --max_queued_jobs: the predictor simulates at most 10,000 jobs
// per snapshot (services/predictor/turnaround_convert.h).
inline constexpr int kDefaultMaxQueuedJobs = 10000;
// Hosts one job may ask for (one task per host).
inline constexpr int kMaxJobHosts = 100000;

// Thread-safe.
class JobQueue {
 public:
  // An empty `path` keeps the queue in memory only. Otherwise the RocksDB
  // database there is opened (created when missing) and its jobs loaded;
  // FAILED_PRECONDITION for a database that holds something else (another
  // service's store), DATA_LOSS for an unreadable job record.
  static absl::StatusOr<std::unique_ptr<JobQueue>> Open(const std::string& path,
                                                        int max_jobs = kDefaultMaxQueuedJobs);
  ~JobQueue();

  // The database, for online backups (common/db_backup.h); null in memory.
  rocksdb::DB* db() const { return db_.get(); }

  // Queues `spec` (submit time already resolved, > 0). INVALID_ARGUMENT for
  // job_id <= 0, procs outside [1, kMaxJobHosts], or a spec the predictor
  // would refuse (CheckJobSpec: e.g. a requested time above a year, cpu_ratio
  // outside [0, 1]); ALREADY_EXISTS for a job id in the queue;
  // RESOURCE_EXHAUSTED when max_jobs are queued. Nothing changes on error.
  absl::StatusOr<sojourn::v1::QueuedJob> Submit(const sojourn::v1::JobSpec& spec);
  // Marks a waiting job running on `hosts` from `start_unix` (> 0, not
  // before its submit). NOT_FOUND for a job not queued,
  // FAILED_PRECONDITION for one already running, INVALID_ARGUMENT for hosts
  // that are empty, repeated, or not exactly procs of them.
  absl::StatusOr<sojourn::v1::QueuedJob> Start(int64_t job_id, int64_t start_unix,
                                               const std::vector<std::string>& hosts);
  // Removes a job (NOT_FOUND when not queued) and returns it.
  absl::StatusOr<sojourn::v1::QueuedJob> Remove(int64_t job_id);
  absl::StatusOr<sojourn::v1::QueuedJob> Get(int64_t job_id) const;

  struct Listing {
    // In queue (submission) order.
    std::vector<sojourn::v1::QueuedJob> waiting;
    // By start time, then job id.
    std::vector<sojourn::v1::QueuedJob> running;
  };
  Listing List() const;
  // How many jobs wait and run, without copying them.
  struct Counts {
    int waiting = 0;
    int running = 0;
  };
  Counts Count() const;
  bool persistent() const { return db_ != nullptr; }

  // The outbox: job events the job history could not take yet (the
  // predictor was unreachable), oldest first, kept in the same database so a
  // restarted broker still sends them (BrokerService::FlushJobHistory). At
  // most 10 x max_jobs events: AppendOutbox refuses more
  // (RESOURCE_EXHAUSTED), and nothing changes on error.
  absl::Status AppendOutbox(const sojourn::v1::JobEvent& event);
  // The oldest event and its sequence number; nullopt when the outbox is empty.
  std::optional<std::pair<uint64_t, sojourn::v1::JobEvent>> OutboxFront() const;
  // Removes the event of `sequence` (sent, or refused for good).
  absl::Status PopOutbox(uint64_t sequence);
  int OutboxSize() const;

 private:
  struct Entry {
    uint64_t sequence = 0;
    sojourn::v1::QueuedJob job;
  };
  JobQueue(std::unique_ptr<rocksdb::DB> db, int max_jobs);
  absl::Status Persist(int64_t job_id, const Entry* entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<rocksdb::DB> db_;
  const int max_jobs_;
  mutable absl::Mutex mu_;
  std::map<int64_t, Entry> jobs_ ABSL_GUARDED_BY(mu_);
  uint64_t next_sequence_ ABSL_GUARDED_BY(mu_) = 1;
  std::map<uint64_t, sojourn::v1::JobEvent> outbox_ ABSL_GUARDED_BY(mu_);
  uint64_t next_outbox_ ABSL_GUARDED_BY(mu_) = 1;
};

// The snapshot of paper 002's cluster model as the broker sees it at `now`:
// one node per host that is live or runs a queued job (sorted by name, listed
// in `node_hosts`), with the owner's load the host last reported
// (cpu_load_ratio; 0 when never reported) as its local CPU ratio; the running
// jobs on their hosts' nodes; the waiting jobs in queue order, without
// `exclude_job_id` and without those needing more hosts than there are nodes
// (they could never start, and under FCFS would block the queue forever).
// Jobs submitted or started after `now` (a broker clock that went back) are
// left out.
sojourn::v1::ClusterSnapshot BuildSnapshot(int64_t now_unix,
                                           const sojourn::v1::SchedulingPolicy& policy,
                                           const std::vector<sojourn::v1::RegisteredHost>& hosts,
                                           const JobQueue::Listing& jobs, int64_t exclude_job_id,
                                           std::vector<std::string>* node_hosts);

}  // namespace sojourn::broker

#endif  // SOJOURN_SERVICES_BROKER_JOB_QUEUE_H_
