// Hashes that must be the same on every run, build and machine (absl::Hash
// is seeded per process): names a client derives from content and sends to
// a service, phases spread over hosts.
#ifndef SOJOURN_COMMON_HASH_H_
#define SOJOURN_COMMON_HASH_H_

#include <cstdint>

#include "absl/strings/string_view.h"

namespace sojourn {

inline constexpr uint64_t kFnv1a64Offset = 14695981039346656037ull;

// FNV-1a (64 bits) of `bytes`, continuing from `h` (chain calls to hash
// several pieces as one).
inline uint64_t Fnv1a64(absl::string_view bytes, uint64_t h = kFnv1a64Offset) {
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

}  // namespace sojourn

#endif  // SOJOURN_COMMON_HASH_H_
