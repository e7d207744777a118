// Quoting untrusted text (host names, addresses, policy names from requests)
// in status messages and logs. A status message travels back in gRPC
// trailing metadata, which peers cap (8 KiB by default): echoing a 20 kB
// field would break the channel for every call on it, not just this one.
//
//   return absl::NotFoundError(absl::StrCat("unknown host '", Excerpt(host), "'"));
#ifndef SOJOURN_COMMON_TEXT_H_
#define SOJOURN_COMMON_TEXT_H_

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace sojourn {

// Bytes of escaped text Excerpt() keeps by default.
inline constexpr size_t kExcerptBytes = 64;

// `text` with non-printable bytes escaped (absl::CHexEscape: "\n", "\x00",
// UTF-8 as "\xc3\xb4"), cut to at most `max_bytes` escaped bytes (never in
// the middle of an escape) and then marked with "…(N bytes)", N being the
// length of the original. Short printable text comes back unchanged.
std::string Excerpt(absl::string_view text, size_t max_bytes = kExcerptBytes);

// Appends `v` in the shortest decimal form that std::from_chars (and strtod)
// reads back as the same double (std::to_chars): what the exporters write.
void AppendShortest(std::string* out, double v);

// Whether `text` is well-formed UTF-8 (RFC 3629: no overlong forms, no
// surrogates, nothing above U+10FFFF), as a proto3 string field must be.
// Abseil 20220623 has no public validator and protobuf's is internal.
bool IsValidUtf8(absl::string_view text);

// Bytes a file must start with for CompressionOf to tell every format.
inline constexpr size_t kCompressionMagicBytes = 10;

// The compression (or archive) that `head`, a file's first bytes, starts
// with: "gzip", "xz", "bzip2", "zstd", "lz4" or "zip"; "" for none of them
// (plain text). bzip2 needs "BZh", the block size and a block's or the
// end's magic number, so a text that merely starts with "BZh" is text.
const char* CompressionOf(absl::string_view head);

// Longest host name or address any service accepts (bytes; DNS names are at
// most 253).
inline constexpr size_t kMaxNameBytes = 255;

// A host name as every service accepts it where it is stored (PushSamples,
// RegisterHost): 1..kMaxNameBytes bytes, no control character (NUL,
// newline, ...), not only whitespace. INVALID_ARGUMENT naming `field`
// otherwise, with the name shortened by Excerpt().
absl::Status ValidateHostName(absl::string_view host, absl::string_view field = "host");

// A name that is only looked up, never stored (GetSeries, GetHost, ...):
// 1..kMaxNameBytes bytes without NUL, so hosts stored before the stricter
// ValidateHostName stay reachable. INVALID_ARGUMENT naming `field` otherwise.
absl::Status ValidateLookupName(absl::string_view name, absl::string_view field = "host");

// A gRPC target such as "host:7403", "dns:///name:7403" or "unix:/path":
// 1..kMaxNameBytes bytes, no whitespace or control character.
// INVALID_ARGUMENT naming `field` otherwise.
absl::Status ValidateAddress(absl::string_view address, absl::string_view field);

// An address a service is dialled on, as the broker stores a state manager's
// (RegisterHost), the predictor dials it (statemgr_address of its requests)
// and a state manager advertises itself (--advertise_address): ValidateAddress
// and HOST:PORT, optionally after "dns:///": HOST a host name or IPv4 address
// (letters, digits, '.', '-', '_') or a bracketed IPv6 address ("[::1]",
// "[fe80::1%eth0]"), PORT 1..5 digits in [1, 65535]. A service listens on
// such an address only, so anything else -- "localhost" (dialled on port
// 443), "h:abc", "h:+1", "h:1:2", "[::1]", "unix:/path" -- can never reach
// one. INVALID_ARGUMENT naming `field` otherwise.
absl::Status ValidateHostPortAddress(absl::string_view address, absl::string_view field);

// An address a user gives a command-line tool to dial: a gRPC target with a
// scheme ("unix:/path", "dns:///h:7401", "ipv4:...", "ipv6:...", "vsock:...")
// by ValidateAddress, anything else by ValidateHostPortAddress ("localhost"
// would be dialled on port 443, "h:7401x" on port 0).
absl::Status ValidateDialAddress(absl::string_view address, absl::string_view field);

// Host attributes as every service accepts them (PushSamples, RegisterHost):
// finite, >= 0 (0 = unknown) and below bounds no machine reaches (cpu_mhz <=
// 1e6, cpu_cores <= 1e6, total_mem_mb <= 1e12). The broker ranks hosts by
// them, so a NaN or 1e308 clock rate would reorder every other host.
// INVALID_ARGUMENT naming the host otherwise.
absl::Status ValidateHostAttributes(absl::string_view host, double cpu_mhz, int64_t cpu_cores,
                                    double total_mem_mb);

}  // namespace sojourn

#endif  // SOJOURN_COMMON_TEXT_H_
