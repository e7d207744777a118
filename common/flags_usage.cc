#include "common/flags_usage.h"

#include <string>

#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace sojourn {

void SetUsage(absl::string_view usage_message, const char* main_file) {
  absl::SetProgramUsageMessage(usage_message);
  // Abseil records each flag's file as __FILE__ at its definition (the
  // caller's __FILE__), but hands the filter a normalized name without the
  // leading "/" or "./": match it as a suffix on a path boundary.
  const std::string file = main_file;
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [file](absl::string_view f) {
    return !f.empty() && (f == file || absl::EndsWith(file, absl::StrCat("/", f)));
  };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);
}

}  // namespace sojourn
