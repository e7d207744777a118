#include "services/statemgr/sample_store.h"

#include <cmath>
#include <set>
#include <string>
#include <utility>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/rocks_status.h"
#include "common/status.h"
#include "common/text.h"
#include "services/convert.h"
#include "sojourn/v1/statemgr.pb.h"

namespace sojourn::statemgr {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  return FromRocksStatus(s, what);
}

void PutBigEndian(std::string* out, int64_t v) {
  uint64_t u = static_cast<uint64_t>(v) ^ (1ULL << 63);  // order negatives first
  for (int i = 7; i >= 0; --i) out->push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}

int64_t GetBigEndian(const char* p) {
  uint64_t u = 0;
  for (int i = 0; i < 8; ++i) u = (u << 8) | static_cast<uint8_t>(p[i]);
  return static_cast<int64_t>(u ^ (1ULL << 63));
}

std::string HostPrefix(char kind, const std::string& host) {
  std::string k;
  k.push_back(kind);
  k.push_back('\0');
  k.append(host);
  k.push_back('\0');
  return k;
}

// Damaged records named one by one in the log at start-up; beyond that, a total.
constexpr int64_t kMaxSkipWarnings = 20;

std::string MetaKey(const std::string& host) {
  std::string k = "m";
  k.push_back('\0');
  k.append(host);
  return k;
}

}  // namespace

SampleStore::SampleStore(std::unique_ptr<rocksdb::DB> db, bool sync_writes)
    : db_(std::move(db)), sync_writes_(sync_writes) {}
SampleStore::~SampleStore() = default;

absl::StatusOr<std::unique_ptr<SampleStore>> SampleStore::Open(const std::string& path,
                                                               bool sync_writes) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.compression = rocksdb::kNoCompression;
  options.max_background_jobs = 1;
  rocksdb::DB* raw = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(options, path, &raw);
  std::unique_ptr<rocksdb::DB> db(raw);  // own it at once
  if (!s.ok()) return FromRocks(s, absl::StrCat("cannot open RocksDB at ", path));
  // The layout keys of the predictor's RocksHistDb (models/turnaround/
  // hist_db_rocksdb.h) and of the broker's job queue (services/broker/
  // job_queue.cc); no key of this store is spelled like them ("m" keys here
  // are "m" 0x00 <host>, "s" keys "s" 0x00 <host>).
  const std::pair<const char*, const char*> kForeign[] = {
      {"mformat", "a predictor job history"},
      {"mseq", "a predictor job history"},
      {"format", "a broker job queue"},
  };
  for (const auto& [foreign, what] : kForeign) {
    std::string ignored;
    rocksdb::Status probe = db->Get(rocksdb::ReadOptions(), foreign, &ignored);
    if (probe.ok()) {
      return absl::FailedPreconditionError(absl::StrCat(
          "RocksDB at ", path, " holds ", what, " (key '", foreign,
          "'), not state manager samples: point --db_path at the state manager's own directory"));
    }
    if (!probe.IsNotFound()) return FromRocks(probe, absl::StrCat("reading ", path));
  }
  return std::unique_ptr<SampleStore>(new SampleStore(std::move(db), sync_writes));
}

absl::Status SampleStore::Append(const std::string& host, const std::vector<HostSample>& samples,
                                 const HostMeta* meta) {
  rocksdb::WriteBatch batch;
  const std::string prefix = HostPrefix('s', host);
  std::string value;
  for (const HostSample& s : samples) {
    std::string key = prefix;
    PutBigEndian(&key, s.unix_seconds);
    value.clear();
    sojourn::ToProto(s).SerializeToString(&value);
    batch.Put(key, value);
  }
  if (meta != nullptr) {
    sojourn::v1::HostStatus m;
    *m.mutable_attributes() = meta->attributes;
    m.set_period_seconds(meta->period_seconds);
    m.set_history_period_seconds(meta->history_period_seconds);
    m.set_period_changed_unix_seconds(meta->period_changed_unix);
    batch.Put(MetaKey(host), m.SerializeAsString());
  }
  rocksdb::WriteOptions wo;
  wo.sync = sync_writes_;
  return FromRocks(db_->Write(wo, &batch), "writing samples");
}

absl::Status SampleStore::RecordRevocation(const std::string& host, int64_t from_unix,
                                           int64_t gap_seconds) {
  std::string key = HostPrefix('r', host);
  PutBigEndian(&key, from_unix);
  std::string value;
  PutBigEndian(&value, gap_seconds);
  rocksdb::WriteOptions wo;
  wo.sync = sync_writes_;
  return FromRocks(db_->Put(wo, key, value), "writing revocation");
}

