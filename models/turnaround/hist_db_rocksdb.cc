#include "models/turnaround/hist_db_rocksdb.h"

#include <algorithm>
#include <cstring>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "common/rocks_status.h"
#include "common/text.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/write_batch.h"

namespace sojourn::turnaround {
namespace {

// Template stats: 1. Job records: 2 (1 and the cluster's node count at
// start); records of version 1 are read with cluster_nodes -1.
constexpr uint8_t kRecordVersion = 1;
constexpr uint8_t kJobRecordVersion = 2;

absl::Status FromRocks(const rocksdb::Status& s, const char* what) {
  return FromRocksStatus(s, absl::StrCat("histdb ", what));
}

class Writer {
 public:
  void U8(uint8_t v) { out_.push_back(static_cast<char>(v)); }
  void I32(int32_t v) { Fixed(static_cast<uint32_t>(v), 4); }
  void I64(int64_t v) { Fixed(static_cast<uint64_t>(v), 8); }
  void F64(double v) {
    uint64_t bits;
    std::memcpy(&bits, &v, 8);
    Fixed(bits, 8);
  }
  std::string Take() { return std::move(out_); }

 private:
  void Fixed(uint64_t v, int bytes) {  // little-endian, host independent
    for (int i = 0; i < bytes; ++i) out_.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
  }
  std::string out_;
};

class Reader {
 public:
  explicit Reader(const std::string& in) : in_(in) {}
  bool U8(uint8_t* v) {
    if (pos_ + 1 > in_.size()) return false;
    *v = static_cast<uint8_t>(in_[pos_++]);
    return true;
  }
  bool I32(int32_t* v) {
    uint64_t u;
    if (!Fixed(&u, 4)) return false;
    *v = static_cast<int32_t>(static_cast<uint32_t>(u));
    return true;
  }
  bool I64(int64_t* v) {
    uint64_t u;
    if (!Fixed(&u, 8)) return false;
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool F64(double* v) {
    uint64_t u;
    if (!Fixed(&u, 8)) return false;
    std::memcpy(v, &u, 8);
    return true;
  }
  bool done() const { return pos_ == in_.size(); }

 private:
  bool Fixed(uint64_t* v, int bytes) {
    if (pos_ + bytes > in_.size()) return false;
    uint64_t r = 0;
    for (int i = 0; i < bytes; ++i) r |= static_cast<uint64_t>(static_cast<uint8_t>(in_[pos_ + i])) << (8 * i);
    pos_ += bytes;
    *v = r;
    return true;
  }
  const std::string& in_;
  size_t pos_ = 0;
};

void PutBe(std::string* s, uint64_t v, int bytes) {
  for (int i = bytes - 1; i >= 0; --i) s->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
uint64_t GetBe(const char* p, int bytes) {
  uint64_t r = 0;
  for (int i = 0; i < bytes; ++i) r = (r << 8) | static_cast<uint8_t>(p[i]);
  return r;
}

std::string TemplateSuffix(const TemplateKey& k) {
  std::string s;
  s.push_back(static_cast<char>(k.level));
  // Offset by 2^31 so that -1 sorts before 0 (order is irrelevant for lookups
  // but keeps keys readable in dumps).
  PutBe(&s, static_cast<uint32_t>(k.a) ^ 0x80000000u, 4);
  PutBe(&s, static_cast<uint32_t>(k.b) ^ 0x80000000u, 4);
  PutBe(&s, static_cast<uint32_t>(k.c) ^ 0x80000000u, 4);
  return s;
}
std::string IndexPrefix(const TemplateKey& k) { return "i" + TemplateSuffix(k); }
std::string StatsKey(const TemplateKey& k) { return "s" + TemplateSuffix(k); }
std::string PendingKey(int64_t job_id) {
  std::string s = "p";
  PutBe(&s, static_cast<uint64_t>(job_id) ^ (1ull << 63), 8);
  return s;
}
const char kSeqKey[] = "mseq";
// On-disk layout version: 2 = records inside the template index entries;
// 3 = the same, with job records of version 2 (the cluster's node count),
// which a build reading only layout 2 would take for corrupt records: it
// refuses the store at open instead ("has layout 3"). A layout-2 store is
// marked 3 when opened.
const char kFormatKey[] = "mformat";
// PutBatch's ids: "mbatch" + id.
const char kBatchKeyPrefix[] = "mbatch";
const char kFormat[] = "3";
const char kFormatBeforeClusterNodes[] = "2";

}  // namespace

std::string EncodeTemplateStats(const TemplateStats& t) {
  Writer w;
  w.U8(kRecordVersion);
  w.I64(t.count);
  w.F64(t.sum_exec);
  w.F64(t.sum_wait);
  w.I64(t.cpu_count);
  w.F64(t.sum_cpu_per_task);
  w.F64(t.sum_cpu_total);
  w.F64(t.sum_cpu_fraction);
  w.I64(t.isolated_cpu_count);
  w.F64(t.sum_isolated_exec);
  return w.Take();
}

absl::StatusOr<TemplateStats> DecodeTemplateStats(const std::string& bytes) {
  Reader r(bytes);
  TemplateStats t;
  uint8_t version;
  if (!r.U8(&version) || version != kRecordVersion || !r.I64(&t.count) || !r.F64(&t.sum_exec) ||
      !r.F64(&t.sum_wait) || !r.I64(&t.cpu_count) || !r.F64(&t.sum_cpu_per_task) ||
      !r.F64(&t.sum_cpu_total) || !r.F64(&t.sum_cpu_fraction) || !r.I64(&t.isolated_cpu_count) ||
      !r.F64(&t.sum_isolated_exec) || !r.done()) {
    return absl::DataLossError("histdb: corrupt template stats");
  }
  return t;
}

std::string EncodeJobRecord(const JobRecord& r) {
  Writer w;
  w.U8(kJobRecordVersion);
  const JobSpec& s = r.spec;
  w.I64(s.job_id);
  w.I64(s.submit_time);
  w.I32(s.user);
  w.I32(s.group);
  w.I32(s.executable);
  w.I32(s.queue);
  w.I32(s.procs);
  w.I64(s.requested_time);
  w.F64(s.cpu_fraction);
  w.I64(r.wait_time);
  w.I64(r.exec_time);
  w.F64(r.cpu_time_per_task);
  w.F64(r.cpu_ahead);
  w.F64(r.cpu_backwards);
  w.I32(r.queue_len_submit);
  w.I32(r.queue_len_start);
  w.I32(r.shared_tasks);
  w.F64(r.max_local_cpu);
  w.I64(r.start_time);
  w.U8(static_cast<uint8_t>(r.job_selection));
  w.U8(static_cast<uint8_t>(r.node_selection));
  w.I32(r.cluster_nodes);
  return w.Take();
}

absl::StatusOr<JobRecord> DecodeJobRecord(const std::string& bytes) {
  Reader rd(bytes);
  JobRecord r;
  JobSpec& s = r.spec;
  uint8_t version = 0, jsel = 0, nsel = 0;
  bool ok = rd.U8(&version) && (version == 1 || version == kJobRecordVersion) &&
            rd.I64(&s.job_id) && rd.I64(&s.submit_time) && rd.I32(&s.user) && rd.I32(&s.group) &&
            rd.I32(&s.executable) && rd.I32(&s.queue) && rd.I32(&s.procs) &&
            rd.I64(&s.requested_time) && rd.F64(&s.cpu_fraction) && rd.I64(&r.wait_time) &&
            rd.I64(&r.exec_time) && rd.F64(&r.cpu_time_per_task) && rd.F64(&r.cpu_ahead) &&
            rd.F64(&r.cpu_backwards) && rd.I32(&r.queue_len_submit) && rd.I32(&r.queue_len_start) &&
            rd.I32(&r.shared_tasks) && rd.F64(&r.max_local_cpu) && rd.I64(&r.start_time) &&
            rd.U8(&jsel) && rd.U8(&nsel) && (version == 1 || rd.I32(&r.cluster_nodes)) &&
            rd.done() && jsel <= 1 && nsel <= 1 && r.cluster_nodes >= -1;
  if (!ok) return absl::DataLossError("histdb: corrupt job record");
  r.job_selection = static_cast<JobSelection>(jsel);
  r.node_selection = static_cast<NodeSelection>(nsel);
  return r;
}

RocksHistDb::RocksHistDb(std::unique_ptr<rocksdb::DB> db, int recent_cache_templates)
    : db_(std::move(db)), recent_cache_templates_(recent_cache_templates) {}
RocksHistDb::~RocksHistDb() = default;

absl::StatusOr<std::unique_ptr<RocksHistDb>> RocksHistDb::Open(const std::string& path,
                                                               const RocksHistDbOptions& options) {
  rocksdb::Options opts;
  opts.create_if_missing = options.create_if_missing;
  opts.IncreaseParallelism(2);
  rocksdb::BlockBasedTableOptions table;
  table.block_cache = rocksdb::NewLRUCache(static_cast<size_t>(options.block_cache_mb) << 20);
  opts.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(opts, path, &raw);
  std::unique_ptr<rocksdb::DB> db(raw);  // own at once (STYLE.md)
  if (!s.ok()) return FromRocks(s, "open");
  auto store = std::unique_ptr<RocksHistDb>(
      new RocksHistDb(std::move(db), std::max(0, options.recent_cache_templates)));
  std::string format;
  s = store->db_->Get(rocksdb::ReadOptions(), kFormatKey, &format);
  if (s.IsNotFound()) {
    std::string probe;
    if (store->db_->Get(rocksdb::ReadOptions(), kSeqKey, &probe).ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "histdb ", path, " has layout 1 (index without records); this build reads layouts ",
          kFormatBeforeClusterNodes, " and ", kFormat, ": move it away and replay the job events"));
    }
    // Neither marker: only an empty database may become a job history. Any
    // other key means another program's data (a state manager's --db_path),
    // which job records written beside it would mix with.
    std::unique_ptr<rocksdb::Iterator> it(store->db_->NewIterator(rocksdb::ReadOptions()));
    it->SeekToFirst();
    if (it->Valid()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "histdb ", path, " is not empty but holds no job history (first key '",
          Excerpt(absl::string_view(it->key().data(), it->key().size())),
          "'): is it another service's database, such as a state manager's --db_path?"));
    }
    if (!it->status().ok()) return FromRocks(it->status(), "scan");
    it.reset();
    s = store->db_->Put(rocksdb::WriteOptions(), kFormatKey, kFormat);
    if (!s.ok()) return FromRocks(s, "write format");
  } else if (!s.ok()) {
    return FromRocks(s, "read format");
  } else if (format == kFormatBeforeClusterNodes) {
    s = store->db_->Put(rocksdb::WriteOptions(), kFormatKey, kFormat);
    if (!s.ok()) return FromRocks(s, "write format");
  } else if (format != kFormat) {
    return absl::FailedPreconditionError(absl::StrCat("histdb ", path, " has layout ", format,
                                                      "; this build reads layouts ",
                                                      kFormatBeforeClusterNodes, " and ", kFormat));
  }
  std::string seq;
  s = store->db_->Get(rocksdb::ReadOptions(), kSeqKey, &seq);
  if (s.ok()) {
    if (seq.size() != 8) return absl::DataLossError("histdb: corrupt sequence number");
    absl::MutexLock lock(&store->mu_);
    store->next_seq_ = GetBe(seq.data(), 8);
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "read sequence");
  }
  return store;
}

