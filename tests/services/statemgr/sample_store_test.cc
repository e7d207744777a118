#include "services/statemgr/sample_store.h"

#include <map>

#include "gtest/gtest.h"
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

}  // namespace
}  // namespace sojourn::statemgr