absl::Status SampleStore::PutBlob(char kind, const std::string& host, const std::string& value) {
  std::string key = "b";
  key.push_back(kind);
  key.push_back('\0');
  key.append(host);
  rocksdb::WriteOptions wo;
  wo.sync = sync_writes_;
  return FromRocks(db_->Put(wo, key, value), "writing blob");
}

absl::StatusOr<std::string> SampleStore::GetBlob(char kind, const std::string& host) const {
  std::string key = "b";
  key.push_back(kind);
  key.push_back('\0');
  key.append(host);
  std::string value;
  rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), key, &value);
  if (s.IsNotFound()) return absl::NotFoundError(absl::StrCat("no blob for ", host));
  RETURN_IF_ERROR(FromRocks(s, "reading blob"));
  return value;
}

absl::Status SampleStore::ForEachHost(
    const std::function<void(const std::string&, const HostMeta&, std::vector<HostSample>)>& fn,
    int64_t* skipped, size_t chunk) const {
  int64_t bad = 0;
  // One WARNING per damaged record for the first few, then a total.
  auto skip = [&bad](const rocksdb::Slice& key, const std::string& reason) {
    if (++bad <= kMaxSkipWarnings) {
      SOJOURN_LOG(WARNING, "store: skipping record '%s' (%s); it stays stored, unread",
                  Excerpt(absl::string_view(key.data(), key.size()), 160), reason);
    }
  };
  // A meta that does not parse leaves the attributes and period unknown.
  auto parse_meta = [&skip](const rocksdb::Slice& key, const rocksdb::Slice& value) {
    HostMeta meta;
    sojourn::v1::HostStatus m;
    if (m.ParseFromArray(value.data(), static_cast<int>(value.size()))) {
      meta.attributes = m.attributes();
      meta.period_seconds = m.period_seconds();
      meta.history_period_seconds = m.history_period_seconds();
      meta.period_changed_unix = m.period_changed_unix_seconds();
    } else {
      skip(key, "host meta does not parse; attributes and period unknown");
    }
    return meta;
  };
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  std::string current;
  std::vector<HostSample> samples;
  // Hosts given to `fn` with their samples; the others with a meta are
  // given after them, without samples.
  std::set<std::string> done;
  // Gives `fn` the samples read of the current host (`end`: its last ones).
  bool given = false;  // some of the current host's samples went to `fn`
  auto flush = [&](bool end) -> absl::Status {
    if (current.empty()) return absl::OkStatus();
    if (end && given && samples.empty()) {
      done.insert(std::move(current));
      current.clear();
      given = false;
      return absl::OkStatus();
    }
    HostMeta meta;
    std::string value;
    const std::string meta_key = MetaKey(current);
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), meta_key, &value);
    if (s.ok()) {
      meta = parse_meta(meta_key, value);
    } else if (!s.IsNotFound()) {
      return FromRocks(s, "reading host meta");
    }
    fn(current, meta, std::move(samples));
    samples.clear();
    given = !end;
    if (end) {
      done.insert(std::move(current));
      current.clear();
    }
    return absl::OkStatus();
  };
  const std::string start("s\0", 2);
  for (it->Seek(start); it->Valid() && it->key().starts_with(start); it->Next()) {
    rocksdb::Slice key = it->key();
    // "s" 0x00 <host: 1+ bytes, no NUL> 0x00 <8 bytes>
    if (key.size() < 2 + 1 + 1 + 8 || key[key.size() - 9] != '\0') {
      skip(key, "malformed sample key");
      continue;
    }
    std::string host(key.data() + 2, key.size() - 2 - 1 - 8);
    if (host.find('\0') != std::string::npos) {
      skip(key, "malformed sample key");
      continue;
    }
    const int64_t key_unix = GetBigEndian(key.data() + key.size() - 8);
    sojourn::v1::HostSample p;
    if (!p.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      skip(key, "sample value does not parse");
      continue;
    }
    if (p.unix_seconds() != key_unix) {
      // Samples are kept in key order: a value with another time would put
      // the host's history out of order (and a late one would make every
      // new sample a "duplicate").
      skip(key, absl::StrCat("sample value is stamped ", p.unix_seconds(), ", its key ",
                             key_unix));
      continue;
    }
    if (host != current) {
      RETURN_IF_ERROR(flush(true));
      current = host;
    }
    samples.push_back(sojourn::FromProto(p));
    if (chunk > 0 && samples.size() >= chunk) RETURN_IF_ERROR(flush(false));
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "scanning samples"));
  RETURN_IF_ERROR(flush(true));
  // Hosts that have a meta and no sample: a PushSamples message with
  // attributes (or a period) and no samples, acknowledged for a new host.
  // They were served before the restart, so they are after it.
  const std::string meta_start("m\0", 2);
  for (it->Seek(meta_start); it->Valid() && it->key().starts_with(meta_start); it->Next()) {
    const rocksdb::Slice key = it->key();
    std::string host(key.data() + 2, key.size() - 2);
    if (host.empty() || host.find('\0') != std::string::npos) {
      skip(key, "malformed host meta key");
      continue;
    }
    if (done.count(host) > 0) continue;
    fn(host, parse_meta(key, it->value()), {});
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "scanning host metas"));
  if (bad > kMaxSkipWarnings) {
    SOJOURN_LOG(WARNING, "store: skipped %d damaged records in all", bad);
  }
  if (skipped != nullptr) *skipped += bad;
  return absl::OkStatus();
}

