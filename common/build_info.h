// What a binary says about its own build: `--version`, the services' start-up
// log line and their sojourn_build_info metric. Operators quote it in bug
// reports; it names the git commit and the versions of the packaged libraries
// the binary was compiled against.
#ifndef SOJOURN_COMMON_BUILD_INFO_H_
#define SOJOURN_COMMON_BUILD_INFO_H_

#include <map>
#include <string>

#include "absl/strings/string_view.h"

namespace sojourn {

// `git describe --always --dirty` of the tree built ("4c7dc92a1b2c", with
// "-dirty" for uncommitted changes), or SOJOURN_GIT_COMMIT from the build's
// environment, or "unknown".
const char* BuildCommit();

// The libraries compiled against, as label name -> version: abseil, grpc,
// protobuf, rocksdb (those this binary's build has headers for).
std::map<std::string, std::string> BuildDependencies();

// What `PROGRAM --version` prints: "PROGRAM (sojourn) COMMIT" and a line
// "built with gRPC 1.51.1, protobuf 3.21.12, RocksDB 7.8.3, Abseil 20220623".
std::string VersionText(absl::string_view program);

// The labels of the sojourn_build_info gauge (always 1): commit and the
// dependencies' versions.
std::map<std::string, std::string> BuildInfoLabels();

}  // namespace sojourn

#endif  // SOJOURN_COMMON_BUILD_INFO_H_