absl::StatusOr<TemplateStats> RocksHistDb::StatsLocked(const TemplateKey& key) const {
  auto it = stats_cache_.find(key);
  if (it != stats_cache_.end()) return it->second;
  std::string bytes;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), StatsKey(key), &bytes);
  TemplateStats stats;
  if (s.ok()) {
    auto decoded = DecodeTemplateStats(bytes);
    if (!decoded.ok()) return decoded.status();
    stats = *decoded;
    if (!stats.CpuTimesBounded()) {
      // Summed by an earlier version from a CPU time beyond the run time:
      // sum the template's records again, bounded. Cached here; the next
      // Put() of the template writes the repaired sums.
      auto rebuilt = RebuildStatsLocked(key);
      if (!rebuilt.ok()) return rebuilt.status();
      stats = *rebuilt;
    }
  } else if (!s.IsNotFound()) {
    return FromRocks(s, "read stats");
  }
  stats_cache_[key] = stats;
  return stats;
}

absl::StatusOr<TemplateStats> RocksHistDb::RebuildStatsLocked(const TemplateKey& key) const {
  const std::string prefix = IndexPrefix(key);
  TemplateStats stats;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid(); it->Next()) {
    rocksdb::Slice k = it->key();
    if (k.size() != prefix.size() + 8 || !k.starts_with(prefix)) break;
    auto rec = DecodeJobRecord(it->value().ToString());
    if (!rec.ok()) return rec.status();
    stats.Add(*rec);
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  return stats;
}

