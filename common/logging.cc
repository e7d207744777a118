#include "common/logging.h"

#include <atomic>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace sojourn {
namespace {
std::atomic<int> min_level{static_cast<int>(LogLevel::kInfo)};
const char* LevelName(LogLevel level) {
  switch (level) {
    case LogLevel::kDebug: return "D";
    case LogLevel::kInfo: return "I";
    case LogLevel::kWarning: return "W";
    case LogLevel::kError: return "E";
  }
  return "?";
}
}  // namespace

void SetMinLogLevel(LogLevel level) { min_level = static_cast<int>(level); }

void LogLine(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < min_level) return;
  std::string line = absl::StrCat(
      LevelName(level), " ", absl::FormatTime("%Y-%m-%dT%H:%M:%E3SZ", absl::Now(), absl::UTCTimeZone()),
      " ", message, "\n");
  // One fwrite per line keeps concurrent lines whole.
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace sojourn
