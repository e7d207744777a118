// Tests of common/proc_stat.h on a /proc laid out by the test and on this
// process's real one, and of the process metrics every Metrics exports
// (common/metrics.h).
#include "common/proc_stat.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/base/config.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/metrics.h"
#include "gtest/gtest.h"

namespace sojourn {
namespace {

// Taken while static objects are built, just after the process started.
const double kInitUnixSeconds = absl::ToDoubleSeconds(absl::Now() - absl::UnixEpoch());

// The command may hold spaces and ')': the fields are those after the last ')'.
TEST(PidStatFieldsTest, SplitsAfterTheCommand) {
  auto f = PidStatFields("4242 (a) b (c)) S 1 2 3\n");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->size(), 4u);
  EXPECT_EQ((*f)[0], "S");  // field 3
  EXPECT_EQ((*f)[3], "3");  // field 6, no newline
  EXPECT_EQ(PidStatFields("4242 no command").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(PidStatFields("4242 (cmd) \n").status().code(), absl::StatusCode::kDataLoss);
}

// A /proc of the test's own: every figure comes from the field proc(5) names.
class FakeProcTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ = std::filesystem::path(::testing::TempDir()) /
            absl::StrCat("proc_stat_test_", getpid(), "_",
                         ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_ / "42" / "fd");
    Write("stat", "cpu  1 2 3 4 5 6 7 8 0 0\nbtime 1700000000\nprocesses 9\n");
    // Fields 1..24: utime (14) 250, stime (15) 50, starttime (22) 12345,
    // vsize (23) 1000000, rss (24) 300.
    Write("42/stat",
          "42 (my (daemon)) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 12345 1000000 "
          "300 18446744073709551615\n");
    for (const char* fd : {"0", "1", "2"}) Write(absl::StrCat("42/fd/", fd), "");
    Write("42/limits",
          "Limit                     Soft Limit           Hard Limit           Units     \n"
          "Max cpu time              unlimited            unlimited            seconds   \n"
          "Max open files            1024                 524288               files     \n");
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& rel, const std::string& text) {
    std::ofstream(root_ / rel) << text;
  }
  absl::StatusOr<ProcessUsage> Read() {
    return ReadProcessUsage(root_.string(), "42", /*ticks_per_second=*/100, /*page_size=*/4096);
  }

  std::filesystem::path root_;
};

TEST_F(FakeProcTest, ReadsEachField) {
  auto u = Read();
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_DOUBLE_EQ(u->cpu_seconds, 3.0);                         // (250 + 50) / 100
  EXPECT_DOUBLE_EQ(u->start_unix_seconds, 1700000000 + 123.45);  // btime + 12345 / 100
  EXPECT_DOUBLE_EQ(u->virtual_bytes, 1000000);
  EXPECT_DOUBLE_EQ(u->resident_bytes, 300 * 4096);
  EXPECT_EQ(u->open_fds, 3);
  ASSERT_TRUE(u->max_fds.has_value());
  EXPECT_EQ(*u->max_fds, 1024);
}

TEST_F(FakeProcTest, AnUnlimitedOrMissingLimitIsUnset) {
  Write("42/limits", "Max open files            unlimited            unlimited            files\n");
  auto u = Read();
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_FALSE(u->max_fds.has_value());
  std::filesystem::remove(root_ / "42" / "limits");
  u = Read();
  ASSERT_TRUE(u.ok()) << u.status();
  EXPECT_FALSE(u->max_fds.has_value());
}

