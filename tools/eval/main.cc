// sojourn-eval: backtests sojourn's estimators on traces.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <string>

#include "common/build_info.h"
#include "tools/eval/command.h"

namespace sojourn::eval {
std::map<std::string, EvalCommand>& EvalCommands() {
  static auto* commands = new std::map<std::string, EvalCommand>();
  return *commands;
}
}  // namespace sojourn::eval

static void PrintUsage(FILE* out) {
  std::fprintf(out,
               "usage: sojourn-eval COMMAND [options]\n\n"
               "Backtests sojourn's estimators on traces with the same code the services use.\n\n"
               "commands:\n");
  for (const auto& [name, cmd] : sojourn::eval::EvalCommands()) {
    std::fprintf(out, "  %-14s %s\n", name.c_str(), cmd.summary.c_str());
  }
  std::fprintf(out,
               "\n'sojourn-eval COMMAND --help' explains a command's options; "
               "'sojourn-eval --version' names the build.\n");
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  if (!std::strcmp(argv[1], "--version") || !std::strcmp(argv[1], "version")) {
    std::fputs(sojourn::VersionText("sojourn-eval").c_str(), stdout);
    return 0;
  }
  auto& commands = sojourn::eval::EvalCommands();
  auto it = commands.find(argv[1]);
  if (it == commands.end()) {
    std::fprintf(stderr, "sojourn-eval: unknown command '%s' (try --help)\n", argv[1]);
    return 2;
  }
  int rc = 0;
  try {
    rc = it->second.run(argc - 1, argv + 1);
  } catch (const std::bad_alloc&) {
    // Inputs are read whole: /dev/zero or a multi-gigabyte line aborted with
    // an uncaught std::bad_alloc (session 22).
    std::fprintf(stderr, "sojourn-eval %s: out of memory (is the input far larger than a trace?)\n",
                 argv[1]);
    return 1;
  }
  // The report goes to stdout: a full disk or closed pipe must not exit 0.
  if (std::fflush(stdout) != 0 || std::ferror(stdout)) {
    std::fprintf(stderr, "sojourn-eval %s: cannot write the report to standard output: %s\n",
                 argv[1], std::strerror(errno));
    return 1;
  }
  return rc;
}
