// Small helpers for command-line front ends: one-line errors with exit code 2,
// human durations ("2h", "90m", "45s", "1.5h").
#ifndef SOJOURN_COMMON_CLI_UTIL_H_
#define SOJOURN_COMMON_CLI_UTIL_H_

#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace sojourn {

// Exit code for bad input / bad usage in every sojourn CLI.
inline constexpr int kExitUsage = 2;

// Prints "<program>: <reason>" on stderr and exits with kExitUsage.
[[noreturn]] void DieUsage(absl::string_view program, absl::string_view reason);

// Parses a positive duration such as "2h", "90m", "45s", "1.5h", "1h30m" or a
// bare number of seconds. Rejects negative and zero durations.
absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text);

}  // namespace sojourn

#endif  // SOJOURN_COMMON_CLI_UTIL_H_
