// Tests of the trace importers on small files written to a temp dir, plus one
// test on the real shared traces when ../shared is present.
#include "models/traces/traces.h"

#include <archive.h>
#include <archive_entry.h>
#include <lzma.h>
#include <zlib.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include <sys/stat.h>

#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sojourn::traces {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

ImportOptions Fmt(TraceFormat f) {
  ImportOptions o;
  o.format = f;
  return o;
}

class TracesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           ("sojourn_traces_test_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }
  std::string WriteGz(const std::string& name, const std::string& text) {
    std::string p = (dir_ / name).string();
    gzFile f = gzopen(p.c_str(), "wb");
    gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
    gzclose(f);
    return p;
  }
  std::string WriteXz(const std::string& name, const std::string& text) {
    std::string out(text.size() + 1024, '\0');
    size_t pos = 0;
    EXPECT_EQ(lzma_easy_buffer_encode(6, LZMA_CHECK_CRC64, nullptr,
                                      reinterpret_cast<const uint8_t*>(text.data()), text.size(),
                                      reinterpret_cast<uint8_t*>(out.data()), &pos, out.size()),
              LZMA_OK);
    out.resize(pos);
    return Write(name, out);
  }

  fs::path dir_;
};

constexpr char kCanonical[] =
    "host,timestamp,cpu_load,free_mem_mb,extra\n"
    "a,100,0.5,1024,x\n"
    "b,100,0.1,,y\n"
    "a,160,0.25,512,z\n";

// A canonical CSV with interleaved hosts, an empty memory field and an extra column.
TEST_F(TracesTest, ReadsCanonicalCsv) {
  auto traces = ImportTrace(Write("t.csv", kCanonical), {});
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_EQ(traces->size(), 2u);
  EXPECT_EQ((*traces)[0].host, "a");
  ASSERT_EQ((*traces)[0].samples.size(), 2u);
  EXPECT_EQ((*traces)[0].samples[1].unix_seconds, 160);
  EXPECT_DOUBLE_EQ((*traces)[0].samples[1].cpu_load, 0.25);
  EXPECT_DOUBLE_EQ((*traces)[0].samples[1].free_mem_mb, 512);
  EXPECT_EQ((*traces)[0].period_seconds, 60);
  EXPECT_FALSE((*traces)[1].samples[0].has_free_mem());
}

// The optional total_mem_mb column gives the host's memory capacity; a bad
// value is an error naming the line.
TEST_F(TracesTest, ReadsOptionalTotalMemory) {
  auto traces = ImportTrace(Write("m.csv",
                                  "host,timestamp,cpu_load,free_mem_mb,total_mem_mb\n"
                                  "a,100,0.5,1024,4096\n"
                                  "a,160,0.5,1000,4096\n"
                                  "b,100,0.5,10,\n"),
                            {});
  ASSERT_TRUE(traces.ok()) << traces.status();
  EXPECT_DOUBLE_EQ((*traces)[0].total_mem_mb, 4096);
  EXPECT_DOUBLE_EQ((*traces)[1].total_mem_mb, 0);
  auto bad = ImportTrace(
      Write("bad.csv", "host,timestamp,cpu_load,free_mem_mb,total_mem_mb\na,100,0.5,1,lots\n"), {});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(std::string(bad.status().message()).find(":2:"), std::string::npos) << bad.status();
}

// The optional cpu_cores column (the demo trace has it) gives the host's
// logical CPUs, which sojourn-replay sends as HostAttributes.cpu_cores; a
// value that is not a whole number in [0, 1e6] is an error naming the line.
TEST_F(TracesTest, ReadsOptionalCpuCores) {
  auto traces = ImportTrace(Write("c.csv",
                                  "host,timestamp,cpu_load,free_mem_mb,total_mem_mb,cpu_cores\n"
                                  "a,100,0.5,1024,4096,2\n"
                                  "a,160,0.5,1000,4096,2\n"
                                  "b,100,0.5,10,,\n"),
                            {});
  ASSERT_TRUE(traces.ok()) << traces.status();
  EXPECT_EQ((*traces)[0].cpu_cores, 2);
  EXPECT_EQ((*traces)[1].cpu_cores, 0);
  for (const char* value : {"two", "1.5", "-1", "2000000"}) {
    auto bad = ImportTrace(
        Write("bad.csv", std::string("host,timestamp,cpu_load,cpu_cores\na,100,0.5,4\na,160,0.5,") +
                             value + "\n"),
        {});
    ASSERT_FALSE(bad.ok()) << value;
    EXPECT_NE(std::string(bad.status().message()).find(":3: cpu_cores"), std::string::npos)
        << bad.status();
  }
}

// .gz and .xz give the same result as the plain file.
TEST_F(TracesTest, ReadsCompressedCanonicalCsv) {
  for (const std::string& p : {WriteGz("t.csv.gz", kCanonical), WriteXz("t.csv.xz", kCanonical)}) {
    auto traces = ImportTrace(p, {});
    ASSERT_TRUE(traces.ok()) << p << ": " << traces.status();
    ASSERT_EQ(traces->size(), 2u);
    EXPECT_EQ((*traces)[0].samples.size(), 2u);
    EXPECT_EQ((*traces)[1].host, "b");
  }
}

// Compressed data is read by its first bytes when the name does not say so
// (a trace renamed, or read through a pipe): gzip, xz, and bzip2 / zstd
// through libarchive. Each used to fail on its first line as text.
TEST_F(TracesTest, ReadsCompressedDataWhateverItsName) {
  std::vector<std::string> paths = {WriteGz("gz.csv", kCanonical), WriteXz("xz.dat", kCanonical)};
  const std::string plain = Write("plain.csv", kCanonical);
  for (const char* tool : {"bzip2", "zstd"}) {
    const std::string out = (dir_ / (std::string(tool) + ".csv")).string();
    const std::string cmd = std::string(tool) + " -c " + plain + " > " + out + " 2>/dev/null";
    if (std::system(cmd.c_str()) == 0) paths.push_back(out);
  }
  EXPECT_GE(paths.size(), 3u) << "scripts/install-deps installs bzip2 and zstd";
  for (const std::string& p : paths) {
    auto traces = ImportTrace(p, {});
    ASSERT_TRUE(traces.ok()) << p << ": " << traces.status();
    ASSERT_EQ(traces->size(), 2u) << p;
    EXPECT_EQ((*traces)[0].samples.size(), 2u) << p;
    EXPECT_EQ((*traces)[0].samples[1].cpu_load, 0.25) << p;
    // Cut short: an error naming the compression, not a shorter trace.
    std::ifstream in(p, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    auto cut = ImportTrace(Write("cut-" + fs::path(p).filename().string(),
                                 bytes.substr(0, bytes.size() / 2)),
                           {});
    ASSERT_FALSE(cut.ok()) << p;
    EXPECT_THAT(std::string(cut.status().message()), HasSubstr("truncated or corrupt"));
  }
}

// A .gz cut short (a partial download) or with a corrupt body is an error,
// not a shorter trace, whether the cut falls between rows or inside one.
TEST_F(TracesTest, RejectsTruncatedGzip) {
  std::string rows = "host,timestamp,cpu_load,free_mem_mb\n";
  for (int h = 0; h < 20; ++h) {
    for (int t = 0; t < 200; ++t) {
      rows += "host" + std::to_string(h) + "," + std::to_string(1000 + 60 * t) + ",0.1,512\n";
    }
  }
  const std::string whole = WriteGz("whole.csv.gz", rows);
  auto ok = ImportTrace(whole, {});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->size(), 20u);
  std::ifstream in(whole, std::ios::binary);
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSERT_GT(bytes.size(), 100u);
  for (size_t keep : {bytes.size() - 8, bytes.size() / 2}) {
    const std::string p = Write("cut" + std::to_string(keep) + ".csv.gz", bytes.substr(0, keep));
    auto traces = ImportTrace(p, {});
    ASSERT_FALSE(traces.ok()) << "kept " << keep << " of " << bytes.size() << " bytes";
    EXPECT_THAT(std::string(traces.status().message()), HasSubstr("gzip error"));
    EXPECT_THAT(std::string(traces.status().message()), HasSubstr(p));
  }
  std::string corrupt = bytes;
  for (size_t i = 20; i < corrupt.size() - 8; ++i) corrupt[i] = static_cast<char>(i * 7);
  auto bad = ImportTrace(Write("corrupt.csv.gz", corrupt), {});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("gzip error"));
}

