// HistDB (paper 002, section 4.1, Fig. 3): the job-history repository of the
// Historical and Hybrid kernels. Records are indexed per template (see
// TemplateKey): an estimate reads only the records of the job's own
// application (or of the coarser template it falls back to), newest first,
// never the whole store.
//
// Implementations: InMemoryHistDb (tests, evaluation) and RocksHistDb
// (hist_db_rocksdb.h, the predictor's persistent store).
#ifndef SOJOURN_MODELS_TURNAROUND_HIST_DB_H_
#define SOJOURN_MODELS_TURNAROUND_HIST_DB_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "models/turnaround/job.h"

namespace sojourn::turnaround {

// One page of HistDb::Scan.
struct HistoryPage {
  std::vector<JobRecord> records;
  // The cursor of the next page; empty after the last record.
  std::string next_cursor;
};

// A HistDb is safe for concurrent use from multiple threads.
class HistDb {
 public:
  virtual ~HistDb() = default;

  // Appends a finished job's record and indexes it under every template level.
  virtual absl::Status Put(const JobRecord& record) = 0;

  // Appends `records` in order, as many Put() calls would, all or none (an
  // imported log: `sojourn import-jobs`). A non-empty `batch_id` is kept with
  // them: a later call with the same id writes nothing and returns false, so
  // that a batch sent again (a retried or repeated import) is not recorded
  // twice. True when the records were written.
  virtual absl::StatusOr<bool> PutBatch(const std::vector<JobRecord>& records,
                                        const std::string& batch_id) = 0;

  // The newest `limit` records of template `key`, newest first.
  virtual absl::StatusOr<std::vector<JobRecord>> Recent(const TemplateKey& key, int limit) const = 0;

  // Running sums over template `key` (all zero when it has no record).
  virtual absl::StatusOr<TemplateStats> Stats(const TemplateKey& key) const = 0;

  // Number of finished-job records.
  virtual int64_t size() const = 0;

  // Every finished-job record once, a page at a time (reading the whole
  // history out: `sojourn export-jobs`): at most `limit` (>= 1) records
  // after `cursor` ("" = from the first; else an earlier page's next_cursor,
  // a short printable string). The order is the store's, not time order
  // (InMemoryHistDb: as put; RocksHistDb: by application template, newest
  // first within one). A record put while a scan goes on may be in it or
  // not; none is returned twice. InvalidArgument for a cursor that is not of
  // the form this kind of store returns (InMemoryHistDb: also one past the
  // end).
  virtual absl::StatusOr<HistoryPage> Scan(const std::string& cursor, int limit) const = 0;

  // Jobs submitted or running but not finished yet (the queue/cluster state
  // recorded at submit and at start waits here until the job finishes).
  virtual absl::Status PutPending(const JobRecord& record) = 0;
  // NotFound if `job_id` is not pending.
  virtual absl::StatusOr<JobRecord> GetPending(int64_t job_id) const = 0;
  virtual absl::Status ErasePending(int64_t job_id) = 0;
  // A pending job finished: Put(record) and ErasePending(job_id), in one
  // write where the store has writes (RocksHistDb). Two writes, and a store
  // stopped between them, kept the job pending beside its record, and the
  // finish the broker sent again was recorded twice.
  virtual absl::Status PutFinished(const JobRecord& record, int64_t job_id) {
    if (absl::Status s = Put(record); !s.ok()) return s;
    return ErasePending(job_id);
  }
};

// Heap-backed HistDb.
class InMemoryHistDb final : public HistDb {
 public:
  absl::Status Put(const JobRecord& record) override;
  absl::StatusOr<bool> PutBatch(const std::vector<JobRecord>& records,
                                const std::string& batch_id) override;
  absl::StatusOr<std::vector<JobRecord>> Recent(const TemplateKey& key, int limit) const override;
  absl::StatusOr<TemplateStats> Stats(const TemplateKey& key) const override;
  int64_t size() const override;
  absl::StatusOr<HistoryPage> Scan(const std::string& cursor, int limit) const override;
  absl::Status PutPending(const JobRecord& record) override;
  absl::StatusOr<JobRecord> GetPending(int64_t job_id) const override;
  absl::Status ErasePending(int64_t job_id) override;

 private:
  void PutLocked(const JobRecord& record) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  struct Template {
    TemplateStats stats;
    std::vector<uint32_t> records;  // indices into records_, oldest first
  };
  mutable absl::Mutex mu_;
  std::vector<JobRecord> records_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<TemplateKey, Template> templates_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<int64_t, JobRecord> pending_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<std::string> batches_ ABSL_GUARDED_BY(mu_);
};

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_HIST_DB_H_
