#include "common/output_file.h"

#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace sojourn {
namespace {

using sojourn::testing::TempDir;

std::string ReadPlain(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::string ReadGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return "<cannot open>";
  std::string text;
  char buf[1 << 16];
  int n;
  while ((n = gzread(f, buf, sizeof(buf))) > 0) text.append(buf, n);
  gzclose(f);
  return text;
}

// More than the 1 MiB buffer, so that it is written in several parts.
std::string Text() {
  std::string t;
  for (int i = 0; t.size() < 3u << 20; ++i) t += "line " + std::to_string(i) + "\n";
  return t;
}

// Finish() renames the whole file into place, plain or gzipped; until then
// only PATH.tmp exists and an older PATH is as it was.
TEST(OutputFileTest, FinishPutsTheWholeFileInPlace) {
  TempDir dir;
  const std::string text = Text();
  for (const char* name : {"out.txt", "out.txt.gz"}) {
    const std::string path = dir.File(name);
    std::ofstream(path) << "older file\n";
    auto out = OutputFile::Open(path);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)->tmp_path(), path + ".tmp");
    ASSERT_TRUE((*out)->Write(text.substr(0, 1000)).ok());
    ASSERT_TRUE((*out)->Write(text.substr(1000)).ok());
    EXPECT_EQ((*out)->bytes(), static_cast<int64_t>(text.size()));
    EXPECT_TRUE(std::filesystem::exists(path + ".tmp"));
    EXPECT_EQ(ReadPlain(path), "older file\n");
    ASSERT_TRUE((*out)->Finish().ok());
    EXPECT_TRUE((*out)->finished());
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
    if (path.substr(path.size() - 3) == ".gz") {
      EXPECT_LT(std::filesystem::file_size(path), text.size() / 2);  // compressed
      EXPECT_EQ(ReadGzip(path), text);
    } else {
      EXPECT_EQ(ReadPlain(path), text);
    }
    EXPECT_EQ((*out)->Write("more").code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ((*out)->Finish().code(), absl::StatusCode::kFailedPrecondition);
  }
}

// A file given up before Finish() leaves neither PATH.tmp nor a new PATH.
TEST(OutputFileTest, AbandonedFileLeavesNothing) {
  TempDir dir;
  const std::string kept = dir.File("kept.csv");
  std::ofstream(kept) << "older file\n";
  for (const std::string& path : {dir.File("new.csv.gz"), kept}) {
    {
      auto out = OutputFile::Open(path);
      ASSERT_TRUE(out.ok());
      ASSERT_TRUE((*out)->Write(Text()).ok());
    }
    EXPECT_FALSE(std::filesystem::exists(path + ".tmp")) << path;
  }
  EXPECT_FALSE(std::filesystem::exists(dir.File("new.csv.gz")));
  EXPECT_EQ(ReadPlain(kept), "older file\n");
}

// A name that cannot be written is refused at Open, with the reason.
TEST(OutputFileTest, RefusesWhatCannotBeWritten) {
  TempDir dir;
  auto empty = OutputFile::Open("");
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kInvalidArgument);
  auto directory = OutputFile::Open(dir.path());
  EXPECT_EQ(directory.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(directory.status().message().find("is a directory"), std::string::npos);
  for (const char* name : {"no-such-dir/out.csv", "no-such-dir/out.csv.gz"}) {
    auto missing = OutputFile::Open(dir.File(name));
    EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument) << name;
    EXPECT_NE(missing.status().message().find("cannot create file"), std::string::npos)
        << missing.status();
  }
}

}  // namespace
}  // namespace sojourn
