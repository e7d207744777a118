#include "common/cli_util.h"

#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace sojourn {

void DieUsage(absl::string_view program, absl::string_view reason) {
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()), program.data(),
               static_cast<int>(reason.size()), reason.data());
  std::exit(kExitUsage);
}

absl::StatusOr<absl::Duration> ParsePositiveDuration(absl::string_view text) {
  absl::Duration d;
  double seconds = 0;
  if (absl::SimpleAtod(text, &seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(text, &d)) {
    return absl::InvalidArgumentError(
        absl::StrCat("cannot parse duration '", text, "' (use e.g. 2h, 90m, 45s)"));
  }
  if (d <= absl::ZeroDuration()) {
    return absl::InvalidArgumentError(absl::StrCat("duration must be positive, got '", text, "'"));
  }
  return d;
}

}  // namespace sojourn
