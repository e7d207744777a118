#include "models/turnaround/swf.h"

#include <zlib.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace sojourn::turnaround {
namespace {

constexpr char kLog[] =
    "; Version: 2.2\n"
    "; UnixStartTime: 893466664\n"
    "; MaxNodes: 128\n"
    "; MaxProcs: 256\n"
    "; Queue:  0  interactive\n"
    "; Queue:  1  express\n"
    ";   free text without a key\n"
    "   11   566129      5  28826    1  27758    -1    1  28800    -1  5 153  75 18180  3 -1 -1 -1\n"
    "   19   580157  20861     -1   -1     -1    -1   38   6900    -1  5 189  75 18288  5 -1 -1 -1\n";

class SwfTest : public ::testing::Test {
 protected:
  std::filesystem::path TempFile(const std::string& name) {
    const char* tmp = std::getenv("TEST_TMPDIR");
    std::filesystem::path dir = std::filesystem::path(tmp ? tmp : "/tmp") /
                                ("swf_test_" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    return dir / name;
  }
};

// Header keys are honoured and job fields parsed; -1 stays unknown.
TEST_F(SwfTest, ParsesHeaderAndUnknownFields) {
  auto log = ParseSwf(kLog, "mem", {});
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->header.version, "2.2");
  EXPECT_EQ(log->header.unix_start_time, 893466664);
  EXPECT_EQ(log->header.max_nodes, 128);
  EXPECT_EQ(log->header.max_procs, 256);
  // Job sizes (field 5) count processors: the machine is MaxProcs, not the
  // 128 nodes (2 processors each) it is made of.
  EXPECT_EQ(log->header.cluster_size(), 256);
  EXPECT_EQ(log->header.fields.at("Queue"), "0  interactive\n1  express");
  ASSERT_EQ(log->jobs.size(), 2u);
  const SwfJob& a = log->jobs[0];
  EXPECT_EQ(a.line, 8);
  EXPECT_EQ(a.job_number, 11);
  EXPECT_EQ(a.submit_time, 566129);
  EXPECT_EQ(a.wait_time, 5);
  EXPECT_EQ(a.run_time, 28826);
  EXPECT_EQ(a.procs(), 1);
  EXPECT_DOUBLE_EQ(a.avg_cpu_time, 27758);
  EXPECT_EQ(a.used_memory_kb, -1);
  EXPECT_EQ(a.requested_time, 28800);
  EXPECT_EQ(a.user, 153);
  EXPECT_EQ(a.executable, 18180);
  EXPECT_TRUE(a.has_turnaround());
  const SwfJob& b = log->jobs[1];
  EXPECT_EQ(b.run_time, -1);
  EXPECT_EQ(b.allocated_procs, -1);
  EXPECT_EQ(b.procs(), 38);  // falls back to the requested processors
  EXPECT_FALSE(b.has_turnaround());
  JobSpec spec = ToJobSpec(b);
  EXPECT_EQ(spec.procs, 38);
  EXPECT_EQ(spec.requested_time, 6900);
  EXPECT_EQ(spec.cpu_fraction, -1);
}

// A malformed line fails the read and names its line number.
TEST_F(SwfTest, RejectsMalformedLineWithLineNumber) {
  std::string text = std::string(kLog) + "20 1 2 3\n";
  auto log = ParseSwf(text, "bad.swf", {});
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(log.status().message().find("bad.swf:10:"), std::string::npos) << log.status();
  EXPECT_NE(log.status().message().find("18 fields"), std::string::npos);
}

// With kSkip, malformed lines are reported with their numbers and skipped.
TEST_F(SwfTest, SkipsMalformedLinesWhenAsked) {
  std::string text = std::string(kLog) +
                     "21 600000 1 2 1 x -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n"  // line 10
                     "22 600001 1 2 1 1 -1 1 10 -1 1 1 1 1 1 -1 -1 -7\n"  // line 11
                     "23 600002 1 2 1 1.5 -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n"
                     "24 600003 1 2 1.5 1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n";  // line 13
  SwfReadOptions opt;
  opt.on_malformed = SwfReadOptions::OnMalformed::kSkip;
  auto log = ParseSwf(text, "mixed.swf", opt);
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->skipped.size(), 3u);
  EXPECT_EQ(log->skipped[0].line, 10);
  EXPECT_NE(log->skipped[0].reason.find("field 6"), std::string::npos);
  EXPECT_EQ(log->skipped[1].line, 11);
  EXPECT_NE(log->skipped[1].reason.find("field 18"), std::string::npos);
  EXPECT_EQ(log->skipped[2].line, 13);
  EXPECT_NE(log->skipped[2].reason.find("field 5 '1.5' is not an integer"), std::string::npos)
      << log->skipped[2].reason;
  ASSERT_EQ(log->jobs.size(), 3u);  // two good lines of kLog + the fractional CPU time
  EXPECT_DOUBLE_EQ(log->jobs[2].avg_cpu_time, 1.5);
}

