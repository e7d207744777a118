// RocksDB status -> absl status, once at the storage edge (STYLE.md
// "Errors"). Header-only: only the components that link RocksDB include it.
#ifndef SOJOURN_COMMON_ROCKS_STATUS_H_
#define SOJOURN_COMMON_ROCKS_STATUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "rocksdb/status.h"

namespace sojourn {

// "`what`: RocksDB's message" with the code that says what a caller can do:
// DATA_LOSS for a damaged database (Corruption), UNAVAILABLE for what may
// pass (I/O errors, busy, timed out, try again), NOT_FOUND, INVALID_ARGUMENT,
// else INTERNAL. OK for OK.
inline absl::Status FromRocksStatus(const rocksdb::Status& s, absl::string_view what) {
  if (s.ok()) return absl::OkStatus();
  std::string msg = absl::StrCat(what, ": ", s.ToString());
  if (s.IsCorruption()) return absl::DataLossError(msg);
  if (s.IsIOError() || s.IsBusy() || s.IsTimedOut() || s.IsTryAgain()) {
    return absl::UnavailableError(msg);
  }
  if (s.IsNotFound()) return absl::NotFoundError(msg);
  if (s.IsInvalidArgument()) return absl::InvalidArgumentError(msg);
  return absl::InternalError(msg);
}

}  // namespace sojourn

#endif  // SOJOURN_COMMON_ROCKS_STATUS_H_
