#include "common/flags_usage.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/cli_util.h"
#include "common/text.h"

namespace sojourn {
namespace {

// Abseil records each flag's file as __FILE__ at its definition, but hands
// out a normalized name without the leading "/" or "./": match it as a
// suffix on a path boundary.
bool DefinedIn(absl::string_view flag_file, const std::string& main_file) {
  return !flag_file.empty() &&
         (flag_file == main_file || absl::EndsWith(main_file, absl::StrCat("/", flag_file)));
}

// Flags services share, defined once in common/ rather than in each main.cc
// (TLS: every service; backups: the three with a database, which alone link
// them); --help lists them beside the binary's own.
bool SharedFlag(absl::string_view flag_file) {
  return absl::EndsWith(flag_file, "common/tls_flags.cc") ||
         absl::EndsWith(flag_file, "common/db_backup_flags.cc");
}

bool IsHelp(absl::string_view name) {
  return name == "help" || name == "h" || name == "helpfull" || name == "helpshort" ||
         name == "helppackage" || name == "helpon" || name == "helpmatch";
}

bool IsBool(const absl::CommandLineFlag& flag) { return flag.IsOfType<bool>(); }

std::string TypeWord(const absl::CommandLineFlag& flag) {
  if (flag.IsOfType<bool>()) return "BOOL";
  if (flag.IsOfType<std::string>()) return "STRING";
  if (flag.IsOfType<double>() || flag.IsOfType<float>()) return "NUMBER";
  return "INT";
}

// Appends `text` wrapped at 78 columns, each line indented by `indent`.
void AppendWrapped(std::string* out, absl::string_view text, int indent) {
  const std::string pad(indent, ' ');
  size_t col = 0;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (col > 0 && col + 1 + word.size() > 78) {
      absl::StrAppend(out, "\n");
      col = 0;
    }
    if (col == 0) {
      absl::StrAppend(out, pad, word);
      col = pad.size() + word.size();
    } else {
      absl::StrAppend(out, " ", word);
      col += 1 + word.size();
    }
  }
  absl::StrAppend(out, "\n");
}

}  // namespace

std::string FlagsHelp(absl::string_view usage_message, const char* main_file) {
  const std::string file = main_file;
  std::vector<const absl::CommandLineFlag*> mine;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    if (!flag->IsRetired() && (DefinedIn(flag->Filename(), file) || SharedFlag(flag->Filename()))) {
      mine.push_back(flag);
    }
  }
  std::sort(mine.begin(), mine.end(),
            [](const auto* a, const auto* b) { return a->Name() < b->Name(); });
  std::string out(usage_message);
  if (!absl::EndsWith(out, "\n")) out += "\n";
  out += "\nflags (--flag=value; boolean flags: --flag, --flag=false or --noflag):\n";
  for (const absl::CommandLineFlag* f : mine) {
    const std::string def = f->DefaultValue();
    absl::StrAppend(&out, "  --", f->Name(), "=", TypeWord(*f), "  (default ",
                    f->IsOfType<std::string>() ? absl::StrCat("\"", def, "\"") : def, ")\n");
    AppendWrapped(&out, f->Help(), 6);
  }
  out += "\n--help prints this text; --version the build (git commit, library versions).\n";
  return out;
}

std::string CheckFlagsCommandLine(const std::vector<std::string>& args) {
  bool after_bool_without_value = false;
  std::string last_bool;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      if (i + 1 < args.size()) {
        return absl::StrCat("unexpected argument '", Excerpt(args[i + 1]),
                            "' (this program takes no arguments besides flags; see --help)");
      }
      break;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      if (after_bool_without_value) {
        return absl::StrCat("unexpected argument '", Excerpt(arg),
                            "' (boolean flags take their value with '=': --", last_bool, "=",
                            Excerpt(arg), ")");
      }
      return absl::StrCat("unexpected argument '", Excerpt(arg),
                          "' (this program takes no arguments besides flags; see --help)");
    }
    after_bool_without_value = false;
    absl::string_view body(arg);
    body.remove_prefix(body[1] == '-' ? 2 : 1);
    const size_t eq = body.find('=');
    const bool has_value = eq != absl::string_view::npos;
    const std::string name(has_value ? body.substr(0, eq) : body);
    std::string value(has_value ? body.substr(eq + 1) : absl::string_view());
    if (IsHelp(name)) return "help";
    if (name == "version") return "version";
    absl::CommandLineFlag* flag = name.empty() ? nullptr : absl::FindCommandLineFlag(name);
    if (flag == nullptr && absl::StartsWith(name, "no")) {
      absl::CommandLineFlag* negated = absl::FindCommandLineFlag(name.substr(2));
      if (negated != nullptr && IsBool(*negated)) {
        if (has_value) return absl::StrCat("--", name, " takes no value");
        std::string error;
        if (!negated->ParseFrom("false", &error)) return error;
        continue;
      }
    }
    if (flag == nullptr || flag->IsRetired()) {
      return absl::StrCat("unknown flag --", Excerpt(name), " (see --help)");
    }
    if (!has_value) {
      if (IsBool(*flag)) {
        value = "true";
        after_bool_without_value = true;
        last_bool = name;
      } else if (i + 1 < args.size()) {
        value = args[++i];  // "--flag value", as Abseil accepts it
      } else {
        return absl::StrCat("flag --", name, " needs a value (--", name, "=VALUE)");
      }
    }
    std::string error;
    if (!flag->ParseFrom(value, &error)) {
      return absl::StrCat("--", name, ": '", Excerpt(value), "' is not a valid ", TypeWord(*flag),
                          IsBool(*flag) ? " (true or false)" : "");
    }
  }
  return "";
}

void ParseFlagsWithVersion(int argc, char** argv, absl::string_view usage_message,
                           const char* main_file, std::string (*version)(absl::string_view)) {
  absl::SetProgramUsageMessage(usage_message);
  // Anything still reaching Abseil's own usage output lists this file's flags.
  const std::string file = main_file;
  absl::FlagsUsageConfig config;
  config.contains_help_flags = [file](absl::string_view f) { return DefinedIn(f, file); };
  config.contains_helpshort_flags = config.contains_help_flags;
  absl::SetFlagsUsageConfig(config);

  std::string program = argc > 0 ? argv[0] : "sojourn";
  program = program.substr(program.rfind('/') + 1);
  std::vector<std::string> args(argv + std::min(argc, 1), argv + argc);
  const std::string problem = CheckFlagsCommandLine(args);
  if (problem == "help") {
    const std::string help = FlagsHelp(usage_message, main_file);
    std::fwrite(help.data(), 1, help.size(), stdout);
    std::fflush(stdout);
    std::exit(0);
  }
  if (problem == "version") {
    const std::string text = version(program);
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
    std::exit(0);
  }
  if (!problem.empty()) DieUsage(program, problem);
  // The command line is known good: let Abseil set the flags for real (it
  // also handles --flagfile and --fromenv). Whatever a --flagfile held that
  // is not a flag comes back as a positional argument.
  std::vector<char*> rest = absl::ParseCommandLine(argc, argv);
  if (rest.size() > 1) {
    DieUsage(program, absl::StrCat("unexpected argument '", Excerpt(rest[1]), "' (see --help)"));
  }
}

}  // namespace sojourn
