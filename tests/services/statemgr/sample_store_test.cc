#include "services/statemgr/sample_store.h"

#include <algorithm>
#include <map>

#include <rocksdb/db.h>

#include "gtest/gtest.h"
#include "sojourn/v1/common.pb.h"
#include "tests/test_util.h"

namespace sojourn::statemgr {
namespace {

using sojourn::testing::IsOk;
using sojourn::testing::TempDir;

HostSample At(int64_t t, double load, double mem = 1000) {
  HostSample s;
  s.unix_seconds = t;
  s.cpu_load = load;
  s.free_mem_mb = mem;
  return s;
}

// Samples and meta written before a close are all there after reopening.
TEST(SampleStoreTest, SurvivesReopen) {
  TempDir dir;
  {
    auto store = SampleStore::Open(dir.path(), /*sync_writes=*/true);
    ASSERT_THAT(store.status(), IsOk());
    HostMeta meta;
    meta.period_seconds = 300;
    meta.attributes.set_cpu_cores(4);
    ASSERT_THAT((*store)->Append("b", {At(10, 0.1), At(20, 0.7)}, &meta), IsOk());
    ASSERT_THAT((*store)->Append("a", {At(5, 0.3)}, nullptr), IsOk());
    ASSERT_THAT((*store)->Append("b", {At(30, 0.2)}, nullptr), IsOk());
    ASSERT_THAT((*store)->RecordRevocation("b", 30, 900), IsOk());
  }
  auto store = SampleStore::Open(dir.path(), true);
  ASSERT_THAT(store.status(), IsOk());
  std::map<std::string, std::vector<HostSample>> seen;
  std::map<std::string, HostMeta> metas;
  ASSERT_THAT((*store)->ForEachHost([&](const std::string& h, const HostMeta& m,
                                        std::vector<HostSample> s) {
    seen[h] = std::move(s);
    metas[h] = m;
  }),
              IsOk());
  ASSERT_EQ(seen.size(), 2u);
  ASSERT_EQ(seen["b"].size(), 3u);
  EXPECT_EQ(seen["b"][0].unix_seconds, 10);
  EXPECT_EQ(seen["b"][2].unix_seconds, 30);
  EXPECT_DOUBLE_EQ(seen["b"][1].cpu_load, 0.7);
  EXPECT_DOUBLE_EQ(seen["b"][1].free_mem_mb, 1000);
  EXPECT_EQ(metas["b"].period_seconds, 300);
  EXPECT_EQ(metas["b"].attributes.cpu_cores(), 4);
  ASSERT_EQ(seen["a"].size(), 1u);
  auto rev = (*store)->Revocations("b");
  ASSERT_THAT(rev.status(), IsOk());
  ASSERT_EQ(rev->size(), 1u);
  EXPECT_EQ((*rev)[0], std::make_pair(int64_t{30}, int64_t{900}));
}

// DeleteBefore deletes one host's samples and revocations stamped before the
// cut, and nothing of another host (not of one whose name it begins), nor
// the host's meta or blobs; CompactBefore gives the space back on disk.
TEST(SampleStoreTest, DeleteBeforeDeletesOnlyTheOldSamplesOfOneHost) {
  TempDir dir;
  auto store = SampleStore::Open(dir.path(), false);
  ASSERT_THAT(store.status(), IsOk());
  HostMeta meta;
  meta.period_seconds = 6;
  std::vector<HostSample> v;
  for (int64_t t = 1'000'000; t < 1'000'000 + 60 * 86400; t += 6) v.push_back(At(t, 0.1));
  for (size_t i = 0; i < v.size(); i += 100'000) {
    std::vector<HostSample> chunk(v.begin() + i, v.begin() + std::min(v.size(), i + 100'000));
    ASSERT_THAT((*store)->Append("a", chunk, &meta), IsOk());
  }
  ASSERT_THAT((*store)->Append("ab", {At(5, 0.2), At(2'000'000, 0.3)}, &meta), IsOk());
  ASSERT_THAT((*store)->Append("0", {At(5, 0.2)}, nullptr), IsOk());  // sorts before "a"
  ASSERT_THAT((*store)->RecordRevocation("a", 1'000'006, 100), IsOk());
  ASSERT_THAT((*store)->RecordRevocation("a", 1'000'000 + 50 * 86400, 100), IsOk());
  ASSERT_THAT((*store)->RecordRevocation("ab", 7, 100), IsOk());
  ASSERT_THAT((*store)->PutBlob('u', "a", "patterns"), IsOk());
  auto size = [&]() {
    uint64_t bytes = 0;
    EXPECT_TRUE((*store)->db()->GetIntProperty("rocksdb.total-sst-files-size", &bytes));
    return bytes;
  };
  ASSERT_TRUE((*store)->db()->Flush(rocksdb::FlushOptions()).ok());
  const uint64_t full = size();
  const int64_t cut = 1'000'000 + 50 * 86400;
  auto deleted = (*store)->DeleteBefore("a", cut);
  ASSERT_THAT(deleted.status(), IsOk());
  EXPECT_EQ(*deleted, 50 * 14400);
  std::map<std::string, std::vector<HostSample>> seen;
  ASSERT_THAT((*store)->ForEachHost([&](const std::string& h, const HostMeta&,
                                        std::vector<HostSample> s) {
    auto& all = seen[h];
    all.insert(all.end(), s.begin(), s.end());
  }),
              IsOk());
  ASSERT_EQ(seen["a"].size(), 10u * 14400);
  EXPECT_EQ(seen["a"].front().unix_seconds, cut);
  EXPECT_EQ(seen["a"].back().unix_seconds, v.back().unix_seconds);
  EXPECT_EQ(seen["ab"].size(), 2u);
  EXPECT_EQ(seen["0"].size(), 1u);
  auto rev = (*store)->Revocations("a");
  ASSERT_THAT(rev.status(), IsOk());
  ASSERT_EQ(rev->size(), 1u);
  EXPECT_EQ(rev->front().first, cut);
  auto rev_ab = (*store)->Revocations("ab");
  ASSERT_THAT(rev_ab.status(), IsOk());
  EXPECT_EQ(rev_ab->size(), 1u);
  HostMeta kept_meta;
  ASSERT_THAT((*store)->ForEachHost([&](const std::string& h, const HostMeta& m,
                                        std::vector<HostSample>) {
    if (h == "a") kept_meta = m;
  }),
              IsOk());
  EXPECT_EQ(kept_meta.period_seconds, 6);
  auto blob = (*store)->GetBlob('u', "a");
  ASSERT_THAT(blob.status(), IsOk());
  EXPECT_EQ(*blob, "patterns");
  // The space comes back with the compaction of the range: five sixths of
  // the samples gone, at most a third of the space is left.
  ASSERT_THAT((*store)->CompactBefore("a", cut), IsOk());
  EXPECT_LT(size(), full / 3) << full;
  // Nothing before the cut any more.
  auto again = (*store)->DeleteBefore("a", cut);
  ASSERT_THAT(again.status(), IsOk());
  EXPECT_EQ(*again, 0);
}

// With a chunk size a host's samples come in consecutive calls of at most
// that many, in order, the meta with each, and no empty call after a last
// full chunk; ForEachSample reads one host's time range.
TEST(SampleStoreTest, ChunksAndRangesOfOneHost) {
  TempDir dir;
  auto store = SampleStore::Open(dir.path(), false);
  ASSERT_THAT(store.status(), IsOk());
  HostMeta meta;
  meta.period_seconds = 60;
  std::vector<HostSample> a, b;
  for (int64_t t = 1; t <= 10; ++t) a.push_back(At(t * 60, 0.1));
  for (int64_t t = 1; t <= 3; ++t) b.push_back(At(t * 60, 0.5));
  ASSERT_THAT((*store)->Append("a", a, &meta), IsOk());
  ASSERT_THAT((*store)->Append("ab", b, nullptr), IsOk());
  for (size_t chunk : {size_t{4}, size_t{5}}) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> calls;
    ASSERT_THAT((*store)->ForEachHost(
                    [&](const std::string& h, const HostMeta& m, std::vector<HostSample> v) {
                      EXPECT_EQ(m.period_seconds, h == "a" ? 60 : 0) << h;
                      std::vector<int64_t> times;
                      for (const HostSample& s : v) times.push_back(s.unix_seconds);
                      calls.emplace_back(h, times);
                    },
                    nullptr, chunk),
                IsOk());
    std::vector<std::pair<std::string, std::vector<int64_t>>> want;
    if (chunk == 4) {
      want = {{"a", {60, 120, 180, 240}}, {"a", {300, 360, 420, 480}}, {"a", {540, 600}},
              {"ab", {60, 120, 180}}};
    } else {
      want = {{"a", {60, 120, 180, 240, 300}}, {"a", {360, 420, 480, 540, 600}},
              {"ab", {60, 120, 180}}};
    }
    EXPECT_EQ(calls, want) << chunk;
  }
  // The times ForEachSample gives (at most `limit`).
  auto read = [&](const std::string& host, int64_t from, int64_t to, size_t limit) {
    std::vector<int64_t> times;
    EXPECT_THAT((*store)->ForEachSample(host, from, to,
                                        [&](const HostSample& s) {
                                          times.push_back(s.unix_seconds);
                                          return times.size() < limit;
                                        }),
                IsOk());
    return times;
  };
  EXPECT_EQ(read("a", 120, 400, 100), (std::vector<int64_t>{120, 180, 240, 300, 360}));
  // Stops when told; "a" is not read as a prefix of "ab".
  EXPECT_EQ(read("a", INT64_MIN, INT64_MAX, 2), (std::vector<int64_t>{60, 120}));
  EXPECT_EQ(read("ab", 0, INT64_MAX, 100), (std::vector<int64_t>{60, 120, 180}));
  EXPECT_TRUE(read("a", 400, 400, 100).empty());
}

// Unknown free memory stays unknown through the store.
TEST(SampleStoreTest, KeepsUnknownMemoryUnknown) {
  TempDir dir;
  auto store = SampleStore::Open(dir.path(), false);
  ASSERT_THAT(store.status(), IsOk());
  HostSample s;
  s.unix_seconds = 100;
  s.cpu_load = 0.5;
  ASSERT_THAT((*store)->Append("h", {s}, nullptr), IsOk());
  std::vector<HostSample> got;
  ASSERT_THAT((*store)->ForEachHost([&](const std::string&, const HostMeta&,
                                        std::vector<HostSample> v) { got = std::move(v); }),
              IsOk());
  ASSERT_EQ(got.size(), 1u);
  EXPECT_FALSE(got[0].has_free_mem());
}

// Opening a path that cannot be a database fails with a status, not a crash.
TEST(SampleStoreTest, OpenFailsCleanly) {
  auto store = SampleStore::Open("/proc/definitely/not/writable", true);
  EXPECT_FALSE(store.ok());
}

// Writes raw key/value pairs into the RocksDB at `path` (the store closed).
void PutRaw(const std::string& path, const std::vector<std::pair<std::string, std::string>>& kv) {
  rocksdb::Options options;
  options.create_if_missing = true;
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(options, path, &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  for (const auto& [k, v] : kv) ASSERT_TRUE(db->Put(rocksdb::WriteOptions(), k, v).ok());
}

std::string SampleKey(const std::string& host, int64_t t) {
  std::string k("s\0", 2);
  k += host;
  k.push_back('\0');
  const uint64_t u = static_cast<uint64_t>(t) ^ (1ULL << 63);
  for (int i = 7; i >= 0; --i) k.push_back(static_cast<char>((u >> (8 * i)) & 0xff));
  return k;
}

// Damaged records (garbage value, a value stamped unlike its key, a key of
// the wrong shape, an unparsable meta) are left out and counted; the good
// records of the same host still load, and nothing is deleted. (Before:
// ForEachHost failed with DATA_LOSS and the state manager refused to start
// without naming the key.)
TEST(SampleStoreTest, SkipsDamagedRecordsAndKeepsThem) {
  TempDir dir;
  {
    auto store = SampleStore::Open(dir.path(), true);
    ASSERT_THAT(store.status(), IsOk());
    HostMeta meta;
    meta.period_seconds = 300;
    ASSERT_THAT((*store)->Append("a", {At(10, 0.1), At(20, 0.2), At(40, 0.4)}, &meta), IsOk());
    ASSERT_THAT((*store)->Append("b", {At(10, 0.5)}, &meta), IsOk());
  }
  v1::HostSample late;
  late.set_unix_seconds(int64_t{1} << 62);
  late.set_cpu_load_ratio(0.1);
  const std::vector<std::pair<std::string, std::string>> damaged = {
      {SampleKey("a", 15), "\xff\xff\xff"},            // not a proto
      {SampleKey("a", 30), late.SerializeAsString()},  // stamped unlike its key
      {std::string("s\0x", 3), "\x08\x01"},           // key too short
      {std::string("m\0b", 3), "\xff\xff"},            // meta does not parse
  };
  ASSERT_NO_FATAL_FAILURE(PutRaw(dir.path(), damaged));
  {
    auto store = SampleStore::Open(dir.path(), true);
    ASSERT_THAT(store.status(), IsOk());
    std::map<std::string, std::vector<HostSample>> seen;
    std::map<std::string, HostMeta> metas;
    int64_t skipped = 0;
    ASSERT_THAT((*store)->ForEachHost(
                    [&](const std::string& h, const HostMeta& m, std::vector<HostSample> v) {
                      seen[h] = std::move(v);
                      metas[h] = m;
                    },
                    &skipped),
                IsOk());
    EXPECT_EQ(skipped, 4);
    ASSERT_EQ(seen["a"].size(), 3u);
    EXPECT_EQ(seen["a"][0].unix_seconds, 10);
    EXPECT_EQ(seen["a"][1].unix_seconds, 20);
    EXPECT_EQ(seen["a"][2].unix_seconds, 40);
    EXPECT_EQ(metas["a"].period_seconds, 300);
    ASSERT_EQ(seen["b"].size(), 1u);
    EXPECT_EQ(metas["b"].period_seconds, 0);  // unknown, not garbage
  }
  rocksdb::DB* raw = nullptr;
  ASSERT_TRUE(rocksdb::DB::Open(rocksdb::Options(), dir.path(), &raw).ok());
  std::unique_ptr<rocksdb::DB> db(raw);
  for (const auto& [k, v] : damaged) {
    std::string value;
    EXPECT_TRUE(db->Get(rocksdb::ReadOptions(), k, &value).ok()) << "deleted: " << k;
    EXPECT_EQ(value, v);
  }
}

// A predictor's job history (RocksHistDb, marked by "mformat") is refused
// with FAILED_PRECONDITION rather than read as damaged samples (before: the
// state manager died with "DATA_LOSS: malformed sample of host <binary>").
TEST(SampleStoreTest, RefusesPredictorHistDb) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(PutRaw(dir.path(), {{"mformat", "2"}, {"mseq", std::string(8, '\0')}}));
  auto store = SampleStore::Open(dir.path(), true);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("job history"), absl::string_view::npos)
      << store.status();
}

// So is a broker's job queue (its "format" key, services/broker/job_queue.cc):
// the state manager had written its samples among the queue's jobs (session
// 43 durability audit), and the broker then opened the mixed database.
TEST(SampleStoreTest, RefusesBrokerJobQueue) {
  TempDir dir;
  ASSERT_NO_FATAL_FAILURE(PutRaw(dir.path(), {{"format", "sojourn-broker-jobs-v1"}}));
  auto store = SampleStore::Open(dir.path(), true);
  EXPECT_EQ(store.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(store.status().message().find("holds a broker job queue (key 'format')"),
            absl::string_view::npos)
      << store.status();
}

// A host whose attributes came before any sample (a PushSamples message with
// attributes and no samples, acknowledged) is stored by its meta alone and
// comes back from ForEachHost after a reopen, once, without samples (before:
// only sample keys were scanned, so it vanished at a restart). A meta-only
// host whose meta does not parse still comes back, its meta unknown; a meta
// key of the wrong shape is left out and counted.
TEST(SampleStoreTest, MetaOnlyHostSurvivesReopen) {
  TempDir dir;
  {
    auto store = SampleStore::Open(dir.path(), true);
    ASSERT_THAT(store.status(), IsOk());
    HostMeta meta;
    meta.attributes.set_cpu_mhz(1234);
    meta.attributes.set_cpu_cores(8);
    meta.attributes.set_total_mem_mb(999);
    ASSERT_THAT((*store)->Append("pxattr2", {}, &meta), IsOk());
    HostMeta with_samples;
    with_samples.period_seconds = 300;
    ASSERT_THAT((*store)->Append("a", {At(10, 0.1)}, &with_samples), IsOk());
    ASSERT_THAT((*store)->Append("z", {At(10, 0.1)}, nullptr), IsOk());
  }
  ASSERT_NO_FATAL_FAILURE(PutRaw(dir.path(), {{std::string("m\0broken", 8), "\xff\xff"},
                                              {std::string("m\0", 2), "\x08\x01"}}));
  auto store = SampleStore::Open(dir.path(), true);
  ASSERT_THAT(store.status(), IsOk());
  std::map<std::string, int> calls;
  std::map<std::string, std::vector<HostSample>> seen;
  std::map<std::string, HostMeta> metas;
  int64_t skipped = 0;
  ASSERT_THAT((*store)->ForEachHost(
                  [&](const std::string& h, const HostMeta& m, std::vector<HostSample> v) {
                    ++calls[h];
                    seen[h] = std::move(v);
                    metas[h] = m;
                  },
                  &skipped),
              IsOk());
  EXPECT_EQ(calls, (std::map<std::string, int>{{"a", 1}, {"broken", 1}, {"pxattr2", 1},
                                               {"z", 1}}));
  EXPECT_EQ(skipped, 2);  // the unparsable meta and the key with no host
  EXPECT_TRUE(seen["pxattr2"].empty());
  EXPECT_DOUBLE_EQ(metas["pxattr2"].attributes.cpu_mhz(), 1234);
  EXPECT_DOUBLE_EQ(metas["pxattr2"].attributes.cpu_cores(), 8);
  EXPECT_DOUBLE_EQ(metas["pxattr2"].attributes.total_mem_mb(), 999);
  EXPECT_EQ(metas["pxattr2"].period_seconds, 0);
  EXPECT_TRUE(seen["broken"].empty());
  EXPECT_DOUBLE_EQ(metas["broken"].attributes.cpu_cores(), 0);
  ASSERT_EQ(seen["a"].size(), 1u);
  EXPECT_EQ(metas["a"].period_seconds, 300);
  ASSERT_EQ(seen["z"].size(), 1u);
}

}  // namespace
}  // namespace sojourn::statemgr