absl::Status RocksHistDb::Put(const JobRecord& record) {
  absl::MutexLock lock(&mu_);
  return WriteLocked(absl::MakeConstSpan(&record, 1), "").status();
}

absl::StatusOr<bool> RocksHistDb::PutBatch(const std::vector<JobRecord>& records,
                                           const std::string& batch_id) {
  absl::MutexLock lock(&mu_);
  return WriteLocked(records, batch_id);
}

absl::Status RocksHistDb::PutFinished(const JobRecord& record, int64_t job_id) {
  absl::MutexLock lock(&mu_);
  return WriteLocked(absl::MakeConstSpan(&record, 1), "", job_id).status();
}

absl::StatusOr<bool> RocksHistDb::WriteLocked(absl::Span<const JobRecord> records,
                                              const std::string& batch_id,
                                              int64_t erase_pending) {
  const std::string batch_key = kBatchKeyPrefix + batch_id;
  if (!batch_id.empty()) {
    std::string stored;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), batch_key, &stored);
    if (s.ok()) return false;
    if (!s.IsNotFound()) return FromRocks(s, "read batch id");
  }
  uint64_t seq = next_seq_;
  rocksdb::WriteBatch batch;
  // The record is stored under every template's index key, so Recent() is a
  // single sequential scan of one prefix (no random reads).
  absl::flat_hash_map<TemplateKey, TemplateStats> updated;
  for (const JobRecord& record : records) {
    const std::string value = EncodeJobRecord(record);
    for (int level = 0; level < kNumTemplateLevels; ++level) {
      TemplateKey key = TemplateKey::For(record.spec, static_cast<TemplateLevel>(level));
      std::string index = IndexPrefix(key);
      PutBe(&index, ~seq, 8);
      batch.Put(index, value);
      auto it = updated.find(key);
      if (it == updated.end()) {
        auto stats = StatsLocked(key);
        if (!stats.ok()) return stats.status();
        it = updated.emplace(key, *stats).first;
      }
      it->second.Add(record);
    }
    ++seq;
  }
  for (const auto& [key, stats] : updated) batch.Put(StatsKey(key), EncodeTemplateStats(stats));
  std::string seq_bytes;
  PutBe(&seq_bytes, seq, 8);
  batch.Put(kSeqKey, seq_bytes);
  if (!batch_id.empty()) {
    std::string count;
    PutBe(&count, records.size(), 8);
    batch.Put(batch_key, count);
  }
  if (erase_pending >= 0) batch.Delete(PendingKey(erase_pending));
  rocksdb::Status s = db_->Write(rocksdb::WriteOptions(), &batch);
  if (!s.ok()) {
    // The cache may hold sums the disk does not; drop it so it is re-read.
    stats_cache_.clear();
    return FromRocks(s, "write");
  }
  for (auto& [key, stats] : updated) {
    stats_cache_[key] = stats;
    recent_cache_.erase(key);
  }
  next_seq_ = seq;
  ++version_;
  return true;
}

