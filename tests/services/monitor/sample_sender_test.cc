// The monitor's spool file at start-up: damaged, unordered or oversized
// content never costs the good samples around it.
#include "services/monitor/sample_sender.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace sojourn::monitor {
namespace {

using sojourn::testing::TempDir;

constexpr int64_t kNow = 1'700'000'000;

// At most 1 MB (a spool replaced by a link to /dev/full reads without end).
std::string Read(const std::string& path) {
  std::ifstream in(path);
  std::string out(1 << 20, '\0');
  in.read(out.data(), static_cast<std::streamsize>(out.size()));
  out.resize(static_cast<size_t>(in.gcount()));
  return out;
}

// Timestamps of the spool's lines.
std::vector<int64_t> SpoolTimes(const std::string& path) {
  std::vector<int64_t> out;
  for (absl::string_view line : absl::StrSplit(Read(path), '\n', absl::SkipEmpty())) {
    out.push_back(std::stoll(std::string(line.substr(0, line.find(',')))));
  }
  return out;
}

// A sample at `t` with load 0.1.
HostSample At(int64_t t) {
  HostSample s;
  s.unix_seconds = t;
  s.cpu_load = 0.1;
  return s;
}

class SampleSenderSpoolTest : public ::testing::Test {
 protected:
  SenderConfig Config() {
    SenderConfig c;
    c.host = "h";
    c.statemgr_address = "127.0.0.1:1";  // never contacted here
    c.spool_path = dir_.File("spool");
    return c;
  }
  std::string Line(int64_t t, const std::string& load = "0.5") {
    return absl::StrCat(t, ",", load, ",1000,0,0\n");
  }
  TempDir dir_;
  FakeClock clock_{absl::FromUnixSeconds(kNow)};
};

// One line stamped far in the future used to drop every good line after it
// (only strictly later lines were kept) and the rewrite deleted them from
// the spool. Now the bad lines move to spool.rejected and the good ones stay.
TEST_F(SampleSenderSpoolTest, BadLinesDoNotCostTheGoodOnes) {
  std::ofstream(dir_.File("spool"))
      << Line(kNow - 60) << Line(kNow - 54) << Line(kNow - 48)
      << Line(99999999999) << "garbage\n" << Line(kNow - 45, "5.0") << Line(kNow - 44, "nan")
      << Line(kNow - 42) << Line(kNow - 36) << Line(kNow - 30) << "1700000";  // torn last line
  SampleSender sender(Config(), clock_);
  EXPECT_EQ(sender.restored(), 6u);
  EXPECT_EQ(sender.rejected(), 5u);
  EXPECT_EQ(sender.unacknowledged(), 6u);
  EXPECT_EQ(SpoolTimes(dir_.File("spool")),
            (std::vector<int64_t>{kNow - 60, kNow - 54, kNow - 48, kNow - 42, kNow - 36,
                                  kNow - 30}));
  const std::string rejected = Read(dir_.File("spool.rejected"));
  EXPECT_NE(rejected.find("99999999999,"), std::string::npos) << rejected;
  EXPECT_NE(rejected.find("garbage"), std::string::npos) << rejected;
  EXPECT_NE(rejected.find(",5.0,"), std::string::npos) << rejected;
  EXPECT_NE(rejected.find(",nan,"), std::string::npos) << rejected;
}

// Lines out of time order (a clock stepped back while the state manager was
// down) are all kept, sorted, each time once: before, every line earlier
// than one before it was dropped.
TEST_F(SampleSenderSpoolTest, UnorderedLinesAreSortedNotDropped) {
  std::ofstream(dir_.File("spool"))
      << Line(kNow - 10) << Line(kNow - 30) << Line(kNow - 20) << Line(kNow - 20);
  SampleSender sender(Config(), clock_);
  EXPECT_EQ(sender.restored(), 3u);
  EXPECT_EQ(sender.rejected(), 0u);
  EXPECT_EQ(SpoolTimes(dir_.File("spool")),
            (std::vector<int64_t>{kNow - 30, kNow - 20, kNow - 10}));
}

// A line of megabytes (no newline) is rejected without being held whole,
// and the good lines around it load.
TEST_F(SampleSenderSpoolTest, OverlongLineIsRejected) {
  {
    std::ofstream out(dir_.File("spool"));
    out << Line(kNow - 20) << std::string(4 << 20, '7') << "\n" << Line(kNow - 10);
  }
  SampleSender sender(Config(), clock_);
  EXPECT_EQ(sender.restored(), 2u);
  EXPECT_EQ(sender.rejected(), 1u);
  EXPECT_EQ(SpoolTimes(dir_.File("spool")), (std::vector<int64_t>{kNow - 20, kNow - 10}));
  EXPECT_LT(Read(dir_.File("spool.rejected")).size(), 4096u);
}

// Samples added out of time order are buffered in order, a repeated time
// once (the restart reads back what Add appended).
TEST_F(SampleSenderSpoolTest, AddKeepsTimeOrder) {
  {
    SampleSender sender(Config(), clock_);
    for (int64_t t : {kNow - 10, kNow - 5, kNow - 8, kNow - 5}) sender.Add(At(t));
    EXPECT_EQ(sender.unacknowledged(), 3u);
  }
  SampleSender restarted(Config(), clock_);
  EXPECT_EQ(restarted.restored(), 3u);
  EXPECT_EQ(SpoolTimes(dir_.File("spool")), (std::vector<int64_t>{kNow - 10, kNow - 8, kNow - 5}));
}

// A full buffer (the state manager away for days) drops the oldest
// sixteenth at once: the spool is rewritten once per max_buffer / 16 new
// samples, and appended to in between, instead of rewritten on every sample.
TEST_F(SampleSenderSpoolTest, FullBufferDropsASixteenthAtOnce) {
  SenderConfig c = Config();
  c.max_buffer = 32;
  SampleSender sender(c, clock_);
  auto add = [&](int64_t t) { sender.Add(At(t)); };
  std::vector<int64_t> want;
  for (int64_t t = 1; t <= 32; ++t) {
    add(kNow - 100 + t);
    want.push_back(kNow - 100 + t);
  }
  EXPECT_EQ(SpoolTimes(dir_.File("spool")), want);
  add(kNow - 100 + 33);  // 33 > 32: down to 30, the oldest three gone
  want.push_back(kNow - 100 + 33);
  want.erase(want.begin(), want.begin() + 3);
  EXPECT_EQ(sender.unacknowledged(), 30u);
  EXPECT_EQ(SpoolTimes(dir_.File("spool")), want);
  add(kNow - 100 + 34);  // appended, nothing dropped
  want.push_back(kNow - 100 + 34);
  EXPECT_EQ(sender.unacknowledged(), 31u);
  EXPECT_EQ(SpoolTimes(dir_.File("spool")), want);
}

// A spool that cannot be written (here: /dev/full, a full disk) is said in
// the log and counted, never replaced by what failed to be written: the
// rewrite after a drop used to rename an empty file over the good spool
// (the failure showed only at close), and appends failed unsaid.
TEST_F(SampleSenderSpoolTest, FailedSpoolWritesKeepTheOldSpool) {
  SenderConfig c = Config();
  c.max_buffer = 4;
  SampleSender sender(c, clock_);
  auto add = [&](int64_t t) { sender.Add(At(t)); };
  for (int64_t t = 1; t <= 4; ++t) add(kNow - 100 + t);
  ASSERT_EQ(SpoolTimes(dir_.File("spool")).size(), 4u);
  EXPECT_EQ(sender.spool_write_errors(), 0u);
  // The rewrite's temporary file lands on a full disk.
  ASSERT_EQ(symlink("/dev/full", dir_.File("spool.tmp").c_str()), 0);
  add(kNow - 100 + 5);  // 5 > 4: drop and rewrite, which fails
  EXPECT_EQ(sender.spool_write_errors(), 1u);
  EXPECT_EQ(SpoolTimes(dir_.File("spool")),
            (std::vector<int64_t>{kNow - 99, kNow - 98, kNow - 97, kNow - 96, kNow - 95}));
  EXPECT_FALSE(std::filesystem::exists(dir_.File("spool.tmp")));
  // Appends to a full disk are counted too.
  std::filesystem::remove(dir_.File("spool"));
  ASSERT_EQ(symlink("/dev/full", dir_.File("spool").c_str()), 0);
  add(kNow - 100 + 6);
  EXPECT_EQ(sender.spool_write_errors(), 2u);
  EXPECT_EQ(sender.unacknowledged(), 4u);  // in memory (max_buffer)
  // The next rewrite (this drop's) goes to a writable file again and
  // replaces the link: the spool holds the buffer.
  EXPECT_EQ(SpoolTimes(dir_.File("spool")),
            (std::vector<int64_t>{kNow - 97, kNow - 96, kNow - 95, kNow - 94}));
}

}  // namespace
}  // namespace sojourn::monitor