// The SWF definition permits floating-point times: time and memory fields
// may be fractional and are rounded to whole seconds / KB (a real log with
// "28826.00" run times was refused at its first job). Counts and ids must be
// whole numbers, which "128.0" is.
TEST_F(SwfTest, ReadsFractionalTimesAndIntegralDecimals) {
  const std::string line =
      "7 600000.4 5.5 28826.00 128.0 27758.25 10.5 128 28800.7 1024.2 1.0 153 75 18180 3 -1 -1 "
      "2.5\n";
  auto log = ParseSwf(std::string(kLog) + line, "frac.swf", {});
  ASSERT_TRUE(log.ok()) << log.status();
  ASSERT_EQ(log->jobs.size(), 3u);
  const SwfJob& j = log->jobs[2];
  EXPECT_EQ(j.submit_time, 600000);
  EXPECT_EQ(j.wait_time, 6);  // 5.5 rounds away from zero
  EXPECT_EQ(j.run_time, 28826);
  EXPECT_EQ(j.allocated_procs, 128);
  EXPECT_DOUBLE_EQ(j.avg_cpu_time, 27758.25);
  EXPECT_DOUBLE_EQ(j.used_memory_kb, 10.5);
  EXPECT_EQ(j.requested_time, 28801);
  EXPECT_EQ(j.requested_memory_kb, 1024);
  EXPECT_EQ(j.status, 1);
  EXPECT_EQ(j.think_time, 3);
  // "-1.00" is unknown, as -1 is.
  auto unknown = ParseSwf(
      std::string(kLog) + "8 600001 -1.00 -1.0 4 -1 -1 4 -1 -1 1 1 1 1 1 -1 -1 -1\n", "u.swf", {});
  ASSERT_TRUE(unknown.ok()) << unknown.status();
  EXPECT_EQ(unknown->jobs[2].wait_time, -1);
  EXPECT_EQ(unknown->jobs[2].run_time, -1);
  // A fraction in a count or id, and text anywhere, are still malformed.
  const std::pair<const char*, const char*> bad[] = {
      {"9 1 1 1 2.5 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1", "field 5 '2.5' is not an integer"},
      {"9 1 1 1 2 -1 -1 1 10 -1 1 7.5 1 1 1 -1 -1 -1", "field 12 '7.5' is not an integer"},
      {"9 1 1 abc 2 -1 -1 1 10 -1 1 7 1 1 1 -1 -1 -1", "field 4 'abc' is not a number"},
      {"9 1 1 0x10 2 -1 -1 1 10 -1 1 7 1 1 1 -1 -1 -1", "field 4 '0x10' is not a number"},
      {"9 1 1 1 2 0x1p3 -1 1 10 -1 1 7 1 1 1 -1 -1 -1", "field 6 '0x1p3' is not a number"},
      {"9 1 -0.5 1 2 -1 -1 1 10 -1 1 7 1 1 1 -1 -1 -1", "field 3 is -0.5 (negative and not -1)"},
      {"9 1 1 1 2 -1 1e300 1 10 -1 1 7 1 1 1 -1 -1 -1", "field 7 is 1e300, out of range"},
  };
  for (const auto& [text, want] : bad) {
    auto r = ParseSwf(std::string(kLog) + text + "\n", "bad.swf", {});
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(std::string("bad.swf:10: ") + want), std::string::npos)
        << r.status();
  }
}

