#include "common/output_file.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/resource.h>
#include <unistd.h>
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

// A symbolic link stays one: the file it names gets the new bytes (written
// beside it and renamed). A device or FIFO is written in place, never
// replaced by a regular file (`sojourn export --out /dev/null` run as root
// replaced /dev/null). A link to nothing is refused.
TEST(OutputFileTest, LinksDevicesAndFifosAreNotReplaced) {
  namespace fs = std::filesystem;
  TempDir dir;
  const std::string real = dir.File("real.csv"), link = dir.File("link.csv");
  std::ofstream(real) << "older file\n";
  fs::create_symlink(real, link);
  {
    auto out = OutputFile::Open(link);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)->tmp_path(), fs::canonical(real).string() + ".tmp");
    ASSERT_TRUE((*out)->Write("new\n").ok());
    ASSERT_TRUE((*out)->Finish().ok());
  }
  EXPECT_TRUE(fs::is_symlink(link));
  EXPECT_EQ(ReadPlain(real), "new\n");

  // /dev/null through a link of the test's own: were the device replaced, the
  // link would be, not /dev/null.
  const std::string null_link = dir.File("null.swf");
  fs::create_symlink("/dev/null", null_link);
  for (const std::string& path : {null_link, null_link + ".gz"}) {
    if (path != null_link) fs::create_symlink("/dev/null", path);
    auto out = OutputFile::Open(path);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE((*out)->Write(Text()).ok());
    ASSERT_TRUE((*out)->Finish().ok()) << path;
    EXPECT_TRUE(fs::is_symlink(path)) << path;
    EXPECT_FALSE(fs::exists(path + ".tmp")) << path;
  }
  EXPECT_TRUE(fs::is_character_file("/dev/null"));

  // The reader end is open first (non-blocking), so the writer's open does
  // not wait, and a writer that replaced the FIFO would fail, not hang.
  const std::string fifo = dir.File("fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  const int reader = ::open(fifo.c_str(), O_RDONLY | O_NONBLOCK);
  ASSERT_GE(reader, 0);
  {
    auto out = OutputFile::Open(fifo);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ((*out)->tmp_path(), fifo);
    EXPECT_EQ(OutputFile::TempPathFor(fifo), "");
    ASSERT_TRUE((*out)->Write("through the pipe\n").ok());
    ASSERT_TRUE((*out)->Finish().ok());
  }
  char buf[64] = {};
  EXPECT_EQ(::read(reader, buf, sizeof(buf)), 17);
  ::close(reader);
  EXPECT_EQ(std::string(buf), "through the pipe\n");
  EXPECT_TRUE(fs::is_fifo(fifo));

  // /proc/self/fd/N (what /dev/stdout names) of a regular file, as a shell's
  // redirection gives: written in place, the open file not unlinked.
  const std::string redirected = dir.File("redirected.log");
  std::ofstream(redirected) << "earlier\n";
  const int fd = ::open(redirected.c_str(), O_WRONLY | O_APPEND);
  ASSERT_GE(fd, 0);
  struct stat before {};
  ASSERT_EQ(::fstat(fd, &before), 0);
  {
    const std::string proc = "/proc/self/fd/" + std::to_string(fd);
    EXPECT_EQ(OutputFile::TempPathFor(proc), "");
    auto out = OutputFile::Open(proc);
    ASSERT_TRUE(out.ok()) << out.status();
    ASSERT_TRUE((*out)->Write("exported\n").ok());
    ASSERT_TRUE((*out)->Finish().ok());
  }
  struct stat after {};
  ASSERT_EQ(::stat(redirected.c_str(), &after), 0);
  ::close(fd);
  EXPECT_EQ(after.st_ino, before.st_ino);
  EXPECT_EQ(ReadPlain(redirected), "exported\n");  // "wb" truncates, as > would

  const std::string dangling = dir.File("dangling.csv");
  fs::create_symlink(dir.File("missing.csv"), dangling);
  auto out = OutputFile::Open(dangling);
  ASSERT_FALSE(out.ok());
  EXPECT_NE(out.status().message().find("symbolic link to a missing file"), std::string::npos)
      << out.status();
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

// After a write fails (here: beyond the process's file size limit), every
// later call says so and nothing reaches PATH.
TEST(OutputFileTest, FailureIsFinal) {
  TempDir dir;
  const std::string path = dir.File("big.csv");
  struct rlimit old;
  ASSERT_EQ(getrlimit(RLIMIT_FSIZE, &old), 0);
  struct sigaction ignore = {};
  struct sigaction previous = {};
  ignore.sa_handler = SIG_IGN;
  ASSERT_EQ(sigaction(SIGXFSZ, &ignore, &previous), 0);  // EFBIG instead of the signal
  struct rlimit small = old;
  small.rlim_cur = 1 << 20;
  absl::Status first, second, finish;
  if (setrlimit(RLIMIT_FSIZE, &small) == 0) {
    auto out = OutputFile::Open(path);
    if (out.ok()) {
      first = (*out)->Write(Text());
      second = (*out)->Write("x");
      finish = (*out)->Finish();
    } else {
      first = out.status();
    }
  }
  // Restored before any assertion can return early.
  ASSERT_EQ(setrlimit(RLIMIT_FSIZE, &old), 0);
  ASSERT_EQ(sigaction(SIGXFSZ, &previous, nullptr), 0);
  EXPECT_EQ(first.code(), absl::StatusCode::kDataLoss) << first;
  EXPECT_NE(first.message().find("write error"), std::string::npos) << first;
  EXPECT_EQ(second, first);
  EXPECT_EQ(finish, first);
  EXPECT_FALSE(std::filesystem::exists(path));
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
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
