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

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
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

}  // namespace sojourn::testing

#endif  // SOJOURN_TESTS_TEST_UTIL_H_