// max_jobs stops early.
TEST_F(SwfTest, StopsAtMaxJobs) {
  SwfReadOptions opt;
  opt.max_jobs = 1;
  auto log = ParseSwf(kLog, "mem", opt);
  ASSERT_TRUE(log.ok());
  EXPECT_EQ(log->jobs.size(), 1u);
}

// Gzip files are read transparently and a missing file is NotFound.
TEST_F(SwfTest, ReadsGzipAndReportsMissingFile) {
  std::filesystem::path path = TempFile("log.swf.gz");
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzputs(f, kLog);
  gzclose(f);
  auto log = ReadSwf(path.string(), {});
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->jobs.size(), 2u);
  EXPECT_EQ(log->header.max_nodes, 128);
  auto missing = ReadSwf((path.parent_path() / "nope.swf").string(), {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  std::filesystem::remove_all(path.parent_path());
}

// Times whose sum would overflow int64 (and anything beyond kSwfMaxSeconds)
// and sizes beyond kSwfMaxNodes (which used to wrap in an int32 cast) are
// malformed lines with their file:line:field; kSkip skips them.
TEST_F(SwfTest, RejectsOutOfRangeTimesAndSizes) {
  struct Case {
    const char* line;
    const char* want;
  };
  const Case cases[] = {
      {"20 9223372036854775807 1 1 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1", "field 2 is"},
      {"20 1 5000000000000000000 5000000000000000000 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1",
       "field 3 is"},
      {"20 1 1 9223372036854775807 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1", "field 4 is"},
      {"20 1 1 1 1 1e300 -1 1 10 -1 1 1 1 1 1 -1 -1 -1", "field 6 is"},
      {"20 1 1 1 1 -1 -1 1 1000000000001 -1 1 1 1 1 1 -1 -1 -1", "field 9 is"},
      {"20 1 1 1 4294967296 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1", "field 5 is 4294967296"},
      {"20 1 1 1 -1 -1 -1 4294967296 10 -1 1 1 1 1 1 -1 -1 -1", "field 8 is"},
  };
  for (const Case& c : cases) {
    auto log = ParseSwf(std::string(kLog) + c.line + "\n", "big.swf", {});
    ASSERT_FALSE(log.ok()) << c.line;
    EXPECT_EQ(log.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(log.status().message().find("big.swf:10: "), std::string::npos) << log.status();
    EXPECT_NE(log.status().message().find(c.want), std::string::npos) << log.status();
    SwfReadOptions skip;
    skip.on_malformed = SwfReadOptions::OnMalformed::kSkip;
    auto skipped = ParseSwf(std::string(kLog) + c.line + "\n", "big.swf", skip);
    ASSERT_TRUE(skipped.ok()) << skipped.status();
    EXPECT_EQ(skipped->jobs.size(), 2u);
    ASSERT_EQ(skipped->skipped.size(), 1u);
    EXPECT_EQ(skipped->skipped[0].line, 10);
  }
  // The limits themselves are accepted (on a machine that large).
  auto edge = ParseSwf(std::string("; MaxNodes: 1000000\n") +
                           "20 1000000000000 0 1000000000000 1000000 -1 -1 1000000 10 -1 1 1 1 1 "
                           "1 -1 -1 -1\n",
                       "edge.swf", {});
  ASSERT_TRUE(edge.ok()) << edge.status();
  EXPECT_EQ(edge->jobs.size(), 1u);
}

// A job needing more processors than the header's machine (the larger of
// MaxNodes and MaxProcs) is kept and reported: counted in oversized_jobs, the
// first one in warnings with its line and field ("MaxNodes: 2" with
// 110-processor jobs used to replay silently with 1540 % error; refusing the
// whole log would lose a real log with a few such lines). Without a size in
// the header any size (up to kSwfMaxNodes) goes.
TEST_F(SwfTest, ReportsJobsLargerThanTheMachine) {
  const std::string header = "; Version: 2.2\n; MaxNodes: 2\n";
  const std::string small = "1 10 1 5 2 -1 -1 2 10 -1 1 1 1 1 1 -1 -1 -1\n";
  const std::string alloc110 = "2 20 1 5 110 -1 -1 110 10 -1 1 1 1 1 1 -1 -1 -1\n";
  const std::string req3 = "3 30 1 5 -1 -1 -1 3 10 -1 1 1 1 1 1 -1 -1 -1\n";
  auto log = ParseSwf(header + small + alloc110 + req3, "m.swf", {});
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->jobs.size(), 3u);
  EXPECT_TRUE(log->skipped.empty());
  EXPECT_EQ(log->oversized_jobs, 2);
  ASSERT_EQ(log->warnings.size(), 1u);
  EXPECT_EQ(log->warnings[0].line, 4);
  EXPECT_NE(log->warnings[0].reason.find("field 5 is 110 processors, more than MaxNodes 2"),
            std::string::npos)
      << log->warnings[0].reason;
  // Requested processors (field 8) count when none were allocated.
  auto req = ParseSwf(header + req3, "m.swf", {});
  ASSERT_TRUE(req.ok()) << req.status();
  ASSERT_EQ(req->warnings.size(), 1u);
  EXPECT_NE(req->warnings[0].reason.find("field 8 is 3 processors"), std::string::npos)
      << req->warnings[0].reason;
  auto fits = ParseSwf(header + small, "m.swf", {});
  ASSERT_TRUE(fits.ok());
  EXPECT_EQ(fits->oversized_jobs, 0);
  EXPECT_TRUE(fits->warnings.empty());
  // MaxProcs above MaxNodes (SMP nodes): the processors are the limit.
  auto smp = ParseSwf("; MaxNodes: 2\n; MaxProcs: 128\n" + alloc110, "smp.swf", {});
  ASSERT_TRUE(smp.ok()) << smp.status();
  EXPECT_EQ(smp->oversized_jobs, 0);
  auto headerless = ParseSwf(alloc110, "none.swf", {});
  ASSERT_TRUE(headerless.ok()) << headerless.status();
  EXPECT_EQ(headerless->oversized_jobs, 0);
}

// A MaxNodes / MaxProcs that is no positive integer is ignored (no machine
// size), with a warning naming its line, not silently.
TEST_F(SwfTest, WarnsOfMaxNodesThatIsNoSize) {
  for (const char* h : {"; MaxNodes: abc\n", "; MaxNodes: 0\n", "; MaxNodes: -5\n",
                        "; MaxProcs: 1.5\n", "; MaxProcs:\n"}) {
    const std::string text = std::string("; Version: 2.2\n") + h +
                             "1 1 1 1 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n";
    auto log = ParseSwf(text, "hdr.swf", {});
    ASSERT_TRUE(log.ok()) << h << log.status();
    EXPECT_LE(log->header.cluster_size(), 0) << h;
    EXPECT_EQ(log->jobs.size(), 1u);
    ASSERT_EQ(log->warnings.size(), 1u) << h;
    EXPECT_EQ(log->warnings[0].line, 2);
    EXPECT_NE(log->warnings[0].reason.find("is not a positive integer"), std::string::npos)
        << log->warnings[0].reason;
  }
}

// A UTF-8 byte-order mark before the first line is skipped (header or job),
// as the trace importers do; elsewhere it stays an error.
TEST_F(SwfTest, SkipsByteOrderMark) {
  const std::string bom = "\xEF\xBB\xBF";
  auto log = ParseSwf(bom + kLog, "bom.swf", {});
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->header.version, "2.2");
  EXPECT_EQ(log->jobs.size(), 2u);
  auto job_first = ParseSwf(bom + "1 1 1 1 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n", "bom.swf", {});
  ASSERT_TRUE(job_first.ok()) << job_first.status();
  EXPECT_EQ(job_first->jobs.size(), 1u);
  std::filesystem::path path = TempFile("bom.swf");
  { std::ofstream(path, std::ios::binary) << bom << kLog; }
  auto from_file = ReadSwf(path.string(), {});
  ASSERT_TRUE(from_file.ok()) << from_file.status();
  EXPECT_EQ(from_file->header.max_nodes, 128);
  EXPECT_EQ(from_file->jobs.size(), 2u);
  auto inside = ParseSwf(std::string(kLog) + bom + "1 1 1 1 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n",
                         "bom.swf", {});
  EXPECT_FALSE(inside.ok());
  std::filesystem::remove_all(path.parent_path());
}

