#include "common/text.h"

#include <algorithm>
#include <charconv>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status.h"

namespace sojourn {

bool IsValidUtf8(absl::string_view text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  for (size_t i = 0; i < n;) {
    const unsigned char c = p[i];
    if (c < 0x80) {
      ++i;
      continue;
    }
    // Lead byte: sequence length and the range of the second byte, which
    // excludes overlong forms (E0, F0), surrogates (ED) and > U+10FFFF (F4).
    size_t len = 0;
    unsigned char lo = 0x80, hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      len = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
      len = 3;
      if (c == 0xE0) lo = 0xA0;
      if (c == 0xED) hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
      len = 4;
      if (c == 0xF0) lo = 0x90;
      if (c == 0xF4) hi = 0x8F;
    } else {
      return false;  // continuation byte, C0/C1 or F5..FF as a lead
    }
    if (i + len > n || p[i + 1] < lo || p[i + 1] > hi) return false;
    for (size_t k = 2; k < len; ++k) {
      if ((p[i + k] & 0xC0) != 0x80) return false;
    }
    i += len;
  }
  return true;
}

std::string Excerpt(absl::string_view text, size_t max_bytes) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    // Byte by byte, so a cut never splits an escape sequence.
    const std::string piece = absl::CHexEscape(text.substr(i, 1));
    if (out.size() + piece.size() > max_bytes) {
      absl::StrAppend(&out, "\xe2\x80\xa6(", text.size(), " bytes)");
      return out;
    }
    out += piece;
  }
  return out;
}

absl::Status ValidateHostName(absl::string_view host, absl::string_view field) {
  if (host.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  if (host.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be at most ", kMaxNameBytes,
                                                   " bytes, got ", host.size(), ": '",
                                                   Excerpt(host), "'"));
  }
  bool blank = true;
  for (char c : host) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u < 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " '", Excerpt(host), "' contains a control character (NUL, newline, ...)"));
    }
    if (c != ' ') blank = false;
  }
  if (blank) return absl::InvalidArgumentError(absl::StrCat(field, " is only whitespace"));
  return absl::OkStatus();
}

absl::Status ValidateLookupName(absl::string_view name, absl::string_view field) {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  if (name.size() > kMaxNameBytes || name.find('\0') != absl::string_view::npos) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be 1..", kMaxNameBytes,
                                                   " bytes without NUL, got ", name.size(),
                                                   " bytes: '", Excerpt(name), "'"));
  }
  return absl::OkStatus();
}

absl::Status ValidateAddress(absl::string_view address, absl::string_view field) {
  if (address.empty()) return absl::InvalidArgumentError(absl::StrCat(field, " is required"));
  if (address.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be at most ", kMaxNameBytes,
                                                   " bytes, got ", address.size(), ": '",
                                                   Excerpt(address), "'"));
  }
  for (char c : address) {
    const unsigned char u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u == 0x7f) {
      return absl::InvalidArgumentError(absl::StrCat(
          field, " '", Excerpt(address), "' contains whitespace or a control character"));
    }
  }
  // A numeric port must be one a peer can listen on: gRPC takes 99999 modulo
  // 65536 and silently dials port 34463, which may be another service.
  const size_t colon = address.rfind(':');
  if (colon != absl::string_view::npos && colon + 1 < address.size()) {
    const absl::string_view port = address.substr(colon + 1);
    if (std::all_of(port.begin(), port.end(), [](char c) { return c >= '0' && c <= '9'; })) {
      uint64_t value = 0;
      for (char c : port.substr(0, 7)) value = value * 10 + static_cast<uint64_t>(c - '0');
      if (port.size() > 7 || value < 1 || value > 65535) {
        return absl::InvalidArgumentError(absl::StrCat(field, " '", Excerpt(address),
                                                       "': the port must be in [1, 65535]"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status ValidateHostAttributes(absl::string_view host, double cpu_mhz, int64_t cpu_cores,
                                    double total_mem_mb) {
  // Written so that NaN fails every comparison.
  if (!(cpu_mhz >= 0 && cpu_mhz <= 1e6) || !(cpu_cores >= 0 && cpu_cores <= 1000000) ||
      !(total_mem_mb >= 0 && total_mem_mb <= 1e12)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "host ", Excerpt(host), ": attributes must be finite, >= 0 and at most cpu_mhz 1e6, "
        "cpu_cores 1000000, total_mem_mb 1e12; got ", cpu_mhz, ", ", cpu_cores, ", ",
        total_mem_mb));
  }
  return absl::OkStatus();
}

absl::Status ValidateDialAddress(absl::string_view address, absl::string_view field) {
  // dns:///HOST:PORT is HOST:PORT resolved by gRPC's DNS resolver, which
  // dials port 443 when none is given, as for a bare host.
  if (absl::StartsWith(address, "dns:///")) return ValidateHostPortAddress(address, field);
  // What follows the other schemes is checked too: "unix:" alone, or
  // "dns:localhost" (port 443) and "ipv4:127.0.0.1" (port 0), reached gRPC
  // and failed there, retried forever by a service.
  for (absl::string_view scheme : {"unix:", "unix-abstract:", "vsock:"}) {
    if (!absl::StartsWith(address, scheme)) continue;
    RETURN_IF_ERROR(ValidateAddress(address, field));
    if (address.size() == scheme.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " '", Excerpt(address), "' names no ", scheme, " target"));
    }
    return absl::OkStatus();
  }
  // A piece that is not HOST:PORT, named within the whole address.
  auto host_port = [&](absl::string_view piece) -> absl::Status {
    if (piece.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, " '", Excerpt(address), "' names no HOST:PORT"));
    }
    absl::Status st = ValidateHostPortAddress(piece, field);
    if (st.ok()) return st;
    return absl::InvalidArgumentError(absl::StrCat(st.message(), " in '", Excerpt(address), "'"));
  };
  for (absl::string_view scheme : {"ipv4:", "ipv6:"}) {
    if (!absl::StartsWith(address, scheme)) continue;
    RETURN_IF_ERROR(ValidateAddress(address, field));
    // A comma-separated list of HOST:PORT (gRPC also takes "ipv4:///H:P").
    absl::string_view list = address.substr(scheme.size());
    while (absl::ConsumePrefix(&list, "/")) {
    }
    for (absl::string_view one : absl::StrSplit(list, ',')) RETURN_IF_ERROR(host_port(one));
    return absl::OkStatus();
  }
  if (absl::StartsWith(address, "dns:")) {
    RETURN_IF_ERROR(ValidateAddress(address, field));
    absl::string_view target = address.substr(4);
    if (absl::ConsumePrefix(&target, "//")) {  // dns://AUTHORITY/HOST:PORT
      const size_t slash = target.find('/');
      target = slash == absl::string_view::npos ? absl::string_view() : target.substr(slash + 1);
    } else {
      absl::ConsumePrefix(&target, "/");  // dns:/HOST:PORT
    }
    return host_port(target);
  }
  return ValidateHostPortAddress(address, field);
}