absl::StatusOr<std::vector<JobRecord>> RocksHistDb::Recent(const TemplateKey& key,
                                                           int limit) const {
  std::vector<JobRecord> out;
  if (limit <= 0) return out;
  uint64_t version;
  {
    absl::MutexLock lock(&mu_);
    auto it = recent_cache_.find(key);
    if (it != recent_cache_.end() &&
        (limit <= it->second.limit ||
         static_cast<int>(it->second.records.size()) < it->second.limit)) {
      const auto& recs = it->second.records;
      out.assign(recs.begin(), recs.begin() + std::min<size_t>(recs.size(), limit));
      return out;
    }
    version = version_;
  }
  const std::string prefix = IndexPrefix(key);
  std::string upper = prefix;
  upper.back() = static_cast<char>(static_cast<uint8_t>(upper.back()) + 1);
  // The last byte of the prefix is c's low byte; incrementing it could wrap at
  // 0xff, so fall back to a prefix check in that case.
  const bool bounded = static_cast<uint8_t>(prefix.back()) != 0xff;
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  if (bounded) ro.iterate_upper_bound = &upper_slice;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  for (it->Seek(prefix); it->Valid() && static_cast<int>(out.size()) < limit; it->Next()) {
    rocksdb::Slice k = it->key();
    if (k.size() != prefix.size() + 8 || !k.starts_with(prefix)) break;
    auto rec = DecodeJobRecord(it->value().ToString());
    if (!rec.ok()) return rec.status();
    out.push_back(*std::move(rec));
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  if (recent_cache_templates_ > 0) {
    absl::MutexLock lock(&mu_);
    if (version == version_) {
      if (static_cast<int>(recent_cache_.size()) >= recent_cache_templates_) recent_cache_.clear();
      recent_cache_[key] = RecentEntry{limit, out};
    }
  }
  return out;
}

absl::StatusOr<TemplateStats> RocksHistDb::Stats(const TemplateKey& key) const {
  absl::MutexLock lock(&mu_);
  return StatsLocked(key);
}

int64_t RocksHistDb::size() const {
  absl::MutexLock lock(&mu_);
  return static_cast<int64_t>(next_seq_);
}

absl::StatusOr<HistoryPage> RocksHistDb::Scan(const std::string& cursor, int limit) const {
  if (limit < 1) return absl::InvalidArgumentError(absl::StrCat("scan limit ", limit, " < 1"));
  // The finest level's index holds every record once: 'i' 0 a b c ~seq.
  const std::string prefix = {'i', static_cast<char>(TemplateLevel::kUserExecutableProcs)};
  const size_t key_size = IndexPrefix(TemplateKey{}).size() + 8;
  std::string after;
  if (!cursor.empty()) {
    const bool hex =
        cursor.size() == 2 * key_size && std::all_of(cursor.begin(), cursor.end(), [](char c) {
          return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
        });
    if (hex) after = absl::HexStringToBytes(cursor);
    if (!hex || after.compare(0, prefix.size(), prefix) != 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("histdb: '", Excerpt(cursor), "' is no cursor of this job history"));
    }
  }
  std::string upper = prefix;
  upper.back() = static_cast<char>(upper.back() + 1);
  rocksdb::Slice upper_slice(upper);
  rocksdb::ReadOptions ro;
  ro.iterate_upper_bound = &upper_slice;
  // A page is one pass over a part of the store: do not fill the block
  // cache that estimates read from.
  ro.fill_cache = false;
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
  it->Seek(after.empty() ? prefix : after);
  if (!after.empty() && it->Valid() && it->key() == rocksdb::Slice(after)) it->Next();
  HistoryPage page;
  std::string last;
  for (; it->Valid(); it->Next()) {
    if (static_cast<int>(page.records.size()) == limit) {
      page.next_cursor = absl::BytesToHexString(last);
      break;
    }
    rocksdb::Slice k = it->key();
    if (k.size() != key_size) continue;
    auto rec = DecodeJobRecord(it->value().ToString());
    if (!rec.ok()) return rec.status();
    page.records.push_back(*std::move(rec));
    last = k.ToString();
  }
  if (!it->status().ok()) return FromRocks(it->status(), "scan");
  return page;
}

absl::Status RocksHistDb::PutPending(const JobRecord& record) {
  return FromRocks(db_->Put(rocksdb::WriteOptions(), PendingKey(record.spec.job_id),
                            EncodeJobRecord(record)),
                   "write pending");
}

absl::StatusOr<JobRecord> RocksHistDb::GetPending(int64_t job_id) const {
  std::string bytes;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), PendingKey(job_id), &bytes);
  if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat("job ", job_id, " is not pending"));
  if (!s.ok()) return FromRocks(s, "read pending");
  return DecodeJobRecord(bytes);
}

absl::Status RocksHistDb::ErasePending(int64_t job_id) {
  return FromRocks(db_->Delete(rocksdb::WriteOptions(), PendingKey(job_id)), "erase pending");
}

}  // namespace sojourn::turnaround
