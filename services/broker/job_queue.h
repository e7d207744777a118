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

// A running job counts as overdue (sojourn_broker_jobs_overdue) more than
// this long past its start plus its requested time: most schedulers kill a
// job at its requested time, so a finish still not reported an hour later
// was most likely lost, and the job's hosts stay out of rankings meanwhile.
inline constexpr int64_t kOverdueGraceSeconds = 3600;

// How long the running `job` is past its start plus its requested time at
// `now_unix`; 0 for a waiting job, one whose requested time is unknown, and
// one not past it.
int64_t OverdueSeconds(const sojourn::v1::QueuedJob& job, int64_t now_unix);

// When the broker drops a job it has heard nothing of (0 = never): a waiting
// job `waiting_seconds` after its submission; a running job
// `running_seconds` after its start plus its requested time, or after its
// start when that is unknown. Each counts from the time the broker took the
// event instead (QueuedJob.reported_unix_seconds) when that is later: a job
// reported late, with a submit or start time long past, gets the whole
// period from its report. The broker's --expire_waiting_jobs_after_seconds
// and --expire_running_jobs_after_seconds (each 0 or in
// [kMinJobExpirySeconds, kMaxJobExpirySeconds]).
struct JobExpiry {
  int64_t waiting_seconds = 0;
  int64_t running_seconds = 0;
};
inline constexpr int64_t kMinJobExpirySeconds = 3600;
inline constexpr int64_t kMaxJobExpirySeconds = int64_t{3660} * 86400;  // ten years

// The first time at which `job` has expired under `expiry`; nullopt when it
// never does (that expiry is off).
std::optional<int64_t> ExpiresAt(const sojourn::v1::QueuedJob& job, const JobExpiry& expiry);

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

  // The job event of a queue change (Submit, Start, Remove), put in the
  // outbox in the same write as the change: a broker killed after the change,
  // while the event is on its way to the history, still has the event after
  // a restart, and sends it then. The caller sends it at once when nothing
  // is ahead of it in the outbox, and pops it when the history has answered
  // (BrokerService::Forward).
  struct OutboxAppend {
    sojourn::v1::JobEvent event;
    // Set by the change: the event's outbox sequence, or RESOURCE_EXHAUSTED
    // when the outbox was full (see below): the change is made all the same,
    // without the event.
    absl::StatusOr<uint64_t> sequence = absl::UnknownError("no queue change made");
  };

  // Queues `spec` (submit time already resolved, > 0), reported at
  // `now_unix` by the broker's clock. INVALID_ARGUMENT for
  // job_id <= 0, procs outside [1, kMaxJobHosts], or a spec the predictor
  // would refuse (CheckJobSpec: e.g. a requested time above a year, cpu_ratio
  // outside [0, 1]); ALREADY_EXISTS for a job id in the queue;
  // RESOURCE_EXHAUSTED when max_jobs are queued. Nothing changes on error.
  // With `outbox`, its event goes into the outbox in the same write.
  absl::StatusOr<sojourn::v1::QueuedJob> Submit(const sojourn::v1::JobSpec& spec, int64_t now_unix,
                                                OutboxAppend* outbox = nullptr);
  // Marks a waiting job running on `hosts` from `start_unix` (> 0, not
  // before its submit), reported at `now_unix` by the broker's clock. NOT_FOUND for a job not
  // queued, FAILED_PRECONDITION for one already running, INVALID_ARGUMENT for hosts that are empty,
  // repeated, or not exactly procs of them. `outbox` as for Submit.
  absl::StatusOr<sojourn::v1::QueuedJob> Start(int64_t job_id, int64_t start_unix,
                                               const std::vector<std::string>& hosts,
                                               int64_t now_unix, OutboxAppend* outbox = nullptr);
  // Removes a job (NOT_FOUND when not queued) and returns it. `outbox` as
  // for Submit.
  absl::StatusOr<sojourn::v1::QueuedJob> Remove(int64_t job_id, OutboxAppend* outbox = nullptr);
  // Removes every job that has expired at `now_unix` under `expiry`
  // (ExpiresAt(job) <= now_unix) and appends a JobCancelled of each to the
  // outbox, in one write (beyond the outbox's limit if need be: each was a
  // queued job), so that the history gets the cancel after every event of the
  // job and before any later one. Returns them, waiting jobs in queue order,
  // then running jobs by start. Nothing changes on error.
  absl::StatusOr<std::vector<sojourn::v1::QueuedJob>> RemoveExpired(int64_t now_unix,
                                                                    const JobExpiry& expiry);
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

  // The outbox: job events the job history has not taken yet, oldest first,
  // kept in the same database so a restarted broker still sends them
  // (BrokerService::FlushJobHistory): each queue change's event until the
  // history answered it, and those it could not take (the predictor was
  // unreachable). At most 10 x max_jobs events: beyond them a queue change
  // keeps no event (OutboxAppend::sequence is RESOURCE_EXHAUSTED), except the
  // cancels of RemoveExpired.
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
  // Writes the job's record (`entry`; null = deleted) and, with `outbox`
  // and room in the outbox, its event, in one write; then adds the event to
  // the outbox in memory and sets its sequence. Nothing changes on error.
  absl::Status Persist(int64_t job_id, const Entry* entry, OutboxAppend* outbox)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

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
