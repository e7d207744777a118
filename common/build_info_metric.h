// The services' side of common/build_info.h: the sojourn_build_info gauge and
// the start-up log line naming the build. Inline, so that only the services'
// own binaries link sojourn_build_info (see common/flags_usage.h).
#ifndef SOJOURN_COMMON_BUILD_INFO_METRIC_H_
#define SOJOURN_COMMON_BUILD_INFO_METRIC_H_

#include "common/build_info.h"
#include "common/logging.h"
#include "common/metrics.h"

namespace sojourn {

// Exports sojourn_build_info{commit, grpc, protobuf, rocksdb, abseil} = 1 and
// logs the commit the service runs.
inline void ExportBuildInfo(Metrics& metrics) {
  metrics.Set("sojourn_build_info",
              "the build this process runs: git commit and the versions of the libraries it was "
              "compiled against (always 1)",
              BuildInfoLabels(), 1);
  SOJOURN_LOG(INFO, "%s (sojourn) %s", metrics.service(), BuildCommit());
}

}  // namespace sojourn

#endif  // SOJOURN_COMMON_BUILD_INFO_METRIC_H_
