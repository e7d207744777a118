#include "common/cli_util.h"

#include <cstdio>
#include <fstream>

#include "gtest/gtest.h"

namespace sojourn {
namespace {

// Human durations parse to the right number of seconds.
TEST(ParsePositiveDurationTest, AcceptsUnitsAndBareSeconds) {
  EXPECT_EQ(*ParsePositiveDuration("2h"), absl::Hours(2));
  EXPECT_EQ(*ParsePositiveDuration("90m"), absl::Minutes(90));
  EXPECT_EQ(*ParsePositiveDuration("1h30m"), absl::Minutes(90));
  EXPECT_EQ(*ParsePositiveDuration("45"), absl::Seconds(45));
  EXPECT_EQ(*ParsePositiveDuration("1.5h"), absl::Minutes(90));
  // Days, which absl::ParseDuration does not know: alone, fractional, before
  // other units.
  EXPECT_EQ(*ParsePositiveDuration("30d"), absl::Hours(720));
  EXPECT_EQ(*ParsePositiveDuration("1.5d"), absl::Hours(36));
  EXPECT_EQ(*ParsePositiveDuration("1d12h"), absl::Hours(36));
  EXPECT_EQ(*ParsePositiveDuration("2d30m"), absl::Hours(48) + absl::Minutes(30));
}

// Negative, zero and garbage durations are rejected with a reason.
TEST(ParsePositiveDurationTest, RejectsNonPositiveAndGarbage) {
  EXPECT_FALSE(ParsePositiveDuration("-2h").ok());
  EXPECT_FALSE(ParsePositiveDuration("0").ok());
  auto bad = ParsePositiveDuration("soon");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("soon"), absl::string_view::npos);
  // Non-finite and overflowing values would become INT64_MAX seconds.
  for (const char* text : {"nan", "inf", "-nan", "1e30", "99999999999999999999", "999999999h"}) {
    auto r = ParsePositiveDuration(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(text), absl::string_view::npos) << r.status();
  }
  EXPECT_TRUE(ParsePositiveDuration("8760h").ok());  // a year is fine
  // A day count must be a finite number, and what follows it a duration.
  for (const char* text : {"d", "xd", "1dd", "1d2", "1d-2h", "nand", "infd", "-1d", "0d",
                           "999999999d", "1e300d", "1h2d", "-0d12h", " 1d", "+1d", "1d+2h"}) {
    EXPECT_FALSE(ParsePositiveDuration(text).ok()) << text;
  }
}

}  // namespace
}  // namespace sojourn