// A node count the simulators cannot allocate is refused in the header.
TEST_F(SwfTest, RejectsHugeMaxNodesHeader) {
  for (const char* h : {"; MaxNodes: 9223372036854775807\n", "; MaxProcs: 100000000\n",
                        "; MaxNodes: 99999999999999999999\n"}) {
    auto log = ParseSwf(std::string(h) + "1 1 1 1 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n",
                        "hdr.swf", {});
    ASSERT_FALSE(log.ok()) << h;
    EXPECT_NE(log.status().message().find("hdr.swf:1: Max"), std::string::npos) << log.status();
    EXPECT_NE(log.status().message().find("above the limit of 1000000"), std::string::npos);
    SwfReadOptions skip;
    skip.on_malformed = SwfReadOptions::OnMalformed::kSkip;
    auto skipped = ParseSwf(std::string(h) + "1 1 1 1 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n",
                            "hdr.swf", skip);
    ASSERT_TRUE(skipped.ok());
    EXPECT_EQ(skipped->header.cluster_size(), -1);  // the value is ignored
    EXPECT_EQ(skipped->skipped.size(), 1u);
  }
  auto ok = ParseSwf("; MaxNodes: 1000000\n", "hdr.swf", {});
  ASSERT_TRUE(ok.ok());
  EXPECT_EQ(ok->header.max_nodes, 1000000);
}

