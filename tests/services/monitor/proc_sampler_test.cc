#include "services/monitor/proc_sampler.h"

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace sojourn::monitor {
namespace {

using sojourn::testing::IsOk;
using sojourn::testing::TempDir;

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// A directory laid out like /proc with controllable counters.
class FakeProc {
 public:
  void Set(uint64_t user, uint64_t idle, uint64_t guest_ticks, uint64_t swpin) {
    Write(dir_.File("stat"),
          "cpu  " + std::to_string(user) + " 0 0 " + std::to_string(idle) +
              " 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\ncpu1 1 0 0 1 0 0 0 0 0 0\n");
    Write(dir_.File("meminfo"), "MemTotal:       8388608 kB\nMemAvailable:   2097152 kB\n");
    Write(dir_.File("vmstat"), "pswpin " + std::to_string(swpin) + "\npswpout 0\n");
    // /proc/<pid>/stat: utime is field 14, stime field 15.
    Write(dir_.File("4242/stat"), "4242 (guest job) R 1 1 1 0 -1 0 0 0 0 0 " +
                                      std::to_string(guest_ticks) + " 0 0 0 20 0 1 0\n");
  }
  std::string root() const { return dir_.path(); }

 private:
  TempDir dir_;
};

// Load is the busy share of CPU time minus the guest's own CPU time.
TEST(ProcSamplerTest, ExcludesGuestCpuTime) {
  FakeProc proc;
  ProcSampler sampler(proc.root());
  proc.Set(/*user=*/1000, /*idle=*/1000, /*guest=*/100, 0);
  auto first = sampler.Sample(100, {4242});
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_FALSE(first->has_value());  // the first reading only starts an interval
  // +600 busy ticks of which 300 are the guest's, +400 idle: host load 0.3.
  proc.Set(1600, 1400, 400, 60);
  auto second = sampler.Sample(106, {4242});
  ASSERT_THAT(second.status(), IsOk());
  ASSERT_TRUE(second->has_value());
  EXPECT_NEAR((*second)->cpu_load, 0.3, 1e-12);
  EXPECT_NEAR((*second)->free_mem_mb, 2048, 1e-9);
  EXPECT_NEAR((*second)->swap_in_per_s, 10, 1e-9);
  EXPECT_EQ((*second)->unix_seconds, 106);
  // Without registering the guest, its time counts as host load.
  ProcSampler plain(proc.root());
  proc.Set(1000, 1000, 100, 0);
  (void)plain.Sample(100, {});
  proc.Set(1600, 1400, 400, 0);
  EXPECT_NEAR((*plain.Sample(106, {}))->cpu_load, 0.6, 1e-12);
}

// A counter going backwards (reboot, pid reuse) restarts the interval instead
// of producing a bogus sample.
TEST(ProcSamplerTest, CounterResetRestartsInterval) {
  FakeProc proc;
  ProcSampler sampler(proc.root());
  proc.Set(5000, 5000, 500, 0);
  (void)sampler.Sample(100, {4242});
  proc.Set(100, 100, 10, 0);  // reset
  auto s = sampler.Sample(106, {4242});
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_FALSE(s->has_value());
  proc.Set(200, 200, 10, 0);
  s = sampler.Sample(112, {4242});
  ASSERT_TRUE(s->has_value());
  EXPECT_NEAR((*s)->cpu_load, 0.5, 1e-12);
}

// The real /proc of this machine reads and gives a load in [0, 1].
TEST(ProcSamplerTest, ReadsTheRealProc) {
  ProcSampler sampler;
  auto c = sampler.Read({});
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_GT(c->total_ticks, 0u);
  EXPECT_GT(c->mem_total_mb, 0);
  EXPECT_GE(c->cpus, 1);
  auto attrs = sampler.Attributes();
  EXPECT_GE(attrs.cpu_cores(), 1);
  ProcCounters later = *c;
  later.total_ticks += 100;
  later.idle_ticks += 25;
  auto s = ProcSampler::Diff(*c, later, 1.0);
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(s->cpu_load, 0.75, 1e-12);
}

// A missing /proc is an error status, not a crash.
TEST(ProcSamplerTest, MissingProcIsAnError) {
  ProcSampler sampler("/nonexistent-proc");
  EXPECT_FALSE(sampler.Read({}).ok());
}

}  // namespace
}  // namespace sojourn::monitor