TEST_F(FakeProcTest, MalformedFilesAreNamed) {
  Write("42/stat", "42 (d) S 1 42 42 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 3 0 12345 1000000\n");
  auto u = Read();
  EXPECT_EQ(u.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(u.status().message().find("42/stat: no number in field 24"), std::string::npos)
      << u.status();
  Write("42/stat", "42 (d) S 1 42 42 0 -1 4194560 100 0 0 0 x 50 0 0 20 0 3 0 12345 1 2\n");
  EXPECT_NE(Read().status().message().find("field 14"), std::string::npos);

  SetUp();
  Write("stat", "cpu  1 2 3 4 5 6 7 8 0 0\n");
  u = Read();
  EXPECT_EQ(u.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(u.status().message().find("no btime line"), std::string::npos) << u.status();

  EXPECT_EQ(ReadProcessUsage(root_.string(), "43", 100, 4096).status().code(),
            absl::StatusCode::kNotFound);
}

// This process's real /proc: the figures move with what the process does.
TEST(ProcessUsageTest, FollowsThisProcess) {
  auto before = ReadProcessUsage();
  ASSERT_TRUE(before.ok()) << before.status();

  // Descriptors: five more while they are open, the same count after.
  int fds[2][2];
  ASSERT_EQ(pipe(fds[0]), 0);
  ASSERT_EQ(pipe(fds[1]), 0);
  FILE* file = std::fopen("/dev/null", "r");
  ASSERT_NE(file, nullptr);
  auto open = ReadProcessUsage();
  ASSERT_TRUE(open.ok()) << open.status();
  EXPECT_EQ(open->open_fds, before->open_fds + 5);
  for (auto& p : fds) {
    close(p[0]);
    close(p[1]);
  }
  std::fclose(file);
  auto closed = ReadProcessUsage();
  ASSERT_TRUE(closed.ok()) << closed.status();
  EXPECT_EQ(closed->open_fds, before->open_fds);

  // The soft limit is the one getrlimit reports.
  struct rlimit limit;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_cur == RLIM_INFINITY) {
    EXPECT_FALSE(before->max_fds.has_value());
  } else {
    ASSERT_TRUE(before->max_fds.has_value());
    EXPECT_EQ(*before->max_fds, static_cast<int64_t>(limit.rlim_cur));
  }

  // 64 MiB written page by page are resident.
  std::vector<char> block(64 << 20);
  for (size_t i = 0; i < block.size(); i += 4096) block[i] = static_cast<char>(i);
  auto touched = ReadProcessUsage();
  ASSERT_TRUE(touched.ok()) << touched.status();
  EXPECT_GE(touched->resident_bytes - before->resident_bytes, 60.0 * (1 << 20));
  EXPECT_GE(touched->virtual_bytes - before->virtual_bytes, 60.0 * (1 << 20));

  // CPU time grows while the process computes; the loop ends as soon as the
  // kernel's tick count moves (a failure, not a hang, after 60 s).
  const absl::Time give_up = absl::Now() + absl::Seconds(60);
  double cpu = touched->cpu_seconds;
  volatile uint64_t sink = 0;
  while (cpu <= touched->cpu_seconds && absl::Now() < give_up) {
    for (int i = 0; i < 1000000; ++i) sink = sink + static_cast<uint64_t>(i) * block[i % 4096];
    auto now = ReadProcessUsage();
    ASSERT_TRUE(now.ok()) << now.status();
    cpu = now->cpu_seconds;
  }
  EXPECT_GT(cpu, touched->cpu_seconds);

  // The start is boot time (whole seconds) plus ticks: at most a second after
  // the static objects were built, and not long before.
  EXPECT_LE(before->start_unix_seconds, kInitUnixSeconds + 1.0);
  EXPECT_GE(before->start_unix_seconds, kInitUnixSeconds - 30.0);
}

// The soft limit goes up to the hard one; a second call changes nothing.
TEST(RaiseOpenFileLimitTest, SoftUpToHard) {
  struct rlimit limit;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &limit), 0);
  if (limit.rlim_max == RLIM_INFINITY || limit.rlim_max <= 64) {
    GTEST_SKIP() << "hard limit " << limit.rlim_max;
  }
  struct rlimit low = limit;
  low.rlim_cur = 64;
  ASSERT_EQ(setrlimit(RLIMIT_NOFILE, &low), 0);
  auto raised = RaiseOpenFileLimit();
  ASSERT_TRUE(raised.ok()) << raised.status();
  EXPECT_EQ(raised->before, 64);
  EXPECT_EQ(raised->hard, static_cast<int64_t>(limit.rlim_max));
  struct rlimit now;
  ASSERT_EQ(getrlimit(RLIMIT_NOFILE, &now), 0);
  EXPECT_EQ(now.rlim_cur, limit.rlim_max);
  EXPECT_EQ(now.rlim_max, limit.rlim_max);
  auto usage = ReadProcessUsage();
  ASSERT_TRUE(usage.ok()) << usage.status();
  EXPECT_EQ(usage->max_fds, static_cast<int64_t>(limit.rlim_max));
  raised = RaiseOpenFileLimit();
  ASSERT_TRUE(raised.ok()) << raised.status();
  EXPECT_EQ(raised->before, raised->hard);
}

// The value of series `name` (the first line that starts with it) in
// exposition text, or -1.
double Value(const std::string& text, const std::string& name) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, name)) continue;
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ');
    double v = -1;
    if (parts.size() >= 2 && absl::SimpleAtod(parts[1], &v)) return v;
  }
  return -1;
}

// Every Metrics exports the process's figures beside its own series, and the
// heap in use follows a live allocation.
TEST(ProcessMetricsTest, ExportedByEveryMetrics) {
  Metrics metrics("svc");
  metrics.Set("sojourn_test_gauge", "A gauge", {}, 1);
  const std::string text = metrics.Render();
  EXPECT_GT(Value(text, "sojourn_test_gauge{service=\"svc\"}"), 0);
  for (const char* name :
       {"process_cpu_seconds_total", "process_start_time_seconds", "process_resident_memory_bytes",
        "process_virtual_memory_bytes", "process_open_fds"}) {
    EXPECT_GT(Value(text, absl::StrCat(name, "{service=\"svc\"}")), 0) << name << "\n" << text;
  }
  EXPECT_NE(text.find("# TYPE process_cpu_seconds_total counter"), std::string::npos);
  EXPECT_NE(text.find("# TYPE process_resident_memory_bytes gauge"), std::string::npos);
#if defined(__GLIBC__) && !defined(ABSL_HAVE_ADDRESS_SANITIZER) && \
    !defined(ABSL_HAVE_THREAD_SANITIZER) && !defined(ABSL_HAVE_MEMORY_SANITIZER)
  // (A sanitizer's allocator replaces glibc's, whose counts then stay near 0.)
  const double in_use = Value(text, "sojourn_process_heap_in_use_bytes{service=\"svc\"}");
  ASSERT_GT(in_use, 0) << text;
  EXPECT_GE(Value(text, "sojourn_process_heap_free_bytes{service=\"svc\"}"), 0);
  std::vector<char> block(32 << 20, 1);
  EXPECT_GE(Value(metrics.Render(), "sojourn_process_heap_in_use_bytes{service=\"svc\"}") - in_use,
            30.0 * (1 << 20));
  EXPECT_EQ(block[12345], 1);
#endif
}

}  // namespace
}  // namespace sojourn