// A NUL byte makes its line malformed instead of joining two lines.
TEST_F(SwfTest, RejectsNulByte) {
  std::string text = std::string(kLog) + "20 1 1 1 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1";
  text[text.size() - 30] = '\0';
  text += "\n21 2 1 1 1 -1 -1 1 10 -1 1 1 1 1 1 -1 -1 -1\n";
  std::filesystem::path path = TempFile("nul.swf");
  { std::ofstream(path, std::ios::binary) << text; }
  for (bool from_file : {false, true}) {
    auto log = from_file ? ReadSwf(path.string(), {}) : ParseSwf(text, path.string(), {});
    ASSERT_FALSE(log.ok());
    EXPECT_NE(log.status().message().find("nul.swf:10: the line contains a NUL byte"),
              std::string::npos)
        << log.status();
  }
  std::filesystem::remove_all(path.parent_path());
}

// A gzip stream cut mid-line is a truncated file, not a short last line.
TEST_F(SwfTest, ReportsTruncatedGzip) {
  std::filesystem::path path = TempFile("cut.swf.gz");
  std::string text = kLog;
  for (int i = 0; i < 2000; ++i) {
    text += std::to_string(100 + i) + " " + std::to_string(600000 + 37 * i) +
            " 5 28826 1 27758 -1 1 28800 -1 5 153 75 18180 3 -1 -1 -1\n";
  }
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
  const auto size = std::filesystem::file_size(path);
  std::filesystem::resize_file(path, size / 2);
  auto log = ReadSwf(path.string(), {});
  ASSERT_FALSE(log.ok());
  EXPECT_EQ(log.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_NE(log.status().message().find("truncated or corrupt gzip data after line"),
            std::string::npos)
      << log.status();
  std::filesystem::remove_all(path.parent_path());
}

// A log recompressed with xz, bzip2 or zstd is read as the plain one (it used
// to fail at line 1, "contains a NUL byte"); a zip archive and a truncated
// stream are refused with what they are.
TEST_F(SwfTest, ReadsOtherCompressions) {
  std::filesystem::path plain = TempFile("log.swf");
  std::string text = kLog;
  for (int i = 0; i < 3000; ++i) {
    text += std::to_string(100 + i) + " " + std::to_string(600000 + 37 * i) +
            " 5 28826 1 27758 -1 1 28800 -1 5 153 75 18180 3 -1 -1 -1\n";
  }
  std::ofstream(plain) << text;
  auto want = ReadSwf(plain.string(), {});
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_EQ(want->jobs.size(), 3002u);
  const std::string dir = plain.parent_path().string();
  struct Tool {
    const char* command;
    const char* suffix;
  };
  int tried = 0;
  for (const Tool& t : {Tool{"xz -kc", ".xz"}, Tool{"bzip2 -kc", ".bz2"}, Tool{"zstd -qc", ".zst"}}) {
    const std::string out = plain.string() + t.suffix;
    const std::string cmd = std::string(t.command) + " " + plain.string() + " > " + out + " 2>/dev/null";
    if (std::system(cmd.c_str()) != 0) continue;  // the tool is not installed
    ++tried;
    auto log = ReadSwf(out, {});
    ASSERT_TRUE(log.ok()) << t.suffix << ": " << log.status();
    ASSERT_EQ(log->jobs.size(), want->jobs.size()) << t.suffix;
    EXPECT_EQ(log->jobs.back().submit_time, want->jobs.back().submit_time);
    EXPECT_EQ(log->header.max_procs, 256);
    // Cut in the middle: a truncated stream, not a short log.
    std::filesystem::resize_file(out, std::filesystem::file_size(out) / 2);
    auto cut = ReadSwf(out, {});
    ASSERT_FALSE(cut.ok()) << t.suffix;
    EXPECT_EQ(cut.status().code(), absl::StatusCode::kDataLoss) << cut.status();
    EXPECT_NE(cut.status().message().find("truncated or corrupt"), std::string::npos)
        << cut.status();
  }
  EXPECT_GE(tried, 1) << "xz is a dependency of the build; at least it must be there";
  std::ofstream(dir + "/log.zip") << std::string("PK\x03\x04", 4) << std::string(100, 'x');
  auto zip = ReadSwf(dir + "/log.zip", {});
  ASSERT_FALSE(zip.ok());
  EXPECT_NE(zip.status().message().find("a zip archive, not an SWF log"), std::string::npos)
      << zip.status();
  std::filesystem::remove_all(dir);
}

// The shared logs: SDSC-SP2 has 59,715 jobs on 128 nodes; NASA iPSC has -1
// waits throughout (see their READMEs).
TEST_F(SwfTest, ReadsSharedLogs) {
  const char* shared = std::getenv("SOJOURN_SHARED_DIR");
  if (shared == nullptr) GTEST_SKIP() << "SOJOURN_SHARED_DIR not set";
  std::filesystem::path sdsc = std::filesystem::path(shared) / "data/swf-sdsc-sp2/SDSC-SP2-1998-4.2-cln.swf.gz";
  if (!std::filesystem::exists(sdsc)) GTEST_SKIP() << sdsc << " missing";
  auto log = ReadSwf(sdsc.string(), {});
  ASSERT_TRUE(log.ok()) << log.status();
  EXPECT_EQ(log->jobs.size(), 59715u);
  EXPECT_EQ(log->header.max_nodes, 128);
  EXPECT_EQ(log->header.unix_start_time, 893466664);
  std::filesystem::path nasa = std::filesystem::path(shared) / "data/swf-nasa-ipsc/NASA-iPSC-1993-3.1-cln.swf.gz";
  if (!std::filesystem::exists(nasa)) return;
  auto n = ReadSwf(nasa.string(), {});
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->jobs.size(), 18239u);
  for (const SwfJob& j : n->jobs) {
    ASSERT_EQ(j.wait_time, -1);
    ASSERT_EQ(j.requested_time, -1);
  }
}

