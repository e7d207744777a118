// Status helpers shared by every component.
//
// Abseil 20220623 (Debian 12) has no ABSL_RETURN_IF_ERROR / ASSIGN_OR_RETURN,
// so sojourn keeps these two small macros here.
//
//   absl::Status Load(...) {
//     RETURN_IF_ERROR(Open(...));
//     ASSIGN_OR_RETURN(auto rows, ReadRows(...));
//   }
#ifndef SOJOURN_COMMON_STATUS_H_
#define SOJOURN_COMMON_STATUS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define SOJOURN_CONCAT_INNER_(a, b) a##b
#define SOJOURN_CONCAT_(a, b) SOJOURN_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                        \
  do {                                               \
    const ::absl::Status sojourn_status_ = (expr);   \
    if (!sojourn_status_.ok()) return sojourn_status_; \
  } while (0)

#define SOJOURN_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                                   \
  if (!tmp.ok()) return tmp.status();                  \
  lhs = std::move(*tmp)

#define ASSIGN_OR_RETURN(lhs, expr) \
  SOJOURN_ASSIGN_OR_RETURN_IMPL_(SOJOURN_CONCAT_(sojourn_statusor_, __LINE__), lhs, expr)

#endif  // SOJOURN_COMMON_STATUS_H_