// A spreadsheet's UTF-8 byte-order mark before the header is skipped.
// A trace read from a pipe or FIFO (--trace <(zcat t.csv.gz)): it has no
// size to seek for, and reading it aborted with std::length_error.
TEST_F(TracesTest, ReadsFromAFifo) {
  const std::string fifo = (dir_ / "t.fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Opening a FIFO blocks until both ends are open; the writer closes when done.
  std::thread writer([&] { std::ofstream(fifo, std::ios::binary) << kCanonical; });
  auto traces = ImportTrace(fifo, Fmt(TraceFormat::kCanonical));
  writer.join();
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_EQ(traces->size(), 2u);
  EXPECT_EQ((*traces)[0].samples.size(), 2u);
}

TEST_F(TracesTest, SkipsByteOrderMark) {
  auto traces = ImportTrace(Write("bom.csv", std::string("\xEF\xBB\xBF") + kCanonical), {});
  ASSERT_TRUE(traces.ok()) << traces.status();
  EXPECT_EQ(traces->size(), 2u);
}

// Timestamps that cannot be sample times (beyond +-1e11 s) are rejected with
// file:line, before any span arithmetic can overflow.
TEST_F(TracesTest, RejectsTimestampsOutOfRange) {
  for (const char* ts : {"9223372036854775807", "-9223372036854775808", "100000000001"}) {
    std::string p = Write("far.csv", std::string("host,timestamp,cpu_load,free_mem_mb\na,100,0.1,1\nb,") +
                                         ts + ",0.1,1\n");
    auto traces = ImportTrace(p, {});
    ASSERT_FALSE(traces.ok()) << ts;
    EXPECT_THAT(std::string(traces.status().message()), HasSubstr("far.csv:3:"));
  }
  auto near = ImportTrace(
      Write("near.csv", "host,timestamp,cpu_load,free_mem_mb\na,-100000000000,0.1,1\n"), {});
  EXPECT_TRUE(near.ok()) << near.status();
}

// The grid defaults of a sampled trace follow its median sample period:
// 5-minute samples keep 300 s / 900 s; slower sampling gets the largest
// divisor of 3600 s not above the period and a gap of three periods.
TEST(DefaultSampledGridTest, FollowsTheSamplePeriod) {
  auto traces_with = [](std::vector<int64_t> periods) {
    std::vector<HostTrace> out;
    for (int64_t p : periods) {
      HostTrace t;
      t.samples.resize(p > 0 ? 10 : 1);
      t.period_seconds = p;
      out.push_back(t);
    }
    return out;
  };
  struct Case {
    std::vector<int64_t> periods;
    int64_t period, step, gap;
  };
  for (const Case& c : std::vector<Case>{{{300}, 300, 300, 900},
                                         {{6, 6, 60}, 6, 300, 900},
                                         {{3600}, 3600, 3600, 10800},
                                         {{600, 600, 3600}, 600, 600, 1800},
                                         {{1000}, 1000, 900, 3000},
                                         {{86400}, 86400, 3600, 259200},
                                         {{0, 3600}, 3600, 3600, 10800},
                                         {{}, 300, 300, 900}}) {
    const SampledGridDefaults g = DefaultSampledGrid(traces_with(c.periods));
    EXPECT_EQ(g.period_seconds, c.period) << c.periods.size();
    EXPECT_EQ(g.step_seconds, c.step) << c.period;
    EXPECT_EQ(g.revocation_gap_seconds, c.gap) << c.period;
  }
}

// Unsorted rows name the file, the line and the reason.
TEST_F(TracesTest, RejectsUnsortedRows) {
  std::string p = Write("u.csv", "host,timestamp,cpu_load,free_mem_mb\na,100,0.1,1\na,90,0.1,1\n");
  auto traces = ImportTrace(p, {});
  ASSERT_FALSE(traces.ok());
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("u.csv:3:"));
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("earlier"));
}

// Non-numeric fields are rejected with file:line and the field.
TEST_F(TracesTest, RejectsNonNumericFields) {
  std::string p =
      Write("n.csv", "host,timestamp,cpu_load,free_mem_mb\na,100,0.1,1\na,200,high,1\n");
  auto traces = ImportTrace(p, {});
  ASSERT_FALSE(traces.ok());
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("n.csv:3:"));
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("cpu_load 'high'"));
  std::string q = Write("m.csv", "host,timestamp,cpu_load,free_mem_mb\na,1x0,0.1,1\n");
  traces = ImportTrace(q, Fmt(TraceFormat::kCanonical));
  ASSERT_FALSE(traces.ok());
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("m.csv:2: timestamp '1x0'"));
}

// Negative loads and memory amounts are rejected with file:line; memory usage
// above the capacity (negative free memory, memory pressure) is kept.
TEST_F(TracesTest, RejectsNegativeAmounts) {
  auto neg = ImportTrace(
      Write("neg.csv", "host,timestamp,cpu_load,free_mem_mb\na,100,0.1,1\na,200,-0.5,1\n"), {});
  ASSERT_FALSE(neg.ok());
  EXPECT_THAT(std::string(neg.status().message()),
              HasSubstr("neg.csv:3: cpu_load '-0.5' is not a number >= 0"));
  auto low_mem = ImportTrace(
      Write("lowmem.csv", "host,timestamp,cpu_load,free_mem_mb\na,100,0.1,-100\n"), {});
  ASSERT_TRUE(low_mem.ok()) << low_mem.status();
  EXPECT_EQ((*low_mem)[0].samples[0].free_mem_mb, -100);

  const std::string header =
      "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\t"
      "CPU usage [%];\tMemory capacity provisioned [KB];\tMemory usage [KB];\t"
      "Disk read throughput [KB/s];\tDisk write throughput [KB/s];\t"
      "Network received throughput [KB/s];\tNetwork transmitted throughput [KB/s]\n";
  const std::string ok_row = "1000;\t2;\t5000;\t1;\t10;\t1024;\t512;\t0;\t0;\t0;\t0\n";
  for (const auto& [row, want] : std::vector<std::pair<std::string, std::string>>{
           {"1300;\t2;\t5000;\t1;\t-10;\t1024;\t512;\t0;\t0;\t0;\t0\n",
            "CPU usage [%] '-10' is not a number >= 0"},
           {"1300;\t2;\t5000;\t1;\t10;\t-1024;\t512;\t0;\t0;\t0;\t0\n",
            "memory capacity '-1024' is not a number >= 0"},
           {"1300;\t2;\t5000;\t1;\t10;\t1024;\t-512;\t0;\t0;\t0;\t0\n",
            "memory usage '-512' is not a number >= 0"}}) {
    Write("gneg/1.csv", header + ok_row + row);
    auto gwa = ImportTrace((dir_ / "gneg").string(), Fmt(TraceFormat::kGwa));
    ASSERT_FALSE(gwa.ok()) << row;
    EXPECT_THAT(std::string(gwa.status().message()), HasSubstr("1.csv:3: " + want));
  }
  Write("gneg/1.csv", header + ok_row + "1300;\t2;\t5000;\t1;\t10;\t1024;\t2048;\t0;\t0;\t0;\t0\n");
  auto over = ImportTrace((dir_ / "gneg").string(), Fmt(TraceFormat::kGwa));
  ASSERT_TRUE(over.ok()) << over.status();
  EXPECT_EQ((*over)[0].samples[1].free_mem_mb, -1.0);
}

