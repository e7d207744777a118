// Helpers shared by sojourn's tests.
#ifndef SOJOURN_TESTS_TEST_UTIL_H_
#define SOJOURN_TESTS_TEST_UTIL_H_

#include <cstdlib>
#include <filesystem>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
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

}  // namespace sojourn::testing

#endif  // SOJOURN_TESTS_TEST_UTIL_H_
