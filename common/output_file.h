// A file written whole or not at all: the bytes go to PATH.tmp (gzip at
// level 1 for a PATH ending in .gz), which Finish() syncs and renames to PATH.
// After a failure, or without Finish(), PATH is untouched and PATH.tmp is
// removed; after a crash PATH is the old file or the whole new one. "-" is
// standard output (no temporary file, nothing renamed). A symbolic link keeps
// being one: the file it names is replaced so. A PATH that is no regular file
// (/dev/null, /dev/stdout, a FIFO) is written in place, neither renamed nor
// synced, and what reached it before a failure stays there.
//
// Used by the exporters (`sojourn export`): traces::CanonicalCsvWriter and
// turnaround::WriteSwf.
#ifndef SOJOURN_COMMON_OUTPUT_FILE_H_
#define SOJOURN_COMMON_OUTPUT_FILE_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace sojourn {

class OutputFile {
 public:
  // InvalidArgumentError when PATH is empty or a directory, or PATH.tmp
  // cannot be created (the message names the file and the reason).
  static absl::StatusOr<std::unique_ptr<OutputFile>> Open(const std::string& path);
  // The temporary file Open(path) would write and Finish() rename: PATH.tmp,
  // or the linked file's name + ".tmp"; "" for standard output, a device, a
  // FIFO, anything under /dev/ or /proc/ (written in place), or a PATH Open
  // refuses. For a signal handler that removes it (set before Open).
  static std::string TempPathFor(const std::string& path);
  // Without Finish(): closes and removes PATH.tmp.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  // Appends `bytes` (buffered; DataLossError when a write fails).
  absl::Status Write(absl::string_view bytes);
  // Flushes, syncs, closes and renames PATH.tmp to PATH. DataLossError on a
  // failure (PATH.tmp is removed by the destructor then).
  //
  // After a failed Write or Finish, every later call returns that error (what
  // reached the file is unknown, so nothing more is written to it); after a
  // successful Finish, FailedPreconditionError.
  absl::Status Finish();
  // The file being written until Finish() renames it ("" for standard output;
  // PATH itself for a device or FIFO).
  const std::string& tmp_path() const { return tmp_path_; }
  // True once Finish() succeeded.
  bool finished() const { return finished_; }
  // The first failure of Write or Finish (OK until then).
  const absl::Status& status() const { return failed_; }

 private:
  struct Target {
    std::string path;      // the file written: PATH, or what its link names
    std::string tmp_path;  // "" when written in place
    bool direct = false;
  };
  static absl::StatusOr<Target> Resolve(const std::string& path);

  OutputFile() = default;
  absl::Status Flush();
  absl::Status FinishOnce();
  // Refuses a call after Finish() or a failure.
  absl::Status Usable() const;
  // The name errors use: PATH.tmp, or "standard output".
  std::string name() const;

  std::string path_;
  std::string tmp_path_;  // "" for standard output; PATH itself when direct_
  bool direct_ = false;   // PATH is a device or FIFO: written in place
  std::FILE* file_ = nullptr;
  void* gz_ = nullptr;  // gzFile, for a PATH ending in .gz
  std::string buffer_;
  bool finished_ = false;
  absl::Status failed_;  // the first failure, OK until then
};

}  // namespace sojourn

#endif  // SOJOURN_COMMON_OUTPUT_FILE_H_
