#include "services/statemgr/sample_store.h"

#include <cmath>

#include <rocksdb/db.h>
#include <rocksdb/options.h>
#include <rocksdb/write_batch.h>

#include "absl/strings/str_cat.h"
#include "common/status.h"
#include "services/convert.h"
#include "sojourn/v1/statemgr.pb.h"

namespace sojourn::statemgr {
namespace {

absl::Status FromRocks(const rocksdb::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  if (s.IsIOError() || s.IsBusy() || s.IsTryAgain()) {
    return absl::UnavailableError(absl::StrCat(what, ": ", s.ToString()));
  }
  if (s.IsCorruption()) return absl::DataLossError(absl::StrCat(what, ": ", s.ToString()));
  return absl::InternalError(absl::StrCat(what, ": ", s.ToString()));
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
    const std::function<void(const std::string&, const HostMeta&, std::vector<HostSample>)>& fn)
    const {
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  std::string current;
  std::vector<HostSample> samples;
  auto flush = [&]() -> absl::Status {
    if (current.empty()) return absl::OkStatus();
    HostMeta meta;
    std::string value;
    rocksdb::Status s = db_->Get(rocksdb::ReadOptions(), MetaKey(current), &value);
    if (s.ok()) {
      sojourn::v1::HostStatus m;
      if (m.ParseFromString(value)) {
        meta.attributes = m.attributes();
        meta.period_seconds = m.period_seconds();
      }
    } else if (!s.IsNotFound()) {
      return FromRocks(s, "reading host meta");
    }
    fn(current, meta, std::move(samples));
    samples.clear();
    return absl::OkStatus();
  };
  const std::string start("s\0", 2);
  for (it->Seek(start); it->Valid() && it->key().starts_with(start); it->Next()) {
    rocksdb::Slice key = it->key();
    if (key.size() < 2 + 1 + 8) return absl::DataLossError("malformed sample key");
    std::string host(key.data() + 2, key.size() - 2 - 1 - 8);
    if (host != current) {
      RETURN_IF_ERROR(flush());
      current = host;
    }
    sojourn::v1::HostSample p;
    if (!p.ParseFromArray(it->value().data(), static_cast<int>(it->value().size()))) {
      return absl::DataLossError(absl::StrCat("malformed sample of host ", host));
    }
    samples.push_back(sojourn::FromProto(p));
  }
  RETURN_IF_ERROR(FromRocks(it->status(), "scanning samples"));
  return flush();
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
