// sojourn-eval: backtests sojourn's estimators on traces.
#include <cstdio>
#include <cstring>
#include <string>

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
  std::fprintf(out, "\n'sojourn-eval COMMAND --help' explains a command's options.\n");
}

int main(int argc, char** argv) {
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    PrintUsage(argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  auto& commands = sojourn::eval::EvalCommands();
  auto it = commands.find(argv[1]);
  if (it == commands.end()) {
    std::fprintf(stderr, "sojourn-eval: unknown command '%s' (try --help)\n", argv[1]);
    return 2;
  }
  return it->second.run(argc - 1, argv + 1);
}