absl::Status ValidateHostPortAddress(absl::string_view address, absl::string_view field) {
  RETURN_IF_ERROR(ValidateAddress(address, field));
  auto bad = [&](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, " '", Excerpt(address), "' is not HOST:PORT (", why,
        "; HOST a name, an IPv4 address or a bracketed IPv6 address, PORT in [1, 65535])"));
  };
  absl::string_view target = address;
  absl::ConsumePrefix(&target, "dns:///");
  const size_t colon = target.rfind(':');
  if (colon == absl::string_view::npos) return bad("no port");
  const absl::string_view host = target.substr(0, colon);
  const absl::string_view port = target.substr(colon + 1);
  if (port.empty()) return bad("no port after the last ':'");
  int64_t value = 0;
  for (char c : port) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) {
      return bad("the port must be a number");
    }
    if (value <= 65535) value = value * 10 + (c - '0');
  }
  if (value < 1 || value > 65535) return bad("the port must be in [1, 65535]");
  if (host.empty()) return bad("no host");
  if (host.front() == '[') {
    if (host.size() < 3 || host.back() != ']') return bad("malformed bracketed IPv6 address");
    const absl::string_view inner = host.substr(1, host.size() - 2);
    const size_t percent = inner.find('%');
    const absl::string_view ip = inner.substr(0, percent);
    bool has_colon = false;
    for (char c : ip) {
      const unsigned char u = static_cast<unsigned char>(c);
      if (c == ':') {
        has_colon = true;
      } else if (!absl::ascii_isxdigit(u) && c != '.') {
        return bad("malformed IPv6 address");
      }
    }
    if (!has_colon) return bad("malformed IPv6 address");
    if (percent != absl::string_view::npos) {
      const absl::string_view zone = inner.substr(percent + 1);
      if (zone.empty()) return bad("empty IPv6 zone");
      for (char c : zone) {
        if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' &&
            c != '_') {
          return bad("malformed IPv6 zone");
        }
      }
    }
    return absl::OkStatus();
  }
  for (char c : host) {
    if (!absl::ascii_isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_') {
      return bad(c == ':' ? "more than one ':' outside brackets"
                          : "the host may hold only letters, digits, '.', '-' and '_'");
    }
  }
  return absl::OkStatus();
}

const char* CompressionOf(absl::string_view head) {
  if (absl::StartsWith(head, "\x1f\x8b")) return "gzip";
  if (absl::StartsWith(head, absl::string_view("\xFD" "7zXZ\x00", 6))) return "xz";
  if (head.size() >= 10 && absl::StartsWith(head, "BZh") && head[3] >= '1' && head[3] <= '9' &&
      (head.substr(4, 6) == absl::string_view("\x31\x41\x59\x26\x53\x59", 6) ||
       head.substr(4, 6) == absl::string_view("\x17\x72\x45\x38\x50\x90", 6))) {
    return "bzip2";
  }
  if (absl::StartsWith(head, "\x28\xB5\x2F\xFD")) return "zstd";
  if (absl::StartsWith(head, "\x04\x22\x4D\x18")) return "lz4";
  if (absl::StartsWith(head, "PK\x03\x04")) return "zip";
  return "";
}

void AppendShortest(std::string* out, double v) {
  char buf[32];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), v);
  if (ec == std::errc()) out->append(buf, end);
}

}  // namespace sojourn
