#include "common/text.h"

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace sojourn {

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
  return absl::OkStatus();
}

}  // namespace sojourn