// A header without a host column is rejected.
TEST_F(TracesTest, RejectsMissingHostColumn) {
  std::string p = Write("h.csv", "machine,timestamp,cpu_load\na,100,0.1\n");
  auto traces = ImportTrace(p, Fmt(TraceFormat::kCanonical));
  ASSERT_FALSE(traces.ok());
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("h.csv:1:"));
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("'host'"));
}

// A wrong number of fields is rejected.
TEST_F(TracesTest, RejectsShortRows) {
  std::string p = Write("s.csv", "host,timestamp,cpu_load,free_mem_mb\na,100,0.1\n");
  auto traces = ImportTrace(p, {});
  ASSERT_FALSE(traces.ok());
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("s.csv:2: expected 4 fields"));
}

// The canonical writer round-trips through the reader.
TEST_F(TracesTest, CanonicalRoundTrip) {
  auto traces = ImportTrace(Write("t.csv", kCanonical), {});
  ASSERT_TRUE(traces.ok());
  std::string out = (dir_ / "out.csv.gz").string();
  ASSERT_TRUE(WriteCanonicalCsv(*traces, out).ok());
  auto again = ImportTrace(out, {});
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), traces->size());
  for (size_t h = 0; h < traces->size(); ++h) {
    ASSERT_EQ((*again)[h].samples.size(), (*traces)[h].samples.size());
    for (size_t i = 0; i < (*traces)[h].samples.size(); ++i) {
      EXPECT_EQ((*again)[h].samples[i].unix_seconds, (*traces)[h].samples[i].unix_seconds);
      EXPECT_DOUBLE_EQ((*again)[h].samples[i].cpu_load, (*traces)[h].samples[i].cpu_load);
      EXPECT_EQ((*again)[h].samples[i].has_free_mem(), (*traces)[h].samples[i].has_free_mem());
    }
  }
}

// The streaming writer gives back exactly what it was given: values that %.6g
// rounded (0.1 + 0.2, 1/3 of a MiB, 1e-300), unknown memory, the hosts'
// memory and cores, a host written in two batches; uncompressed and gzip.
TEST_F(TracesTest, CanonicalWriterRoundTripsExactly) {
  std::vector<HostTrace> in(2);
  in[0].host = "lab,1";
  in[0].total_mem_mb = 8191.75;
  in[0].cpu_cores = 4;
  in[1].host = "b";
  const double loads[] = {0.1 + 0.2, 1.0 / 3.0, 1e-300, 0.0, 1.0, 0.123456789012345678};
  for (int i = 0; i < 6; ++i) {
    HostSample s;
    s.unix_seconds = 1700000000 + 6 * i;
    s.cpu_load = loads[i];
    if (i % 3 != 1) s.free_mem_mb = 1024.0 / 3.0 + i;
    in[i % 2].samples.push_back(s);
  }
  for (const char* name : {"exact.csv", "exact.csv.gz"}) {
    const std::string out = (dir_ / name).string();
    auto w = CanonicalCsvWriter::Open(out);
    ASSERT_TRUE(w.ok()) << w.status();
    const std::vector<HostSample> first(in[0].samples.begin(), in[0].samples.begin() + 1);
    const std::vector<HostSample> rest(in[0].samples.begin() + 1, in[0].samples.end());
    ASSERT_TRUE((*w)->Write(in[0].host, first, in[0].total_mem_mb, in[0].cpu_cores).ok());
    ASSERT_TRUE((*w)->Write(in[0].host, rest, in[0].total_mem_mb, in[0].cpu_cores).ok());
    ASSERT_TRUE((*w)->Write(in[1].host, in[1].samples, 0, 0).ok());
    EXPECT_FALSE(fs::exists(out)) << "visible before Finish";
    ASSERT_TRUE((*w)->Finish().ok());
    EXPECT_EQ((*w)->rows(), 6);
    EXPECT_FALSE(fs::exists(out + ".tmp"));
    auto back = ImportTrace(out, {});
    ASSERT_TRUE(back.ok()) << back.status();
    ASSERT_EQ(back->size(), 2u);
    for (size_t h = 0; h < 2; ++h) {
      EXPECT_EQ((*back)[h].host, in[h].host);
      EXPECT_EQ((*back)[h].total_mem_mb, in[h].total_mem_mb);
      EXPECT_EQ((*back)[h].cpu_cores, in[h].cpu_cores);
      ASSERT_EQ((*back)[h].samples.size(), in[h].samples.size());
      for (size_t i = 0; i < in[h].samples.size(); ++i) {
        const HostSample& a = (*back)[h].samples[i];
        const HostSample& b = in[h].samples[i];
        EXPECT_EQ(a.unix_seconds, b.unix_seconds);
        EXPECT_EQ(a.cpu_load, b.cpu_load) << name << " host " << h << " row " << i;
        EXPECT_EQ(a.has_free_mem(), b.has_free_mem());
        if (b.has_free_mem()) {
          EXPECT_EQ(a.free_mem_mb, b.free_mem_mb);
        }
      }
    }
  }
}

// A host's rows out of time order (within a batch, across batches, after
// another host's rows) and a line break in a name are refused, and a refused
// batch writes nothing; an abandoned writer leaves no file behind; a
// directory is not a file to write.
TEST_F(TracesTest, CanonicalWriterRefusesWhatCouldNotBeReadBack) {
  auto at = [](int64_t t) {
    HostSample s;
    s.unix_seconds = t;
    return s;
  };
  const std::string done = (dir_ / "done.csv").string();
  {
    auto w = CanonicalCsvWriter::Open(done);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Write("a", {at(100), at(200)}, 0, 0).ok());
    absl::Status st = (*w)->Write("a", {at(300), at(150)}, 0, 0);
    EXPECT_THAT(std::string(st.message()),
                HasSubstr("timestamp 150 is earlier than the host's previous row (300)"));
    EXPECT_THAT(std::string((*w)->Write("a", {at(199)}, 0, 0).message()),
                HasSubstr("timestamp 199 is earlier than the host's previous row (200)"));
    ASSERT_TRUE((*w)->Write("b", {at(50)}, 0, 0).ok()) << "another host has its own order";
    EXPECT_THAT(std::string((*w)->Write("a", {at(120)}, 0, 0).message()), HasSubstr("(200)"));
    EXPECT_TRUE((*w)->Write("a", {at(200), at(260)}, 0, 0).ok()) << "equal times are in order";
    EXPECT_THAT(std::string((*w)->Write("two\nlines", {at(1)}, 0, 0).message()),
                HasSubstr("line break"));
    ASSERT_TRUE((*w)->Finish().ok());
    EXPECT_EQ((*w)->rows(), 5);
  }
  auto back = ImportTrace(done, {});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  ASSERT_EQ((*back)[0].samples.size(), 4u);
  EXPECT_EQ((*back)[0].samples[3].unix_seconds, 260);

  const std::string out = (dir_ / "partial.csv").string();
  {
    auto w = CanonicalCsvWriter::Open(out);
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE((*w)->Write("a", {at(200)}, 0, 0).ok());
    EXPECT_TRUE(fs::exists(out + ".tmp"));
  }
  EXPECT_FALSE(fs::exists(out + ".tmp"));
  EXPECT_FALSE(fs::exists(out));
  auto dir = CanonicalCsvWriter::Open(dir_.string());
  ASSERT_FALSE(dir.ok());
  EXPECT_THAT(std::string(dir.status().message()), HasSubstr("is a directory"));
  auto missing = CanonicalCsvWriter::Open((dir_ / "no" / "such" / "dir.csv").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("cannot create file"));
}

