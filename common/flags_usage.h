// `--help` for binaries whose flags live in a main.cc. Abseil's --help lists
// only flags defined in a file named after the binary (statemgr.cc,
// statemgr-main.cc, statemgr_main.cc), so for services/statemgr/main.cc it
// printed "No flags matched".
//
//   int main(int argc, char** argv) {
//     sojourn::SetUsage("statemgr: stores host samples ...", __FILE__);
//     absl::ParseCommandLine(argc, argv);
#ifndef SOJOURN_COMMON_FLAGS_USAGE_H_
#define SOJOURN_COMMON_FLAGS_USAGE_H_

#include "absl/strings/string_view.h"

namespace sojourn {

// Sets the program usage message and makes --help / --helpshort list the
// flags defined in `main_file` (pass __FILE__ from the file defining them).
// Call once, before absl::ParseCommandLine.
void SetUsage(absl::string_view usage_message, const char* main_file);

}  // namespace sojourn

#endif  // SOJOURN_COMMON_FLAGS_USAGE_H_
