// Helpers shared by sojourn's tests.
#ifndef SOJOURN_TESTS_TEST_UTIL_H_
#define SOJOURN_TESTS_TEST_UTIL_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace sojourn::testing {

// Like leveldb's util/testutil.h IsOK(): EXPECT_THAT(s, IsOk()).
MATCHER(IsOk, "") { return arg.ok(); }

// A fresh temporary directory, removed with its contents on destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "sojourn-test-XXXXXX").string();
    path_ = mkdtemp(tmpl.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }
  std::string File(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// A TCP port that accepts connections (the kernel completes them) and never
// answers: a machine whose state manager hangs, or a firewall that swallows
// the traffic.
class SilentListener {
 public:
  SilentListener() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(addr);
    if (fd_ < 0 || bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
        listen(fd_, 16) != 0 || getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
      ADD_FAILURE() << "cannot listen on loopback";
      return;
    }
    address_ = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
  }
  ~SilentListener() {
    if (fd_ >= 0) close(fd_);
  }
  const std::string& address() const { return address_; }

 private:
  int fd_ = -1;
  std::string address_;
};

// The value of the series `name` in Prometheus exposition text (what
// Metrics::Render returns) whose labels include every `label=value` of
// `labels` (the service label and any others may be there too); -1 when no
// series matches.
inline double MetricValue(const std::string& text, const std::string& name,
                          const std::vector<std::pair<std::string, std::string>>& labels = {}) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (!absl::StartsWith(line, name + "{")) continue;
    const size_t close = line.find('}');
    if (close == absl::string_view::npos) continue;
    const absl::string_view inside = line.substr(name.size() + 1, close - name.size() - 1);
    bool all = true;
    for (const auto& [key, value] : labels) {
      all = all && absl::StrContains(absl::StrCat(",", inside, ","),
                                     absl::StrCat(",", key, "=\"", value, "\","));
    }
    double v = 0;
    if (all && absl::SimpleAtod(absl::StripAsciiWhitespace(line.substr(close + 1)), &v)) return v;
  }
  return -1;
}

}  // namespace sojourn::testing

#endif  // SOJOURN_TESTS_TEST_UTIL_H_
