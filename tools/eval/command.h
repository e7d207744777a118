// Subcommand registry of the `sojourn-eval` tool. Each subcommand lives in its
// own <name>_cmd.cc and registers itself with a static EvalCommandRegistrar:
//
//   static int RunTrModel(int argc, char** argv);  // argv[0] is the subcommand
//   static sojourn::eval::EvalCommandRegistrar reg("tr-model",
//       "print the TR curve of a smp-tr-v1 model", RunTrModel);
//
// A subcommand returns the process exit code: 0 success, 2 bad input (with a
// one-line reason on stderr), 1 other failure.
#ifndef SOJOURN_TOOLS_EVAL_COMMAND_H_
#define SOJOURN_TOOLS_EVAL_COMMAND_H_

#include <functional>
#include <map>
#include <string>

namespace sojourn::eval {

struct EvalCommand {
  std::string summary;
  std::function<int(int, char**)> run;
};

std::map<std::string, EvalCommand>& EvalCommands();

struct EvalCommandRegistrar {
  EvalCommandRegistrar(const std::string& name, const std::string& summary,
                       std::function<int(int, char**)> run) {
    EvalCommands()[name] = EvalCommand{summary, std::move(run)};
  }
};

}  // namespace sojourn::eval

#endif  // SOJOURN_TOOLS_EVAL_COMMAND_H_