// WriteSwf writes what ReadSwf reads back: every field of every job (a
// fractional CPU time to the last bit), and the header, plain and gzipped;
// header entries that would not read back are refused and leave no file.
// (OutputFile's own cases: common/output_file_test.cc.)
TEST_F(SwfTest, WriteSwfReadsBackExactly) {
  std::vector<SwfJob> jobs;
  for (int64_t i = 0; i < 3; ++i) {
    SwfJob j;
    j.job_number = 100 + i;
    j.submit_time = 10 * i;
    j.wait_time = i == 1 ? -1 : 5 + i;
    j.run_time = 3600 * i;
    j.allocated_procs = 1 << i;
    j.avg_cpu_time = i == 0 ? -1 : 1799.9999999999998 / i;
    j.used_memory_kb = i == 2 ? 12345.5 : -1;
    j.requested_procs = 1 << i;
    j.requested_time = i == 2 ? -1 : 7200;
    j.status = 1;
    j.user = 7 + static_cast<int>(i);
    j.group = 3;
    j.executable = i == 0 ? -1 : 2147483647;
    j.queue = 0;
    jobs.push_back(j);
  }
  const std::vector<std::pair<std::string, std::string>> header = {
      {"Version", "2.2"},
      {"UnixStartTime", "1764547200"},
      {"MaxNodes", "64"},
      {"MaxProcs", "64"},
      {"Note", "a note: with a colon"}};
  for (const char* name : {"out.swf", "out.swf.gz"}) {
    const std::string path = TempFile(name).string();
    auto out = OutputFile::Open(path);
    ASSERT_TRUE(out.ok());
    ASSERT_TRUE(WriteSwf(header, jobs, out->get()).ok()) << name;
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    auto log = ReadSwf(path, {});
    ASSERT_TRUE(log.ok()) << log.status();
    EXPECT_EQ(log->header.version, "2.2");
    EXPECT_EQ(log->header.unix_start_time, 1764547200);
    EXPECT_EQ(log->header.cluster_size(), 64);
    EXPECT_EQ(log->header.fields["Note"], "a note: with a colon");
    ASSERT_EQ(log->jobs.size(), jobs.size()) << name;
    for (size_t i = 0; i < jobs.size(); ++i) {
      const SwfJob& a = jobs[i];
      const SwfJob& b = log->jobs[i];
      EXPECT_EQ(FormatSwfJob(a), FormatSwfJob(b)) << name;
      EXPECT_EQ(a.avg_cpu_time, b.avg_cpu_time) << name << " job " << i;
      EXPECT_EQ(a.used_memory_kb, b.used_memory_kb) << name << " job " << i;
      EXPECT_EQ(b.line, static_cast<int64_t>(header.size() + i + 1));
    }
  }
  const std::string refused = TempFile("refused.swf").string();
  for (const auto& bad : std::vector<std::pair<std::string, std::string>>{{"Note", "two\nlines"},
                                                                          {"Max:Nodes", "1"}}) {
    {
      auto out = OutputFile::Open(refused);
      ASSERT_TRUE(out.ok());
      absl::Status st = WriteSwf({bad}, jobs, out->get());
      EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << bad.first;
    }
    EXPECT_FALSE(std::filesystem::exists(refused));
    EXPECT_FALSE(std::filesystem::exists(refused + ".tmp"));
  }
}

}  // namespace
}  // namespace sojourn::turnaround