// Names a state manager accepts but an unquoted CSV field would change (blanks
// at either end, which the reader trims from an unquoted field; commas;
// quotes) are read back as written, each its own host.
TEST_F(TracesTest, CanonicalWriterKeepsHostNamesAsWritten) {
  const std::vector<std::string> names = {"a", " a", "a ", "\ta\t", "x,y", "say \"hi\"", " "};
  std::vector<HostTrace> in(names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    in[i].host = names[i];
    HostSample s;
    s.unix_seconds = 100 + static_cast<int64_t>(i);
    in[i].samples.push_back(s);
  }
  const std::string out = (dir_ / "names.csv").string();
  ASSERT_TRUE(WriteCanonicalCsv(in, out).ok());
  auto back = ImportTrace(out, {});
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ((*back)[i].host, names[i]);
    ASSERT_EQ((*back)[i].samples.size(), 1u);
    EXPECT_EQ((*back)[i].samples[0].unix_seconds, 100 + static_cast<int64_t>(i));
  }
}

// Host names holding commas or quotes are written and read as RFC 4180 quoted
// fields (the form `sojourn-eval availability --cells` writes them in).
TEST_F(TracesTest, QuotedHostNames) {
  auto traces = ImportTrace(Write("q.csv",
                                  "host,timestamp,cpu_load,free_mem_mb\n"
                                  "\"lab 1, desk 2\",100,0.5,\"1024\"\n"
                                  "\"say \"\"hi\"\"\",100,0.25,\n"
                                  "\"lab 1, desk 2\" ,400,0.75,512\n"),
                            {});
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_EQ(traces->size(), 2u);
  EXPECT_EQ((*traces)[0].host, "lab 1, desk 2");
  ASSERT_EQ((*traces)[0].samples.size(), 2u);
  EXPECT_DOUBLE_EQ((*traces)[0].samples[0].free_mem_mb, 1024);
  EXPECT_DOUBLE_EQ((*traces)[0].samples[1].cpu_load, 0.75);
  EXPECT_EQ((*traces)[1].host, "say \"hi\"");

  std::string out = (dir_ / "q_out.csv").string();
  ASSERT_TRUE(WriteCanonicalCsv(*traces, out).ok());
  auto again = ImportTrace(out, {});
  ASSERT_TRUE(again.ok()) << again.status();
  ASSERT_EQ(again->size(), 2u);
  EXPECT_EQ((*again)[0].host, "lab 1, desk 2");
  EXPECT_EQ((*again)[1].host, "say \"hi\"");
  EXPECT_EQ((*again)[0].samples.size(), 2u);

  auto open = ImportTrace(Write("open.csv", "host,timestamp,cpu_load\na,100,0.1\n\"b,100,0.1\n"), {});
  ASSERT_FALSE(open.ok());
  EXPECT_THAT(std::string(open.status().message()),
              HasSubstr("open.csv:3: quote opened at column 1 is not closed"));
  auto stray = ImportTrace(Write("stray.csv", "host,timestamp,cpu_load\n\"b\"x,100,0.1\n"), {});
  ASSERT_FALSE(stray.ok());
  EXPECT_THAT(std::string(stray.status().message()), HasSubstr("stray.csv:2: unexpected 'x'"));

  std::vector<HostTrace> bad(1);
  bad[0].host = "two\nlines";
  EXPECT_FALSE(WriteCanonicalCsv(bad, (dir_ / "bad.csv").string()).ok());
}

std::string GwaHeader() {
  return "Timestamp [ms];\tCPU cores;\tCPU capacity provisioned [MHZ];\tCPU usage [MHZ];\t"
         "CPU usage [%];\tMemory capacity provisioned [KB];\tMemory usage [KB];\t"
         "Disk read throughput [KB/s];\tDisk write throughput [KB/s];\t"
         "Network received throughput [KB/s];\tNetwork transmitted throughput [KB/s]\n";
}
std::string GwaRow(int64_t t, double pct, double cap_kb, double use_kb) {
  return std::to_string(t) + ";\t2;\t5000;\t1;\t" + std::to_string(pct) + ";\t" +
         std::to_string(cap_kb) + ";\t" + std::to_string(use_kb) + ";\t0;\t0;\t0;\t0\n";
}

// A GWA directory: the same VM id in two month folders is one host, in time
// order; load = % / 100, free memory = (capacity - usage) / 1024.
TEST_F(TracesTest, ReadsGwaDirectory) {
  Write("rnd/2013-8/7.csv", GwaHeader() + GwaRow(2000, 10, 1048576, 524288));
  Write("rnd/2013-7/7.csv",
        GwaHeader() + GwaRow(1000, 50, 1048576, 786432) + GwaRow(1300, 75, 1048576, 786432));
  Write("rnd/2013-7/12.csv", GwaHeader() + GwaRow(1000, 1, 2097152, 0));
  auto traces = ImportTrace((dir_ / "rnd").string(), Fmt(TraceFormat::kGwa));
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_EQ(traces->size(), 2u);
  const HostTrace* vm7 = (*traces)[0].host == "7" ? &(*traces)[0] : &(*traces)[1];
  ASSERT_EQ(vm7->host, "7");
  ASSERT_EQ(vm7->samples.size(), 3u);
  EXPECT_EQ(vm7->samples[0].unix_seconds, 1000);
  EXPECT_EQ(vm7->samples[2].unix_seconds, 2000);
  EXPECT_DOUBLE_EQ(vm7->samples[1].cpu_load, 0.75);
  EXPECT_DOUBLE_EQ(vm7->samples[0].free_mem_mb, 256.0);
  EXPECT_DOUBLE_EQ(vm7->samples[2].free_mem_mb, 512.0);
  EXPECT_DOUBLE_EQ(vm7->total_mem_mb, 1024.0);
  EXPECT_EQ(vm7->cpu_cores, 2);  // the "CPU cores" column
}

// Hidden files (".x.csv", macOS "._x.csv") in a GWA directory are not VMs.
TEST_F(TracesTest, SkipsHiddenGwaFiles) {
  Write("rnd/2013-7/7.csv", GwaHeader() + GwaRow(1000, 50, 1048576, 786432));
  Write("rnd/2013-7/._7.csv", "\x00\x05\x16\x07 binary resource fork");
  Write("rnd/.junk.csv", "not a trace");
  auto traces = ImportTrace((dir_ / "rnd").string(), Fmt(TraceFormat::kGwa));
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_EQ(traces->size(), 1u);
  EXPECT_EQ((*traces)[0].host, "7");
}