namespace sojourn {
namespace {

std::vector<char*> Argv(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (std::string& a : args) out.push_back(a.data());
  return out;
}

// Both value forms, flags, order and typed getters.
TEST(ParseCommandLineTest, ParsesValuesAndFlags) {
  std::vector<std::string> args = {"--trace", "t.csv", "--json=o.json", "--seed", "7",
                                   "--sweep", "--th2=0.5"};
  auto argv = Argv(args);
  CommandLine cl = ParseCommandLine(static_cast<int>(argv.size()), argv.data(), "prog", "help\n",
                                    {"trace", "json", "seed", "th2"}, {"sweep"});
  EXPECT_EQ(cl.Get("trace"), "t.csv");
  EXPECT_EQ(cl.Get("json"), "o.json");
  EXPECT_EQ(cl.GetInt("seed", 1), 7);
  EXPECT_DOUBLE_EQ(cl.GetDouble("th2", 0.6), 0.5);
  EXPECT_DOUBLE_EQ(cl.GetDouble("missing", 0.25), 0.25);
  EXPECT_TRUE(cl.Flag("sweep"));
  EXPECT_FALSE(cl.Has("sweep"));
  ASSERT_EQ(cl.ordered().size(), 4u);
  EXPECT_EQ(cl.ordered()[1].first, "json");
}

// Bad command lines exit with code 2 and a one-line reason.
TEST(ParseCommandLineDeathTest, RejectsBadCommandLines) {
  auto parse = [](std::vector<std::string> args) {
    auto argv = Argv(args);
    CommandLine cl = ParseCommandLine(static_cast<int>(argv.size()), argv.data(), "prog", "",
                                      {"seed"}, {"json"});
    (void)cl.GetInt("seed", 0);
  };
  EXPECT_EXIT(parse({"--nope", "1"}), ::testing::ExitedWithCode(kExitUsage), "unknown option --nope");
  EXPECT_EXIT(parse({"stray"}), ::testing::ExitedWithCode(kExitUsage), "unexpected argument");
  EXPECT_EXIT(parse({"--seed"}), ::testing::ExitedWithCode(kExitUsage), "needs a value");
  EXPECT_EXIT(parse({"--json=x"}), ::testing::ExitedWithCode(kExitUsage), "takes no value");
  EXPECT_EXIT(parse({"--seed", "x"}), ::testing::ExitedWithCode(kExitUsage), "not an integer");
}

// GetIntInRange refuses what static_cast<int>(GetInt()) used to wrap
// (4294967297 -> 1, 2147483648 -> negative) as well as values out of range.
TEST(ParseCommandLineDeathTest, GetIntInRangeRejectsOutOfRange) {
  auto get = [](std::vector<std::string> args) {
    auto argv = Argv(args);
    CommandLine cl = ParseCommandLine(static_cast<int>(argv.size()), argv.data(), "prog", "",
                                      {"n"});
    return cl.GetIntInRange("n", 5, 1, 1000);
  };
  EXPECT_EQ(get({}), 5);
  EXPECT_EQ(get({"--n", "1000"}), 1000);
  EXPECT_EQ(get({"--n=1"}), 1);
  EXPECT_EXIT(get({"--n", "4294967297"}), ::testing::ExitedWithCode(kExitUsage),
              "--n wants an integer in \\[1, 1000\\], got '4294967297'");
  EXPECT_EXIT(get({"--n", "2147483648"}), ::testing::ExitedWithCode(kExitUsage), "--n wants");
  EXPECT_EXIT(get({"--n", "0"}), ::testing::ExitedWithCode(kExitUsage), "--n wants");
  EXPECT_EXIT(get({"--n", "99999999999999999999"}), ::testing::ExitedWithCode(kExitUsage),
              "--n wants");
  EXPECT_EXIT(get({"--n", "1.5"}), ::testing::ExitedWithCode(kExitUsage), "--n wants");
}

TEST(ParseIntInRangeTest, BoundsAreInclusive) {
  EXPECT_EQ(*ParseIntInRange("--x", "-3", -3, 3), -3);
  EXPECT_EQ(*ParseIntInRange("--x", "3", -3, 3), 3);
  EXPECT_FALSE(ParseIntInRange("--x", "4", -3, 3).ok());
  EXPECT_FALSE(ParseIntInRange("--x", "", -3, 3).ok());
}

// A bad output path is refused; an existing file is neither truncated nor
// a new one left behind.
// A full disk shows only when the file is closed for a short text: it must
// be an error, not a silent empty file and exit 0.
TEST(WriteTextFileTest, ChecksTheWriteAndTheClose) {
  const std::string path = ::testing::TempDir() + "/write_text_file_test.json";
  ASSERT_TRUE(WriteTextFile(path, "{\"a\": 1}\n").ok());
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  EXPECT_EQ(line, "{\"a\": 1}");
  absl::Status full = WriteTextFile("/dev/full", "{}\n");
  EXPECT_TRUE(absl::IsInvalidArgument(full)) << full;
  EXPECT_NE(full.message().find("write error on /dev/full (No space left on device)"),
            std::string::npos)
      << full;
  absl::Status missing = WriteTextFile("/nonexistent-dir-sojourn/x.json", "{}");
  EXPECT_NE(missing.message().find("cannot write /nonexistent-dir-sojourn/x.json ("),
            std::string::npos)
      << missing;
}

TEST(CheckWritableFileTest, ProbesWithoutSideEffects) {
  const std::string dir = ::testing::TempDir();
  EXPECT_FALSE(CheckWritableFile("/nonexistent-dir-sojourn/x.json").ok());
  EXPECT_FALSE(CheckWritableFile(dir).ok());
  const std::string fresh = dir + "/cli_util_test_fresh.json";
  std::remove(fresh.c_str());
  EXPECT_TRUE(CheckWritableFile(fresh).ok());
  EXPECT_FALSE(std::ifstream(fresh).good());
  const std::string old = dir + "/cli_util_test_old.json";
  { std::ofstream(old) << "previous"; }
  EXPECT_TRUE(CheckWritableFile(old).ok());
  std::string content;
  std::getline(std::ifstream(old), content);
  EXPECT_EQ(content, "previous");
  std::remove(old.c_str());
}

}  // namespace
}  // namespace sojourn
