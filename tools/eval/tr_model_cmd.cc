// sojourn-eval tr-model FILE.json: prints the TR curve of a smp-tr-v1 model
// (issue 3) as {"M": M, "tr": [TR(1), ..., TR(M)], "mttf_steps": x}.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <new>
#include <sstream>
#include <string>
#include <system_error>
#include <vector>

#include "models/availability/model_json.h"
#include "models/availability/tr.h"
#include "tools/eval/command.h"

namespace sojourn::eval {
namespace {

constexpr char kUsage[] =
    "usage: sojourn-eval tr-model FILE.json\n"
    "\n"
    "Reads a semi-Markov model in the smp-tr-v1 JSON format and prints its\n"
    "temporal reliability curve TR(1..M) and the MTTF on stdout:\n"
    "  {\"M\": M, \"tr\": [TR(1), ..., TR(M)], \"mttf_steps\": x}\n"
    "TR(m) is the probability that the host, in state \"init\" at step 0, is in\n"
    "none of S3, S4, S5 at steps 1..m (paper 000 eq. 3). mttf_steps is the mean\n"
    "time to failure restricted to the horizon, sum_{m=0}^{M-1} TR(m) with\n"
    "TR(0) = 1, in steps of d seconds.\n"
    "\n"
    "Model format:\n"
    "  {\"format\":\"smp-tr-v1\",\"M\":600,\"d\":6,\"init\":1,\n"
    "   \"Q\":{\"1\":{\"2\":0.9,\"3\":0.05},\"2\":{...}},\n"
    "   \"H\":{\"1\":{\"2\":[p(l=1),p(l=2),...],\"3\":{\"40\":0.5,\"41\":0.5}},\"2\":{...}}}\n"
    "An H pmf is a list starting at l = 1 or an object keyed by l; a Q row may\n"
    "sum to less than 1 (no transition within the horizon); \"K\" (Q*H laid out\n"
    "like H) may replace Q and H; optional \"K_first\" (like K) is the kernel of\n"
    "the sojourn in progress at step 0. States 3, 4, 5 are absorbing; a state\n"
    "without a row never leaves.\n"
    "\n"
    "FILE may be '-' for stdin. Bad input (malformed JSON, missing fields,\n"
    "negative probabilities, pmfs or rows summing above 1, bad init, state keys\n"
    "that are not canonical positive integers or repeat) prints a one-line\n"
    "reason on stderr and exits with code 2. So does a model too large to\n"
    "solve: n transient states over M steps need about 70 n^2 M bytes and\n"
    "n^3 M operations; above 8 GiB or 1e10 operations it is refused (20 states\n"
    "at M = 1e6, 5 states at M = 1e7; 2 states reach it only beyond M = 1e7).\n";

int RunTrModel(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--help") || !std::strcmp(argv[i], "-h")) {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  // An option is named as such: "--bogus" said "expected exactly one FILE.json".
  for (int i = 1; i < argc; ++i) {
    if (argv[i][0] == '-' && argv[i][1] != '\0') {
      std::fprintf(stderr,
                   "sojourn-eval tr-model: unknown option '%s' (tr-model takes only FILE.json or "
                   "'-'; try --help)\n",
                   argv[i]);
      return 2;
    }
  }
  if (argc != 2) {
    std::fprintf(stderr, "sojourn-eval tr-model: expected exactly one FILE.json (try --help)\n");
    return 2;
  }
  const std::string path = argv[1];
  std::stringstream text;
  if (path == "-") {
    text << std::cin.rdbuf();
  } else {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      std::fprintf(stderr, "sojourn-eval tr-model: %s: is a directory, not a model file\n",
                   path.c_str());
      return 2;
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
      std::fprintf(stderr, "sojourn-eval tr-model: %s: cannot open: %s\n", path.c_str(),
                   std::strerror(errno));
      return 2;
    }
    text << in.rdbuf();
  }
  auto model = availability::ParseTrModelJson(text.str());
  if (!model.ok()) {
    std::fprintf(stderr, "sojourn-eval tr-model: %s: %s\n", path.c_str(),
                 std::string(model.status().message()).c_str());
    return 2;
  }
  std::vector<double> tr;
  try {
    tr = availability::TrCurve(model->kernel, model->init, model->M);
  } catch (const std::bad_alloc&) {
    // Below the validator's budget yet more than this machine has.
    std::fprintf(stderr,
                 "sojourn-eval tr-model: %s: out of memory computing TR(1..%d) (about %.3g GB "
                 "estimated): lower M\n",
                 path.c_str(), model->M,
                 availability::EstimateTrCurveCost(model->kernel, model->M).bytes / 1e9);
    return 2;
  }
  std::string out;
  out.reserve(tr.size() * 24 + 64);
  char buf[64];
  std::snprintf(buf, sizeof(buf), "{\"M\": %d, \"tr\": [", model->M);
  out += buf;
  for (size_t m = 0; m < tr.size(); ++m) {
    std::snprintf(buf, sizeof(buf), m == 0 ? "%.17g" : ", %.17g", tr[m]);
    out += buf;
  }
  std::snprintf(buf, sizeof(buf), "], \"mttf_steps\": %.17g}\n", availability::MttfSteps(tr));
  out += buf;
  std::fwrite(out.data(), 1, out.size(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}

const EvalCommandRegistrar kRegistrar("tr-model",
                                      "print the TR curve and MTTF of a smp-tr-v1 model",
                                      RunTrModel);

}  // namespace
}  // namespace sojourn::eval