absl::Status SampleStore::ForEachSample(const std::string& host, int64_t from_unix,
                                        int64_t to_unix,
                                        const std::function<bool(const HostSample&)>& fn) const {
  if (from_unix >= to_unix) return absl::OkStatus();
  const std::string prefix = HostPrefix('s', host);
  std::string start = prefix;
  PutBigEndian(&start, from_unix);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  sojourn::v1::HostSample p;
  for (it->Seek(start); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    const rocksdb::Slice key = it->key();
    if (key.size() != prefix.size() + 8) continue;  // damaged
    const int64_t key_unix = GetBigEndian(key.data() + prefix.size());
    if (key_unix >= to_unix) break;
    if (!p.ParseFromArray(it->value().data(), static_cast<int>(it->value().size())) ||
        p.unix_seconds() != key_unix) {
      continue;  // damaged
    }
    if (!fn(sojourn::FromProto(p))) break;
  }
  return FromRocks(it->status(), "reading samples");
}

namespace {

// [prefix, prefix + before): every key of the host's kind stamped before it
// (and any damaged, shorter key sorting there); no other host's key lies
// between (a host name holds no NUL).
std::pair<std::string, std::string> RangeBefore(char kind, const std::string& host,
                                                int64_t before_unix) {
  std::string begin = HostPrefix(kind, host);
  std::string end = begin;
  PutBigEndian(&end, before_unix);
  return {std::move(begin), std::move(end)};
}

}  // namespace

absl::StatusOr<int64_t> SampleStore::DeleteBefore(const std::string& host, int64_t before_unix) {
  rocksdb::WriteBatch batch;
  int64_t deleted = 0;
  for (char kind : {'s', 'r'}) {
    const auto [begin, end] = RangeBefore(kind, host, before_unix);
    if (kind == 's') {
      rocksdb::ReadOptions ro;
      rocksdb::Slice upper(end);
      ro.iterate_upper_bound = &upper;
      std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(ro));
      for (it->Seek(begin); it->Valid(); it->Next()) ++deleted;
      RETURN_IF_ERROR(FromRocks(it->status(), "counting samples to delete"));
    }
    batch.DeleteRange(begin, end);
  }
  rocksdb::WriteOptions wo;
  wo.sync = sync_writes_;
  RETURN_IF_ERROR(FromRocks(db_->Write(wo, &batch), "deleting samples"));
  return deleted;
}

absl::Status SampleStore::CompactBefore(const std::string& host, int64_t before_unix) {
  rocksdb::CompactRangeOptions co;
  for (char kind : {'s', 'r'}) {
    const auto [begin, end] = RangeBefore(kind, host, before_unix);
    rocksdb::Slice b(begin), e(end);
    RETURN_IF_ERROR(FromRocks(db_->CompactRange(co, &b, &e), "compacting deleted samples"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::pair<int64_t, int64_t>>> SampleStore::Revocations(
    const std::string& host) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  const std::string prefix = HostPrefix('r', host);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->Seek(prefix); it->Valid() && it->key().starts_with(prefix); it->Next()) {
    if (it->key().size() != prefix.size() + 8 || it->value().size() != 8) continue;
    out.emplace_back(GetBigEndian(it->key().data() + prefix.size()),
                     GetBigEndian(it->value().data()));
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "scanning revocations"));
  return out;
}

}  // namespace sojourn::statemgr
