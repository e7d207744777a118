#include "common/hash.h"

#include "gtest/gtest.h"

namespace sojourn {
namespace {

// The published FNV-1a 64-bit test vectors: the names a client derives from
// content (sojourn import-jobs' batch ids) must not move between builds.
TEST(Fnv1a64Test, MatchesTheReferenceVectors) {
  EXPECT_EQ(Fnv1a64(""), 0xcbf29ce484222325ull);
  EXPECT_EQ(Fnv1a64("a"), 0xaf63dc4c8601ec8cull);
  EXPECT_EQ(Fnv1a64("foobar"), 0x85944171f73967e8ull);
}

// Hashing in pieces is hashing the whole.
TEST(Fnv1a64Test, ChainsPieces) {
  EXPECT_EQ(Fnv1a64("bar", Fnv1a64("foo")), Fnv1a64("foobar"));
  EXPECT_NE(Fnv1a64("foobaz"), Fnv1a64("foobar"));
}

}  // namespace
}  // namespace sojourn