// A ustar archive of (name, contents) members, as tar(1) writes it.
std::string UstarArchive(const std::vector<std::pair<std::string, std::string>>& members) {
  std::string out;
  for (const auto& [name, data] : members) {
    std::string h(512, '\0');
    auto put = [&](size_t off, const std::string& v) { h.replace(off, v.size(), v); };
    char num[16];
    put(0, name);
    put(100, "0000644");
    put(108, "0000000");
    put(116, "0000000");
    std::snprintf(num, sizeof(num), "%011o", static_cast<unsigned>(data.size()));
    put(124, num);
    put(136, "00000000000");
    h[156] = '0';
    put(257, std::string("ustar\0" "00", 8));
    put(148, "        ");
    unsigned sum = 0;
    for (unsigned char c : h) sum += c;
    std::snprintf(num, sizeof(num), "%06o", sum);
    put(148, std::string(num, 7));
    out += h + data + std::string((512 - data.size() % 512) % 512, '\0');
  }
  return out + std::string(1024, '\0');
}

// A GWA tarball is read (gzip, xz or plain); a file named .tar.xz / .tar.gz
// that is no tar archive says so. With every libarchive format it was read
// as an archive without entries: "archive holds no .csv files".
TEST_F(TracesTest, ReadsGwaTarballsAndRefusesOtherFiles) {
  const std::string tar =
      UstarArchive({{"rnd/2013-7/7.csv", GwaHeader() + GwaRow(1000, 50, 1048576, 786432)},
                    {"rnd/2013-7/9.csv", GwaHeader() + GwaRow(1000, 5, 1048576, 786432)}});
  for (const std::string& p :
       {WriteGz("ok.tar.gz", tar), WriteXz("ok.tar.xz", tar), Write("ok.tar", tar)}) {
    auto traces = ImportTrace(p, {});
    ASSERT_TRUE(traces.ok()) << p << ": " << traces.status();
    EXPECT_EQ(traces->size(), 2u) << p;
  }
  auto no_csv = ImportTrace(WriteGz("none.tar.gz", UstarArchive({{"README", "x"}})), {});
  ASSERT_FALSE(no_csv.ok());
  EXPECT_THAT(std::string(no_csv.status().message()), HasSubstr("archive holds no .csv files"));
  for (const std::string& p :
       {Write("text.tar.xz", kCanonical), Write("text.tar.gz", kCanonical),
        WriteXz("csv.tar.xz", kCanonical), WriteGz("csv.tar.gz", kCanonical),
        Write("empty.tar.gz", "")}) {
    auto traces = ImportTrace(p, {});
    ASSERT_FALSE(traces.ok()) << p;
    EXPECT_EQ(traces.status().code(), absl::StatusCode::kInvalidArgument) << traces.status();
    EXPECT_THAT(std::string(traces.status().message()),
                HasSubstr(p + ": not a tar (plain, gzip or xz compressed) or zip archive"));
  }
}

// The GWA's own downloads are zip files: a .zip of per-VM CSVs (deflated,
// written with libarchive) reads like the tarball.
TEST_F(TracesTest, ReadsGwaZip) {
  const std::string path = (dir_ / "rnd.zip").string();
  {
    std::unique_ptr<archive, int (*)(archive*)> w(archive_write_new(), archive_write_free);
    ASSERT_EQ(archive_write_set_format_zip(w.get()), ARCHIVE_OK);
    ASSERT_EQ(archive_write_open_filename(w.get(), path.c_str()), ARCHIVE_OK);
    for (const auto& [name, data] :
         std::vector<std::pair<std::string, std::string>>{
             {"rnd/2013-7/7.csv", GwaHeader() + GwaRow(1000, 50, 1048576, 786432)},
             {"rnd/2013-7/9.csv", GwaHeader() + GwaRow(1000, 5, 1048576, 786432)},
             {"rnd/README", "not a trace"}}) {
      archive_entry* e = archive_entry_new();
      archive_entry_set_pathname(e, name.c_str());
      archive_entry_set_filetype(e, AE_IFREG);
      archive_entry_set_perm(e, 0644);
      archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
      ASSERT_EQ(archive_write_header(w.get(), e), ARCHIVE_OK);
      ASSERT_EQ(archive_write_data(w.get(), data.data(), data.size()),
                static_cast<la_ssize_t>(data.size()));
      archive_entry_free(e);
    }
    ASSERT_EQ(archive_write_close(w.get()), ARCHIVE_OK);
  }
  auto traces = ImportTrace(path, {});
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_EQ(traces->size(), 2u);
  EXPECT_EQ((*traces)[0].samples.size(), 1u);
  auto text = ImportTrace(Write("text.zip", kCanonical), {});
  ASSERT_FALSE(text.ok());
  EXPECT_THAT(std::string(text.status().message()), HasSubstr("or zip archive"));
}

// Free memory comes from "Memory usage [KB]" even when a "Memory usage [%]"
// column follows it (GWA-T-13 Materna has both); with only the percentage it
// is the capacity's remaining share.
TEST_F(TracesTest, GwaMemoryUsageInKilobytesOrPercent) {
  const std::string both =
      "Timestamp [ms];\tCPU cores;\tCPU usage [%];\tMemory capacity provisioned [KB];\t"
      "Memory usage [KB];\tMemory usage [%]\n"
      "1000;\t2;\t10;\t1048576;\t786432;\t75\n";
  const std::string pct_only =
      "Timestamp [ms];\tCPU cores;\tCPU usage [%];\tMemory capacity provisioned [KB];\t"
      "Memory usage [%]\n"
      "1000;\t2;\t10;\t1048576;\t25\n";
  Write("both/1.csv", both);
  Write("pct/1.csv", pct_only);
  for (const auto& [dir, free_mb] : {std::pair<std::string, double>{"both", 256.0},
                                     std::pair<std::string, double>{"pct", 768.0}}) {
    auto traces = ImportTrace((dir_ / dir).string(), Fmt(TraceFormat::kGwa));
    ASSERT_TRUE(traces.ok()) << dir << ": " << traces.status();
    ASSERT_EQ(traces->size(), 1u) << dir;
    ASSERT_EQ((*traces)[0].samples.size(), 1u) << dir;
    EXPECT_DOUBLE_EQ((*traces)[0].samples[0].free_mem_mb, free_mb) << dir;
    EXPECT_DOUBLE_EQ((*traces)[0].samples[0].cpu_load, 0.1) << dir;
  }
}

