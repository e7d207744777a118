// One logging entry point for every component: timestamped lines on stderr.
//
//   SOJOURN_LOG(INFO, "listening on %s", address);
#ifndef SOJOURN_COMMON_LOGGING_H_
#define SOJOURN_COMMON_LOGGING_H_

#include <string>

#include "absl/strings/str_format.h"

namespace sojourn {

enum class LogLevel { kDebug, kInfo, kWarning, kError };

// Thread-safe; each call writes one whole line.
void LogLine(LogLevel level, const std::string& message);
// Lines below this level are dropped (default kInfo).
void SetMinLogLevel(LogLevel level);

}  // namespace sojourn

#define SOJOURN_LOG_LEVEL_DEBUG ::sojourn::LogLevel::kDebug
#define SOJOURN_LOG_LEVEL_INFO ::sojourn::LogLevel::kInfo
#define SOJOURN_LOG_LEVEL_WARNING ::sojourn::LogLevel::kWarning
#define SOJOURN_LOG_LEVEL_ERROR ::sojourn::LogLevel::kError
#define SOJOURN_LOG(level, ...) \
  ::sojourn::LogLine(SOJOURN_LOG_LEVEL_##level, ::absl::StrFormat(__VA_ARGS__))

#endif  // SOJOURN_COMMON_LOGGING_H_
