#include "common/build_info.h"

#include <google/protobuf/stubs/common.h>

#include "absl/base/config.h"
#include "absl/strings/str_cat.h"
#include "sojourn_build_commit.h"  // generated: cmake/generate_build_commit.cmake

#if __has_include(<grpcpp/version_info.h>)
#include <grpcpp/version_info.h>
#endif
#if __has_include(<rocksdb/version.h>)
#include <rocksdb/version.h>
#endif

namespace sojourn {

const char* BuildCommit() { return SOJOURN_GIT_COMMIT; }

std::map<std::string, std::string> BuildDependencies() {
  std::map<std::string, std::string> out;
  out["abseil"] = absl::StrCat(ABSL_LTS_RELEASE_VERSION);
  out["protobuf"] = absl::StrCat(GOOGLE_PROTOBUF_VERSION / 1000000, ".",
                                 GOOGLE_PROTOBUF_VERSION / 1000 % 1000, ".",
                                 GOOGLE_PROTOBUF_VERSION % 1000);
#ifdef GRPC_CPP_VERSION_STRING
  out["grpc"] = GRPC_CPP_VERSION_STRING;
#endif
#ifdef ROCKSDB_MAJOR
  out["rocksdb"] = absl::StrCat(ROCKSDB_MAJOR, ".", ROCKSDB_MINOR, ".", ROCKSDB_PATCH);
#endif
  return out;
}

std::string VersionText(absl::string_view program) {
  const std::map<std::string, std::string> deps = BuildDependencies();
  std::string text = absl::StrCat(program, " (sojourn) ", BuildCommit(), "\nbuilt with");
  const char* sep = " ";
  for (const auto& [key, name] : {std::pair<const char*, const char*>{"grpc", "gRPC"},
                                  {"protobuf", "protobuf"},
                                  {"rocksdb", "RocksDB"},
                                  {"abseil", "Abseil"}}) {
    auto it = deps.find(key);
    if (it == deps.end()) continue;
    absl::StrAppend(&text, sep, name, " ", it->second);
    sep = ", ";
  }
  absl::StrAppend(&text, "\n");
  return text;
}

std::map<std::string, std::string> BuildInfoLabels() {
  std::map<std::string, std::string> labels = BuildDependencies();
  labels["commit"] = BuildCommit();
  return labels;
}

}  // namespace sojourn