// GWA-T-13 Materna writes its timestamps as local date-times and its numbers
// with a decimal comma (the format OpenDC's Bitbrains reader also accepts):
// the date-times are read as the wall clock in UTC, flagged, and the numbers
// as decimals. Unix milliseconds (what the GWA's "Timestamp [ms]" label says)
// are told from seconds by their size.
TEST_F(TracesTest, ReadsGwaDateTimesDecimalCommasAndMilliseconds) {
  const std::string materna =
      "Timestamp;CPU cores;CPU capacity provisioned [MHZ];CPU usage [MHZ];CPU usage [%];"
      "Memory capacity provisioned [KB];Memory usage [KB];Memory usage [%]\n"
      "31.12.2015 23:55:00;4;10399,99986;109,2;1,05;1048576;786432;75\n"
      "01.01.2016 00:00:00;4,0;10399,99986;5200;50,5;1048576;524288,5;50\n";
  Write("materna/vm7.csv", materna);
  auto traces = ImportTrace((dir_ / "materna").string(), {});
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_EQ(traces->size(), 1u);
  const HostTrace& t = (*traces)[0];
  EXPECT_TRUE(t.wall_clock_timestamps);
  ASSERT_EQ(t.samples.size(), 2u);
  EXPECT_EQ(t.samples[0].unix_seconds, 1451606100);  // 2015-12-31 23:55:00 read as UTC
  EXPECT_EQ(t.samples[1].unix_seconds, 1451606400);
  EXPECT_DOUBLE_EQ(t.samples[0].cpu_load, 0.0105);
  EXPECT_DOUBLE_EQ(t.samples[1].cpu_load, 0.505);
  EXPECT_DOUBLE_EQ(t.samples[1].free_mem_mb, (1048576 - 524288.5) / 1024.0);
  EXPECT_EQ(t.cpu_cores, 4);

  // ISO date-times, and Unix milliseconds, which are not flagged.
  Write("iso/1.csv", "Timestamp;CPU usage [%]\n2016-01-01 00:05;10\n2016-01-01T00:10:00;20\n");
  Write("ms/1.csv", GwaHeader() + GwaRow(1372629804000, 10, 1048576, 786432) +
                        GwaRow(1372630104000, 20, 1048576, 786432));
  auto iso = ImportTrace((dir_ / "iso").string(), {});
  ASSERT_TRUE(iso.ok()) << iso.status();
  EXPECT_TRUE((*iso)[0].wall_clock_timestamps);
  ASSERT_EQ((*iso)[0].samples.size(), 2u);
  EXPECT_EQ((*iso)[0].samples[0].unix_seconds, 1451606700);
  EXPECT_EQ((*iso)[0].samples[1].unix_seconds, 1451607000);
  auto ms = ImportTrace((dir_ / "ms").string(), {});
  ASSERT_TRUE(ms.ok()) << ms.status();
  EXPECT_FALSE((*ms)[0].wall_clock_timestamps);
  ASSERT_EQ((*ms)[0].samples.size(), 2u);
  EXPECT_EQ((*ms)[0].samples[0].unix_seconds, 1372629804);
  EXPECT_EQ((*ms)[0].samples[1].unix_seconds, 1372630104);
}

// Where daylight saving time ends a wall clock repeats an hour (EU: 03:00 ->
// 02:00 on the last Sunday of October): its second pass is dropped, the rows
// after it are read, and the count is kept (the importer refused the whole
// trace, so a GWA-T-13-like trace spanning October could not be evaluated).
TEST_F(TracesTest, GwaDateTimesDropTheHourRepeatedWhereDaylightSavingEnds) {
  std::string rows = "Timestamp;CPU usage [%]\n";
  for (int m = 0; m < 60; m += 15) rows += absl::StrFormat("27.10.2013 02:%02d:00;10\n", m);
  for (int m = 0; m < 60; m += 15) rows += absl::StrFormat("27.10.2013 02:%02d:00;90\n", m);
  rows += "27.10.2013 03:00:00;20\n27.10.2013 03:15:00;30\n";
  Write("dst/1.csv", rows);
  // A US host: 01:00 again after 01:59 on the first Sunday of November.
  Write("dst/2.csv", "Timestamp;CPU usage [%]\n03.11.2013 01:30:00;10\n"
                     "03.11.2013 01:59:00;10\n03.11.2013 01:00:00;90\n03.11.2013 02:00:00;20\n");
  auto traces = ImportTrace((dir_ / "dst").string(), {});
  ASSERT_TRUE(traces.ok()) << traces.status();
  ASSERT_EQ(traces->size(), 2u);
  const HostTrace& eu = (*traces)[0].host == "1" ? (*traces)[0] : (*traces)[1];
  const HostTrace& us = (*traces)[0].host == "1" ? (*traces)[1] : (*traces)[0];
  EXPECT_EQ(eu.repeated_rows_dropped, 4);
  ASSERT_EQ(eu.samples.size(), 6u);
  for (size_t i = 0; i < 4; ++i) EXPECT_DOUBLE_EQ(eu.samples[i].cpu_load, 0.1) << i;
  EXPECT_EQ(eu.samples[4].unix_seconds, 1382842800);  // 2013-10-27 03:00:00 read as UTC
  EXPECT_DOUBLE_EQ(eu.samples[5].cpu_load, 0.3);
  EXPECT_EQ(us.repeated_rows_dropped, 1);
  ASSERT_EQ(us.samples.size(), 3u);
  EXPECT_DOUBLE_EQ(us.samples[2].cpu_load, 0.2);
  // Unix times out of order are refused still (they never repeat).
  Write("unix/1.csv", GwaHeader() + GwaRow(1382842800, 10, 1048576, 786432) +
                          GwaRow(1382839200, 20, 1048576, 786432));
  auto unix_times = ImportTrace((dir_ / "unix").string(), {});
  EXPECT_FALSE(unix_times.ok());
}

// What is not a date-time, a file that changes how it writes times, and a
// trace mixing the local clock with Unix time are refused with the file and
// line.
TEST_F(TracesTest, RejectsBadGwaDateTimes) {
  const std::string header = "Timestamp;CPU usage [%]\n";
  for (const auto& [name, rows, line, reason] :
       std::vector<std::tuple<std::string, std::string, std::string, std::string>>{
           {"feb31", "31.02.2016 00:00:00;1\n", "1.csv:2:", "'31.02.2016 00:00:00'"},
           {"hour24", "01.01.2016 24:00:00;1\n", "1.csv:2:", "date-time"},
           {"slash", "01/02/2016 00:00:00;1\n", "1.csv:2:", "DD.MM.YYYY"},
           {"dateonly", "01.01.2016;1\n", "1.csv:2:", "not an integer"},
           {"year1900", "01.01.1900 00:00:00;1\n", "1.csv:2:", "1970..2200"},
           {"switch", "01.01.2016 00:00:00;1\n1451606700;1\n", "1.csv:3:",
            "'1451606700' is written as Unix seconds but the file's earlier rows as date-times"},
           {"switch_ms", "1372629804;1\n1372629804000;1\n", "1.csv:3:",
            "is written as Unix milliseconds but the file's earlier rows as Unix seconds"},
           {"later24", "01.01.2016 00:00:00;1\n01.01.2016 24:00:00;1\n", "1.csv:3:",
            "'01.01.2016 24:00:00' is not a date-time DD.MM.YYYY"},
           {"laterempty", "1372629600;1\n;1\n", "1.csv:3:", "'' is not an integer number"},
           {"colon", "01.01.2016 00:05:;1\n", "1.csv:2:", "not an integer"},
           {"colon2", "01.01.2016 00:10:00:;1\n", "1.csv:2:", "not an integer"},
           {"wide", "01.01.2016 0023:0005;1\n", "1.csv:2:", "not an integer"},
           {"ms_then_s", "1372629600000;1\n1372629804;1\n", "1.csv:3:",
            "'1372629804' is earlier than the previous row's ('1372629600000')"},
           {"cores", "01.01.2016 00:00:00;1;4\n01.01.2016 00:05:00;1;4,5\n", "1.csv:3:",
            "CPU cores '4,5'"},
           {"comma2", "01.01.2016 00:00:00;1,0,5\n", "1.csv:2:", "'1,0,5'"},
           {"commadot", "01.01.2016 00:00:00;1.000,5\n", "1.csv:2:", "'1.000,5'"},
           // Back by an hour, but on a Wednesday; back by 2 h on the Sunday.
           {"unsorted", "26.10.2016 02:55:00;1\n26.10.2016 02:00:00;1\n", "1.csv:3:",
            "'26.10.2016 02:00:00' is earlier than the previous row's, and not as a clock set "
            "back"},
           {"twohours", "30.10.2016 03:55:00;1\n30.10.2016 01:50:00;1\n", "1.csv:3:",
            "'30.10.2016 01:50:00' is earlier than the previous row's, and not as a clock"}}) {
    const bool cores = name == "cores";
    Write(name + "/1.csv", (cores ? "Timestamp;CPU usage [%];CPU cores\n" : header) + rows);
    auto traces = ImportTrace((dir_ / name).string(), {});
    ASSERT_FALSE(traces.ok()) << name;
    EXPECT_THAT(std::string(traces.status().message()), HasSubstr(line)) << name;
    EXPECT_THAT(std::string(traces.status().message()), HasSubstr(reason)) << name;
  }
  // Free memory must be finite: 1e308 KB at 4 % overflowed to -inf.
  Write("inf/1.csv",
        "Timestamp;CPU usage [%];Memory capacity provisioned [KB];Memory usage [%]\n"
        "1451606700;7;1e308;4\n");
  auto inf = ImportTrace((dir_ / "inf").string(), {});
  ASSERT_FALSE(inf.ok());
  EXPECT_THAT(std::string(inf.status().message()), HasSubstr("1.csv:2: memory capacity and usage"));
  Write("mixed/1.csv", header + "01.01.2016 00:00:00;1\n");
  Write("mixed/2.csv", header + "1451606400;1\n");
  auto mixed = ImportTrace((dir_ / "mixed").string(), {});
  ASSERT_FALSE(mixed.ok());
  EXPECT_THAT(std::string(mixed.status().message()), HasSubstr("2.csv:2: timestamps are Unix"));
  EXPECT_THAT(std::string(mixed.status().message()), HasSubstr("cannot be mixed"));
}

