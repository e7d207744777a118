// Durable storage of host samples in RocksDB.
//
// Layout (one key space, ordered):
//   "s" 0x00 <host> 0x00 <8-byte big-endian unix seconds>  -> HostSample proto
//   "m" 0x00 <host>                                         -> HostStatus proto (attributes,
//                                                              period; may exist without samples)
//   "r" 0x00 <host> 0x00 <8-byte big-endian unix seconds>  -> revocation gap (8-byte seconds)
//   "b" <kind> 0x00 <host>                                  -> per-host blob (usage patterns)
// Host names are non-empty and contain no NUL byte (the service checks).
#ifndef SOJOURN_SERVICES_STATEMGR_SAMPLE_STORE_H_
#define SOJOURN_SERVICES_STATEMGR_SAMPLE_STORE_H_

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/host_sample.h"
#include "sojourn/v1/common.pb.h"

namespace rocksdb {
class DB;
}

namespace sojourn::statemgr {

struct HostMeta {
  sojourn::v1::HostAttributes attributes;
  int64_t period_seconds = 0;
  // After a change of period (0 = never changed): the longest period the
  // samples up to period_changed_unix (the newest one then) were sent at.
  // Gaps before those samples are judged by it, later ones by the period.
  int64_t history_period_seconds = 0;
  int64_t period_changed_unix = 0;
};

// A SampleStore is safe for concurrent use (RocksDB is).
class SampleStore {
 public:
  // Opens (creating if needed) the database at `path`. With `sync_writes`,
  // every Append is fsync'ed before it returns (survives power loss, not only
  // a process kill). FAILED_PRECONDITION when `path` holds a predictor's job
  // history (RocksHistDb) rather than samples: its keys would read as
  // damaged samples, and samples written beside them could collide.
  static absl::StatusOr<std::unique_ptr<SampleStore>> Open(const std::string& path,
                                                           bool sync_writes);
  ~SampleStore();

  // The database itself, for online backups (common/db_backup.h).
  rocksdb::DB* db() const { return db_.get(); }

  // Writes the samples (and the meta, when given) of one host atomically.
  absl::Status Append(const std::string& host, const std::vector<HostSample>& samples,
                      const HostMeta* meta);
  // Records that `host` was revoked from `from_unix` for `gap_seconds`.
  absl::Status RecordRevocation(const std::string& host, int64_t from_unix, int64_t gap_seconds);

  // A small per-host value of kind `kind` ('u' = usage patterns), replaced
  // atomically. Get returns NOT_FOUND when absent.
  absl::Status PutBlob(char kind, const std::string& host, const std::string& value);
  absl::StatusOr<std::string> GetBlob(char kind, const std::string& host) const;

  // Calls `fn` for every stored host with its meta and samples in time order:
  // first the hosts with samples, then those with a meta and no sample (a
  // host whose attributes or period came before its first sample), with
  // none.
  // A damaged record (a sample key of the wrong shape, a value that does not
  // parse or whose time differs from its key's, an unparsable meta) is left
  // out with a WARNING naming its key, and counted in `*skipped` (when not
  // null); it stays stored, untouched. Fails only when RocksDB does.
  // With `chunk` > 0, a host's samples come in consecutive calls of at most
  // `chunk` samples each (the meta with every one), so a year of 6 s
  // samples (0.2 GB as HostSamples) is never in memory at once.
  absl::Status ForEachHost(
      const std::function<void(const std::string& host, const HostMeta& meta,
                               std::vector<HostSample> samples)>& fn,
      int64_t* skipped = nullptr, size_t chunk = 0) const;
  // Calls `fn` with the stored samples of `host` stamped in [from_unix,
  // to_unix), in time order, until it returns false. Damaged records are
  // left out without a word (ForEachHost named them at start-up).
  absl::Status ForEachSample(const std::string& host, int64_t from_unix, int64_t to_unix,
                             const std::function<bool(const HostSample&)>& fn) const;
  // Deletes the samples of `host` stamped before `before_unix` and its
  // revocations that began before it (damaged records among them too), in
  // one write, and returns the number of sample records deleted. The space
  // comes back with CompactBefore. Retention (HostBook::Retain); nothing
  // else deletes samples.
  absl::StatusOr<int64_t> DeleteBefore(const std::string& host, int64_t before_unix);
  // Compacts the key ranges DeleteBefore(host, before_unix) deleted, so
  // their disk space comes back now rather than when compactions reach the
  // last level.
  absl::Status CompactBefore(const std::string& host, int64_t before_unix);
  // Revocations of a host: (from_unix, gap_seconds), oldest first.
  absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> Revocations(
      const std::string& host) const;

 private:
  SampleStore(std::unique_ptr<rocksdb::DB> db, bool sync_writes);
  std::unique_ptr<rocksdb::DB> db_;
  bool sync_writes_;
};

}  // namespace sojourn::statemgr

#endif  // SOJOURN_SERVICES_STATEMGR_SAMPLE_STORE_H_
