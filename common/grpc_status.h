// Conversion between absl::Status and grpc::Status. Codes are equal; convert
// once at the service edge (STYLE.md "Errors").
#ifndef SOJOURN_COMMON_GRPC_STATUS_H_
#define SOJOURN_COMMON_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace sojourn {

grpc::Status ToGrpcStatus(const absl::Status& status);
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace sojourn

#endif  // SOJOURN_COMMON_GRPC_STATUS_H_