// Files as they are found: a quoted header and quoted numbers, a GWA header
// naming a host column (still GWA: ';'-separated), .CSV and compressed
// per-VM files in a directory (the VM is the name without .csv.gz), a month
// folder that is a symlink (followed, and a link cycle read once), and a
// folder whose name holds ".tar" (no archive).
TEST_F(TracesTest, ReadsGwaFilesAsFound) {
  Write("quoted/vm1.csv", "\"Timestamp\";\"CPU usage [%]\"\n\"1451606700\";\"7,5\"\n");
  auto quoted = ImportTrace((dir_ / "quoted").string(), {});
  ASSERT_TRUE(quoted.ok()) << quoted.status();
  ASSERT_EQ((*quoted)[0].samples.size(), 1u);
  EXPECT_DOUBLE_EQ((*quoted)[0].samples[0].cpu_load, 0.075);

  const std::string hosted = Write("hosted.csv", "Timestamp;Host;CPU usage [%]\n1451606700;a;7\n");
  TraceFormat used = TraceFormat::kAuto;
  auto h = ImportTrace(hosted, {}, &used);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(used, TraceFormat::kGwa);

  const std::string row = "Timestamp;CPU usage [%]\n1451606700;7\n";
  Write("files/A.CSV", row);
  WriteGz("files/b.csv.gz", row);
  WriteXz("files/c.csv.xz", row);
  Write("files/notes.txt", "not a VM");
  auto files = ImportTrace((dir_ / "files").string(), {});
  ASSERT_TRUE(files.ok()) << files.status();
  std::vector<std::string> names;
  for (const HostTrace& t : *files) names.push_back(t.host);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names, (std::vector<std::string>{"A", "b", "c"}));
  auto one = ImportTrace(WriteGz("vm9.csv.gz", row), Fmt(TraceFormat::kGwa));
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)[0].host, "vm9");

  Write("months/2013-8/a.csv", "Timestamp;CPU usage [%]\n1375315200;8\n");
  Write("elsewhere/july/a.csv", "Timestamp;CPU usage [%]\n1372636800;7\n");
  fs::create_directory_symlink(dir_ / "elsewhere" / "july", dir_ / "months" / "2013-7");
  fs::create_directory_symlink(dir_ / "months", dir_ / "months" / "2013-8" / "loop");
  auto months = ImportTrace((dir_ / "months").string(), {});
  ASSERT_TRUE(months.ok()) << months.status();
  ASSERT_EQ(months->size(), 1u);
  ASSERT_EQ((*months)[0].samples.size(), 2u);  // July through the link, August once
  EXPECT_EQ((*months)[0].samples[0].unix_seconds, 1372636800);

  const std::string in_tar_dir = Write("my.targets/c.csv", kCanonical);
  auto canonical = ImportTrace(in_tar_dir, {});
  ASSERT_TRUE(canonical.ok()) << canonical.status();
  EXPECT_EQ(canonical->size(), 2u);
}

// What would be lost silently is refused: a VM stored as a hard link in a
// tarball (its data is under the first name), a file with CR-only line ends
// (its rows would vanish into the header), a trace with headers only.
TEST_F(TracesTest, RefusesGwaFilesThatWouldLoseRows) {
  const std::string path = (dir_ / "hl.tar").string();
  {
    std::unique_ptr<archive, int (*)(archive*)> w(archive_write_new(), archive_write_free);
    ASSERT_EQ(archive_write_set_format_pax_restricted(w.get()), ARCHIVE_OK);
    ASSERT_EQ(archive_write_open_filename(w.get(), path.c_str()), ARCHIVE_OK);
    const std::string data = "Timestamp;CPU usage [%]\n1451606700;7\n";
    archive_entry* e = archive_entry_new();
    archive_entry_set_pathname(e, "t/1.csv");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, static_cast<la_int64_t>(data.size()));
    ASSERT_EQ(archive_write_header(w.get(), e), ARCHIVE_OK);
    ASSERT_EQ(archive_write_data(w.get(), data.data(), data.size()),
              static_cast<la_ssize_t>(data.size()));
    archive_entry_free(e);
    e = archive_entry_new();
    archive_entry_set_pathname(e, "t/2.csv");
    archive_entry_set_hardlink(e, "t/1.csv");
    archive_entry_set_filetype(e, AE_IFREG);
    archive_entry_set_perm(e, 0644);
    archive_entry_set_size(e, 0);
    ASSERT_EQ(archive_write_header(w.get(), e), ARCHIVE_OK);
    archive_entry_free(e);
    ASSERT_EQ(archive_write_close(w.get()), ARCHIVE_OK);
  }
  auto hl = ImportTrace(path, {});
  ASSERT_FALSE(hl.ok());
  EXPECT_THAT(std::string(hl.status().message()), HasSubstr("t/2.csv: a hard link to t/1.csv"));

  Write("cr/1.csv", "Timestamp;CPU usage [%]\r1451606700;7\r1451607000;7\r");
  auto cr = ImportTrace((dir_ / "cr").string(), {});
  ASSERT_FALSE(cr.ok());
  EXPECT_THAT(std::string(cr.status().message()), HasSubstr("1.csv:1: line ends are CR only"));
  auto cr_canonical = ImportTrace(Write("cr.csv", "host,timestamp,cpu_load\ra,1,0.5\r"), {});
  ASSERT_FALSE(cr_canonical.ok());
  EXPECT_THAT(std::string(cr_canonical.status().message()), HasSubstr("CR only"));

  Write("headers/1.csv", "Timestamp;CPU usage [%]\n");
  Write("headers/2.csv", "Timestamp;CPU usage [%]\n\n");
  auto headers = ImportTrace((dir_ / "headers").string(), {});
  ASSERT_FALSE(headers.ok());
  EXPECT_THAT(std::string(headers.status().message()), HasSubstr("headers: no data rows"));
}

