// RocksDB-backed HistDB: job history that survives a predictor restart.
//
// Layout (one column family, all integers big-endian so keys sort):
//   'i' level a b c (~seq)           -> encoded JobRecord, once per template
//                                       level, newest first (denormalized so
//                                       that a template is one sequential scan)
//   's' level a b c                  -> encoded TemplateStats
//   'p' job_id                       -> encoded JobRecord (pending job)
//   'm' "seq"                        -> next sequence number
//   'm' "format"                     -> layout version ("3"; "2" is read and
//                                       marked "3": see kFormat)
//   'm' "batch" id                   -> records written by PutBatch(id) (8 bytes)
// Recent() iterates one template prefix only, so an estimate never reads the
// records of unrelated applications. Template stats an earlier version summed
// from CPU times beyond the run time (TemplateStats::CpuTimesBounded) are
// summed again from the template's 'i' records when first read.
#ifndef SOJOURN_MODELS_TURNAROUND_HIST_DB_ROCKSDB_H_
#define SOJOURN_MODELS_TURNAROUND_HIST_DB_ROCKSDB_H_

#include <memory>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "models/turnaround/hist_db.h"

namespace rocksdb {
class DB;
}

namespace sojourn::turnaround {

struct RocksHistDbOptions {
  // Create the database if `path` does not hold one. Default true.
  bool create_if_missing = true;
  // Block cache in MiB. Default 64.
  int block_cache_mb = 64;
  // Templates whose newest records are kept in memory for Recent() (0 = no
  // cache). Default 4096.
  int recent_cache_templates = 4096;
};

// Thread-safe; one instance per database directory (RocksDB locks it).
class RocksHistDb final : public HistDb {
 public:
  // Opens or creates the store in directory `path`. Unavailable/Internal on
  // RocksDB errors (e.g. the directory is locked by another process);
  // FailedPrecondition if it holds another layout version.
  static absl::StatusOr<std::unique_ptr<RocksHistDb>> Open(const std::string& path,
                                                           const RocksHistDbOptions& options);
  ~RocksHistDb() override;

  // The database itself, for online backups (common/db_backup.h).
  rocksdb::DB* db() const { return db_.get(); }

  absl::Status Put(const JobRecord& record) override;
  // One RocksDB write batch: the records, their templates' sums and the id.
  absl::StatusOr<bool> PutBatch(const std::vector<JobRecord>& records,
                                const std::string& batch_id) override;
  absl::StatusOr<std::vector<JobRecord>> Recent(const TemplateKey& key, int limit) const override;
  absl::StatusOr<TemplateStats> Stats(const TemplateKey& key) const override;
  int64_t size() const override;
  // The cursor is the hexadecimal key of the last record returned, in the
  // index of the finest template level (which holds every record once).
  absl::StatusOr<HistoryPage> Scan(const std::string& cursor, int limit) const override;
  absl::Status PutPending(const JobRecord& record) override;
  absl::StatusOr<JobRecord> GetPending(int64_t job_id) const override;
  absl::Status ErasePending(int64_t job_id) override;
  // One RocksDB write batch.
  absl::Status PutFinished(const JobRecord& record, int64_t job_id) override;

 private:
  RocksHistDb(std::unique_ptr<rocksdb::DB> db, int recent_cache_templates);
  // Put and PutBatch: false, writing nothing, if `batch_id` is not empty and
  // already stored. With `erase_pending` >= 0, that job's pending record
  // goes in the same write (PutFinished).
  absl::StatusOr<bool> WriteLocked(absl::Span<const JobRecord> records, const std::string& batch_id,
                                   int64_t erase_pending = -1) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The stored sums of `key`, or, if CpuTimesBounded() says an earlier
  // version summed an unbounded CPU time into them, RebuildStatsLocked(key).
  absl::StatusOr<TemplateStats> StatsLocked(const TemplateKey& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The sums of `key` over its records (every one is in its index).
  absl::StatusOr<TemplateStats> RebuildStatsLocked(const TemplateKey& key) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  std::unique_ptr<rocksdb::DB> db_;
  const int recent_cache_templates_;
  mutable absl::Mutex mu_;
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 0;
  mutable absl::flat_hash_map<TemplateKey, TemplateStats> stats_cache_ ABSL_GUARDED_BY(mu_);
  // Read cache of Recent(): per template the records read and the limit they
  // were read with. Put() drops the entries of the templates it changes; a
  // read that raced with a Put (version_ moved) is not cached.
  struct RecentEntry {
    int limit = 0;
    std::vector<JobRecord> records;
  };
  mutable absl::flat_hash_map<TemplateKey, RecentEntry> recent_cache_ ABSL_GUARDED_BY(mu_);
  uint64_t version_ ABSL_GUARDED_BY(mu_) = 0;
};

// Record and template stats codecs, exposed for tests.
std::string EncodeJobRecord(const JobRecord& r);
absl::StatusOr<JobRecord> DecodeJobRecord(const std::string& bytes);
std::string EncodeTemplateStats(const TemplateStats& t);
absl::StatusOr<TemplateStats> DecodeTemplateStats(const std::string& bytes);

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_HIST_DB_ROCKSDB_H_
