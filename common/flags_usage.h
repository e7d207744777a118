// Command-line parsing for the binaries whose flags are Abseil flags defined
// in a main.cc (the four services and sojourn-replay), so that they all treat
// the command line the same way:
//
//   int main(int argc, char** argv) {
//     sojourn::ParseFlags(argc, argv,
//                         "statemgr: stores host samples ...\nusage: statemgr [--flag=value ...]",
//                         __FILE__);
//
// - --help (also -h, --helpfull, --helpshort) prints the usage message and the
//   flags defined in `main_file` with their defaults on stdout, and exits 0.
//   (Abseil's own --help exited 1, printed the program name twice and a
//   "Flags from <build path>" header, and matched only files named after the
//   binary.)
// - --version prints the binary's commit and library versions
//   (common/build_info.h) on stdout and exits 0.
// - A stray argument exits 2 with one line: absl::ParseCommandLine returns
//   positional arguments rather than refusing them, so `--follow false` used
//   to leave --follow true and silently drop "false".
// - An unknown flag, a missing value or a value the flag's type does not
//   accept also exit 2 with one line (Abseil exits 1).
#ifndef SOJOURN_COMMON_FLAGS_USAGE_H_
#define SOJOURN_COMMON_FLAGS_USAGE_H_

#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "common/build_info.h"

namespace sojourn {

// Parses argv into the Abseil flags as described above. `usage_message`
// starts with "<program>: <what it does>"; `main_file` is __FILE__ of the
// file defining the binary's flags. Call once, first thing in main().
// (Inline, so that the reference to VersionText, and the link to
// sojourn_build_info, is the binary's own: a library linking it would relink
// every test at each commit.)
void ParseFlagsWithVersion(int argc, char** argv, absl::string_view usage_message,
                           const char* main_file, std::string (*version)(absl::string_view));
inline void ParseFlags(int argc, char** argv, absl::string_view usage_message,
                       const char* main_file) {
  ParseFlagsWithVersion(argc, argv, usage_message, main_file, &VersionText);
}

// The checks of ParseFlags, without exiting: the one-line reason the command
// line `args` (argv without the program name) is refused, "" when it is fine,
// "help" when it asks for the help text, or "version" for --version. Sets the flags it parses.
std::string CheckFlagsCommandLine(const std::vector<std::string>& args);

// The --help text: `usage_message`, then every flag defined in `main_file`
// (sorted, with its default and help).
std::string FlagsHelp(absl::string_view usage_message, const char* main_file);

}  // namespace sojourn

#endif  // SOJOURN_COMMON_FLAGS_USAGE_H_