// A non-numeric GWA field names the file and line.
TEST_F(TracesTest, RejectsBadGwaField) {
  Write("d/1.csv", GwaHeader() + GwaRow(1000, 50, 1, 1) +
                       "1300;\t2;\t5000;\t1;\tN/A;\t1;\t1;\t0;\t0;\t0;\t0\n");
  auto traces = ImportTrace((dir_ / "d").string(), {});
  ASSERT_FALSE(traces.ok());
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("1.csv:3:"));
  EXPECT_THAT(std::string(traces.status().message()), HasSubstr("'N/A'"));
}

// Availability matrix with CRLF: a 1 is a sample with load 0 and unknown
// memory at start + column * period; a 0 gives no sample.
TEST_F(TracesTest, ReadsAvailabilityMatrix) {
  std::string p = WriteGz("m.txt.gz", "1\t0\t1\t\r\n0\t0\t1\t\r\n");
  ImportOptions opt;
  opt.start_unix_seconds = 1000;
  opt.period_seconds = 3600;
  TraceFormat used = TraceFormat::kAuto;
  auto traces = ImportTrace(p, opt, &used);
  ASSERT_TRUE(traces.ok()) << traces.status();
  EXPECT_EQ(used, TraceFormat::kAvailabilityMatrix);
  ASSERT_EQ(traces->size(), 2u);
  ASSERT_EQ((*traces)[0].samples.size(), 2u);
  EXPECT_EQ((*traces)[0].samples[0].unix_seconds, 1000);
  EXPECT_EQ((*traces)[0].samples[1].unix_seconds, 1000 + 2 * 3600);
  EXPECT_EQ((*traces)[0].samples[1].cpu_load, 0.0);
  EXPECT_FALSE((*traces)[0].samples[1].has_free_mem());
  ASSERT_EQ((*traces)[1].samples.size(), 1u);
  EXPECT_EQ((*traces)[0].period_seconds, 3600);
}

// Values other than 0/1 and ragged rows are rejected with line and reason.
TEST_F(TracesTest, RejectsBadMatrix) {
  auto t = ImportTrace(Write("b.txt", "1\t0\n1\t2\n"), Fmt(TraceFormat::kAvailabilityMatrix));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("b.txt:2: column 2: '2'"));
  t = ImportTrace(Write("r.txt", "1\t0\n1\n"), Fmt(TraceFormat::kAvailabilityMatrix));
  ASSERT_FALSE(t.ok());
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("r.txt:2:"));
}

TEST_F(TracesTest, ParsesFormatNames) {
  EXPECT_EQ(*ParseTraceFormat("gwa"), TraceFormat::kGwa);
  EXPECT_EQ(*ParseTraceFormat("availability-matrix"), TraceFormat::kAvailabilityMatrix);
  EXPECT_FALSE(ParseTraceFormat("swf").ok());
}

// The real shared traces (skipped when ../shared is absent).
TEST_F(TracesTest, ReadsSharedTraces) {
  const char* shared = std::getenv("SOJOURN_SHARED_DIR");
  fs::path base = shared ? fs::path(shared) : fs::path("../shared");
  fs::path ms = base / "data/microsoft99-desktop-availability/PingData00-even-rows.txt.gz";
  fs::path bb = base / "data/bitbrains-rnd-vm-load/bitbrains-rnd-100vms-2013Q3.tar.xz";
  if (!fs::exists(ms) || !fs::exists(bb)) GTEST_SKIP() << "shared traces not found under " << base;
  auto m = ImportTrace(ms.string(), {});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->size(), 500u);  // README: 500 lines
  size_t up = 0;
  for (const HostTrace& t : *m) up += t.samples.size();
  double mean = static_cast<double>(up) / (500.0 * 840.0);
  EXPECT_NEAR(mean, 0.60, 0.02);  // README: mean availability 0.60
  auto b = ImportTrace(bb.string(), {});
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->size(), 100u);  // README: 100 VMs
  size_t rows = 0;
  for (const HostTrace& t : *b) {
    rows += t.samples.size();
    EXPECT_EQ(std::stoi(t.host) % 5, 1) << t.host;  // README: id % 5 == 1
    EXPECT_GT(t.total_mem_mb, 0);
  }
  EXPECT_NEAR(static_cast<double>(rows), 2.48e6, 0.01e6);  // README: 2.48 M samples
}

// Two samples 2e11 s apart would be a grid of 6.7e8 points at 300 s.
TEST(CheckGridSizeTest, RefusesAbsurdSpans) {
  auto host = [](const std::string& name, std::vector<int64_t> ts) {
    HostTrace t;
    t.host = name;
    for (int64_t x : ts) {
      HostSample s;
      s.unix_seconds = x;
      t.samples.push_back(s);
    }
    return t;
  };
  const GridLimits limits{1e6, 1e6, 1.5e6, 1e9};
  // A year at 300 s: 105,121 points.
  EXPECT_TRUE(CheckGridSize({host("a", {0, 31536000}), host("b", {})}, 300, limits, "x").ok());
  // Limits count points: N steps are N + 1 points, so a limit of "1e6 steps"
  // is 1e6 + 1 (usage's 10,000 days refused exactly 10,000 days).
  const GridLimits steps{1e6 + 1, 1e6 + 1, 1.5e6, 1e9};
  EXPECT_TRUE(CheckGridSize({host("a", {0, 300000000})}, 300, steps, "x").ok());
  EXPECT_FALSE(CheckGridSize({host("a", {0, 300000300})}, 300, steps, "x").ok());
  // Above the span limit no step helps: the message says so and does not
  // advise a larger --step.
  absl::Status st = CheckGridSize({host("a", {-100000000000, 100000000000})}, 300, limits,
                                  "pass a larger --step");
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(st.message()),
              ::testing::HasSubstr("host a spans 2e+11 s"));
  EXPECT_THAT(std::string(st.message()),
              ::testing::HasSubstr("above the limit of 1e+09 s (31.7 years) at any grid step; "
                                   "cut the trace"));
  EXPECT_THAT(std::string(st.message()), ::testing::Not(::testing::HasSubstr("--step")));
  // Within the span limit but above the points limit: the advice is given.
  st = CheckGridSize({host("a", {0, 900000000})}, 300, limits, "pass a larger --step");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()),
              ::testing::HasSubstr("3000001 grid points of 300 s, above the limit of 1000000 per "
                                   "host; pass a larger --step"));
  // Each host is short; together they span 2e11 s (the global outage grid).
  st = CheckGridSize({host("a", {0, 300}), host("b", {200000000000})}, 300, limits, "cut it");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("the trace spans 2e+11 s"));
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("at any grid step; cut the trace"));
  st = CheckGridSize({host("a", {0, 300}), host("b", {900000000})}, 300, limits,
                     "pass a larger --step");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()),
              ::testing::HasSubstr("the trace spans 9e+08 s (0 to 900000000): 3000001 grid "
                                   "points of 300 s, above the limit of 1000000; pass a larger "
                                   "--step"));
  // A coarse step does not make a 2e9 s span acceptable.
  EXPECT_FALSE(CheckGridSize({host("a", {0, 2000000000})}, 3600, limits, "").ok());
  // Extreme int64 timestamps do not overflow.
  st = CheckGridSize({host("a", {INT64_MIN + 1, INT64_MAX})}, 1, limits, "");
  EXPECT_FALSE(st.ok());
  // Many hosts of a moderate span each.
  std::vector<HostTrace> many;
  for (int i = 0; i < 20; ++i) many.push_back(host("h" + std::to_string(i), {0, 30000000}));
  st = CheckGridSize(many, 300, limits, "");
  ASSERT_FALSE(st.ok());
  EXPECT_THAT(std::string(st.message()), ::testing::HasSubstr("in all"));
}

}  // namespace
}  // namespace sojourn::traces
