// Trace importers. Every reader loads the (decompressed) file into memory and
// parses it with std::from_chars: the 281 MB of the shared GWA tarball parse in
// a few seconds, most of it xz decompression.
#include "models/traces/traces.h"

#include <archive.h>
#include <archive_entry.h>
#include <lzma.h>
#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>
#include <system_error>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "common/status.h"
#include "common/text.h"

namespace sojourn::traces {
namespace {

namespace fs = std::filesystem;
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

absl::Status LineError(const std::string& file, size_t line, const std::string& reason) {
  return absl::InvalidArgumentError(absl::StrCat(file, ":", line, ": ", reason));
}

// ---------------------------------------------------------------- reading

absl::StatusOr<std::string> ReadPlain(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  // Read to the end rather than seek for the size: a pipe or FIFO
  // (--trace <(zcat ...)) has none, and tellg() = -1 resized the string to
  // 2^64 - 1 bytes (std::length_error, an abort).
  std::string data;
  std::vector<char> buf(1 << 16);
  while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    data.append(buf.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return data;
}

absl::StatusOr<std::string> ReadGzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  if (f == nullptr) return absl::NotFoundError(absl::StrCat(path, ": cannot open file"));
  gzbuffer(f, 1 << 17);
  std::string data;
  char buf[1 << 16];
  while (true) {
    int n = gzread(f, buf, sizeof(buf));
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      return absl::DataLossError(absl::StrCat(path, ": gzip error: ", msg));
    }
    if (n == 0) break;
    data.append(buf, static_cast<size_t>(n));
  }
  // gzread returns 0 both at the end of a whole stream and where a truncated
  // file stops (zlib then reports Z_BUF_ERROR): a cut download must not
  // import as a shorter trace.
  int err = Z_OK;
  const char* msg = gzerror(f, &err);
  std::string reason = msg != nullptr && *msg != '\0' ? msg : "corrupt or truncated data";
  // zlib prefixes the path; the caller's message already starts with it.
  if (absl::StartsWith(reason, path + ": ")) reason.erase(0, path.size() + 2);
  gzclose(f);
  if (err != Z_OK && err != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat(path, ": gzip error: ", reason,
                                            " (is the file truncated or corrupt?)"));
  }
  return data;
}

absl::StatusOr<std::string> DecodeXz(const std::string& path, const std::string& compressed) {
  lzma_stream strm = LZMA_STREAM_INIT;
  if (lzma_stream_decoder(&strm, UINT64_MAX, LZMA_CONCATENATED) != LZMA_OK) {
    return absl::InternalError(absl::StrCat(path, ": cannot initialise the xz decoder"));
  }
  std::string out;
  std::vector<uint8_t> buf(1 << 20);
  strm.next_in = reinterpret_cast<const uint8_t*>(compressed.data());
  strm.avail_in = compressed.size();
  lzma_ret ret = LZMA_OK;
  while (ret == LZMA_OK) {
    strm.next_out = buf.data();
    strm.avail_out = buf.size();
    ret = lzma_code(&strm, LZMA_FINISH);
    out.append(reinterpret_cast<const char*>(buf.data()), buf.size() - strm.avail_out);
  }
  lzma_end(&strm);
  if (ret != LZMA_STREAM_END) {
    // The causes by name, as the other decompressors give them.
    const char* why = ret == LZMA_BUF_ERROR    ? "truncated (the input ends inside the stream)"
                      : ret == LZMA_DATA_ERROR ? "corrupt data"
                      : ret == LZMA_FORMAT_ERROR ? "not in the xz format"
                      : ret == LZMA_MEM_ERROR  ? "out of memory"
                      : ret == LZMA_OPTIONS_ERROR ? "unsupported options"
                                                  : "decoder error";
    return absl::DataLossError(
        absl::StrCat(path, ": xz decoding failed: ", why, " (lzma code ", ret, ")"));
  }
  return out;
}

// `raw` decompressed by libarchive (raw format, every filter), for a
// compressed file whose name does not say so.
absl::StatusOr<std::string> DecodeAny(const std::string& path, const std::string& raw,
                                      absl::string_view kind) {
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_raw(a.get());
  archive_entry* entry = nullptr;
  auto failed = [&]() {
    const char* why = archive_error_string(a.get());
    return absl::DataLossError(absl::StrCat(path, ": truncated or corrupt ", kind, " data (",
                                            why != nullptr ? why : "read error", ")"));
  };
  if (archive_read_open_memory(a.get(), raw.data(), raw.size()) != ARCHIVE_OK ||
      archive_read_next_header(a.get(), &entry) != ARCHIVE_OK) {
    return failed();
  }
  std::string out;
  std::vector<char> buf(1 << 16);
  while (true) {
    la_ssize_t n = archive_read_data(a.get(), buf.data(), buf.size());
    if (n < 0) return failed();
    if (n == 0) break;
    out.append(buf.data(), static_cast<size_t>(n));
  }
  return out;
}

// Whole file, decompressed according to its name (.gz, .xz), else to its
// first bytes (gzip, xz, bzip2, zstd, lz4: a compressed trace with another
// name, or read through a pipe, used to fail on its first line).
absl::StatusOr<std::string> ReadWholeFile(const std::string& path) {
  if (absl::EndsWith(path, ".gz")) return ReadGzip(path);
  ASSIGN_OR_RETURN(std::string raw, ReadPlain(path));
  if (absl::EndsWith(path, ".xz")) return DecodeXz(path, raw);
  // A zip is left to the reader as it was: only stream compressions here.
  if (const absl::string_view kind = CompressionOf(raw); !kind.empty() && kind != "zip") {
    return DecodeAny(path, raw, kind);
  }
  return raw;
}

// Iterates over lines (without the trailing \r\n or \n); line numbers from 1.
class LineReader {
 public:
  // A UTF-8 byte-order mark (spreadsheet exports) is skipped.
  explicit LineReader(absl::string_view text) : text_(text) {
    if (absl::StartsWith(text_, "\xEF\xBB\xBF")) pos_ = 3;
  }
  bool Next(absl::string_view* line) {
    if (pos_ >= text_.size()) return false;
    size_t end = text_.find('\n', pos_);
    if (end == absl::string_view::npos) end = text_.size();
    absl::string_view l = text_.substr(pos_, end - pos_);
    if (!l.empty() && l.back() == '\r') l.remove_suffix(1);
    pos_ = end + 1;
    ++line_no_;
    *line = l;
    return true;
  }
  size_t line_no() const { return line_no_; }

 private:
  absl::string_view text_;
  size_t pos_ = 0;
  size_t line_no_ = 0;
};

absl::string_view Trim(absl::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

// A trimmed field without one pair of surrounding double quotes ("5" is 5,
// "CPU usage [%]" a header name): some spreadsheet exports quote every field.
absl::string_view Unquote(absl::string_view s) {
  s = Trim(s);
  if (s.size() >= 2 && s.front() == '"' && s.back() == '"') s = Trim(s.substr(1, s.size() - 2));
  return s;
}

// A header line holding a CR is a file with CR-only line ends (classic Mac
// OS): LineReader splits at LF only, so its rows would vanish into the header.
absl::Status CheckLineEnds(const std::string& file, absl::string_view first_line) {
  if (first_line.find('\r') == absl::string_view::npos) return absl::OkStatus();
  return LineError(file, 1, "line ends are CR only (classic Mac OS); convert them to LF or CRLF");
}

bool ParseDouble(absl::string_view s, double* v) {
  s = Trim(s);
  if (s.empty()) return false;
  if (s.front() == '+') s.remove_prefix(1);
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  return ec == std::errc() && p == s.data() + s.size() && std::isfinite(*v);
}

// Times beyond +-1e11 s (about the year 5100) are rejected: they are not
// sample times, and spans between them would overflow later arithmetic.
constexpr int64_t kMaxAbsTimestamp = 100'000'000'000;

// Integer Unix seconds within +-kMaxAbsTimestamp; a value written as a float
// with an integral value ("1372629804.0") is accepted too.
bool ParseTimestamp(absl::string_view s, int64_t* v) {
  s = Trim(s);
  if (s.empty()) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *v);
  if (ec == std::errc() && p == s.data() + s.size()) {
    return *v >= -kMaxAbsTimestamp && *v <= kMaxAbsTimestamp;
  }
  double d;
  if (!ParseDouble(s, &d) || d != std::floor(d) || std::fabs(d) > kMaxAbsTimestamp) return false;
  *v = static_cast<int64_t>(d);
  return true;
}

// Most logical CPUs a trace may give a host (the state manager's bound on
// HostAttributes.cpu_cores).
constexpr int kMaxCpuCores = 1'000'000;

// A CPU core count: an integer in [0, kMaxCpuCores] ("4" or "4.0").
bool ParseCpuCores(absl::string_view s, int* v) {
  double d;
  if (!ParseDouble(s, &d) || d != std::floor(d) || d < 0 || d > kMaxCpuCores) return false;
  *v = static_cast<int>(d);
  return true;
}

// Splits `line` at every occurrence of `sep` into `out` (reused).
void SplitInto(absl::string_view line, char sep, std::vector<absl::string_view>* out) {
  out->clear();
  size_t start = 0;
  while (true) {
    size_t p = line.find(sep, start);
    if (p == absl::string_view::npos) {
      out->push_back(line.substr(start));
      return;
    }
    out->push_back(line.substr(start, p - start));
    start = p + 1;
  }
}

// Splits one canonical CSV row at its commas, reading RFC 4180 quoted fields:
// a field that starts with '"' runs to the matching closing quote, "" inside
// it is one quote, and the quotes are not part of the value (so a host name
// may hold commas, as `sojourn-eval availability --cells` writes them). A
// quoted field's value points into `line` unless it held an escaped quote, in
// which case it lives in `scratch` (cleared here); `(*quoted)[i]` says whether
// field i was quoted (its value is then exact: not trimmed), and `quoted` is
// empty for a row without quotes. Returns false with
// `*error` set when a quote is left open (a row is one line) or stray text
// follows a closing quote.
bool SplitCsvRow(absl::string_view line, std::vector<absl::string_view>* out,
                 std::deque<std::string>* scratch, std::string* error, std::vector<bool>* quoted) {
  if (line.find('"') == absl::string_view::npos) {
    SplitInto(line, ',', out);
    quoted->clear();
    return true;
  }
  out->clear();
  scratch->clear();
  quoted->clear();
  size_t i = 0;
  while (true) {
    if (i < line.size() && line[i] == '"') {
      const size_t open = i++;
      bool escaped = false;
      while (true) {
        size_t q = line.find('"', i);
        if (q == absl::string_view::npos) {
          *error = absl::StrFormat("quote opened at column %d is not closed on this line", open + 1);
          return false;
        }
        if (q + 1 < line.size() && line[q + 1] == '"') {
          escaped = true;
          i = q + 2;
          continue;
        }
        absl::string_view inner = line.substr(open + 1, q - open - 1);
        if (escaped) {
          scratch->push_back(absl::StrReplaceAll(inner, {{"\"\"", "\""}}));
          out->push_back(scratch->back());
        } else {
          out->push_back(inner);
        }
        quoted->push_back(true);
        i = q + 1;
        break;
      }
      // Only blanks may stand between the closing quote and the next comma.
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      if (i == line.size()) return true;
      if (line[i] != ',') {
        *error = absl::StrFormat("unexpected '%c' after the closing quote at column %d", line[i], i);
        return false;
      }
      ++i;
      continue;
    }
    size_t p = line.find(',', i);
    quoted->push_back(false);
    if (p == absl::string_view::npos) {
      out->push_back(line.substr(i));
      return true;
    }
    out->push_back(line.substr(i, p - i));
    i = p + 1;
  }
}

// The nominal sampling period of a series: the median spacing of its samples
// (0 for fewer than two samples).
int64_t MedianSpacing(const std::vector<HostSample>& samples) {
  std::vector<int64_t> d;
  d.reserve(samples.size());
  for (size_t i = 1; i < samples.size(); ++i) {
    d.push_back(samples[i].unix_seconds - samples[i - 1].unix_seconds);
  }
  if (d.empty()) return 0;
  std::nth_element(d.begin(), d.begin() + static_cast<std::ptrdiff_t>(d.size() / 2), d.end());
  return d[d.size() / 2];
}

// ---------------------------------------------------------------- canonical

absl::StatusOr<std::vector<HostTrace>> ParseCanonical(const std::string& file,
                                                      absl::string_view text, int max_hosts) {
  LineReader reader(text);
  absl::string_view line;
  if (!reader.Next(&line)) return LineError(file, 1, "empty file: expected a header row");
  RETURN_IF_ERROR(CheckLineEnds(file, line));
  std::vector<absl::string_view> fields;
  std::deque<std::string> scratch;
  std::string split_error;
  std::vector<bool> quoted;
  if (!SplitCsvRow(line, &fields, &scratch, &split_error, &quoted)) {
    return LineError(file, 1, split_error);
  }
  int col_host = -1, col_ts = -1, col_load = -1, col_mem = -1, col_total = -1, col_cores = -1;
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string name = absl::AsciiStrToLower(std::string(Trim(fields[i])));
    int* col = nullptr;
    if (name == "host") col = &col_host;
    if (name == "timestamp") col = &col_ts;
    if (name == "cpu_load") col = &col_load;
    if (name == "free_mem_mb") col = &col_mem;
    // Optional extra column: the host's memory capacity (kept as HostTrace::total_mem_mb).
    if (name == "total_mem_mb") col = &col_total;
    // Optional extra column: the host's logical CPUs (kept as HostTrace::cpu_cores).
    if (name == "cpu_cores") col = &col_cores;
    if (col == nullptr) continue;
    // The last of two used to win silently (another export's column of the
    // same name).
    if (*col >= 0) {
      return LineError(file, 1, absl::StrCat("duplicate column '", name, "' (columns ", *col + 1,
                                             " and ", i + 1, ")"));
    }
    *col = static_cast<int>(i);
  }
  if (col_host < 0) {
    return LineError(file, 1,
                     "header has no 'host' column (expected host,timestamp,cpu_load,free_mem_mb)");
  }
  if (col_ts < 0) return LineError(file, 1, "header has no 'timestamp' column");
  if (col_load < 0) return LineError(file, 1, "header has no 'cpu_load' column");
  const size_t ncols = fields.size();

  std::vector<HostTrace> traces;
  std::unordered_map<std::string, size_t> index;
  while (reader.Next(&line)) {
    if (Trim(line).empty()) continue;
    const size_t ln = reader.line_no();
    if (!SplitCsvRow(line, &fields, &scratch, &split_error, &quoted)) {
      return LineError(file, ln, split_error);
    }
    if (fields.size() != ncols) {
      return LineError(file, ln,
                       absl::StrFormat("expected %d fields, found %d", ncols, fields.size()));
    }
    // A quoted name is taken as written (CanonicalCsvWriter quotes one that
    // starts or ends with a blank).
    const bool host_quoted = !quoted.empty() && quoted[col_host];
    std::string host(host_quoted ? fields[col_host] : Trim(fields[col_host]));
    if (host.empty()) return LineError(file, ln, "empty host");
    HostSample s;
    if (!ParseTimestamp(fields[col_ts], &s.unix_seconds)) {
      return LineError(file, ln,
                       absl::StrCat("timestamp '", Excerpt(fields[col_ts]),
                                    "' is not an integer number of Unix seconds within +-1e11"));
    }
    if (!ParseDouble(fields[col_load], &s.cpu_load) || s.cpu_load < 0) {
      return LineError(file, ln,
                       absl::StrCat("cpu_load '", Excerpt(fields[col_load]), "' is not a number >= 0"));
    }
    if (col_mem >= 0 && !Trim(fields[col_mem]).empty() &&
        !ParseDouble(fields[col_mem], &s.free_mem_mb)) {
      return LineError(file, ln,
                       absl::StrCat("free_mem_mb '", Excerpt(fields[col_mem]), "' is not a number"));
    }
    auto it = index.find(host);
    if (it == index.end()) {
      if (max_hosts > 0 && static_cast<int>(traces.size()) >= max_hosts) continue;
      it = index.emplace(host, traces.size()).first;
      traces.emplace_back();
      traces.back().host = host;
    }
    HostTrace& t = traces[it->second];
    double total = 0;
    if (col_total >= 0 && !Trim(fields[col_total]).empty()) {
      if (!ParseDouble(fields[col_total], &total) || total < 0) {
        return LineError(file, ln,
                         absl::StrCat("total_mem_mb '", Excerpt(fields[col_total]), "' is not a number >= 0"));
      }
      t.total_mem_mb = std::max(t.total_mem_mb, total);
    }
    if (col_cores >= 0 && !Trim(fields[col_cores]).empty()) {
      int cores = 0;
      if (!ParseCpuCores(fields[col_cores], &cores)) {
        return LineError(file, ln,
                         absl::StrCat("cpu_cores '", Excerpt(fields[col_cores]), "' is not an integer in [0, ",
                                      kMaxCpuCores, "]"));
      }
      t.cpu_cores = std::max(t.cpu_cores, cores);
    }
    if (!t.samples.empty() && s.unix_seconds < t.samples.back().unix_seconds) {
      return LineError(
          file, ln,
          absl::StrFormat("timestamp %d is earlier than the previous row of host %s (%d)",
                          s.unix_seconds, host, t.samples.back().unix_seconds));
    }
    t.samples.push_back(s);
  }
  for (HostTrace& t : traces) t.period_seconds = MedianSpacing(t.samples);
  return traces;
}

// ---------------------------------------------------------------- GWA

// How a GWA file writes its timestamps; the first row decides, and every row
// of the file must write them the same way.
enum class GwaTime {
  kUndecided,
  // Unix seconds: GWA-T-12 Bitbrains, despite its "Timestamp [ms]" label.
  kUnixSeconds,
  // Unix milliseconds, as that label says: a value beyond +-1e11 (after the
  // year 5138 as seconds, after 1973 as milliseconds).
  kUnixMillis,
  // The local wall clock, "DD.MM.YYYY HH:MM:SS" (GWA-T-13 Materna) or
  // "YYYY-MM-DD HH:MM:SS", read as if it were UTC: the trace's local time is
  // then UTC+0 (HostTrace::wall_clock_timestamps).
  kWallClock,
};

const char* GwaTimeName(GwaTime t) {
  switch (t) {
    case GwaTime::kUnixSeconds:
      return "Unix seconds";
    case GwaTime::kUnixMillis:
      return "Unix milliseconds";
    case GwaTime::kWallClock:
      return "date-times";
    case GwaTime::kUndecided:
      break;
  }
  return "undecided";
}

// Reads a wall-clock date-time "DD.MM.YYYY HH:MM:SS" or "YYYY-MM-DD HH:MM:SS"
// (seconds optional, 'T' allowed before the time) as Unix seconds of that
// clock reading in UTC. Fields out of range (31.02., 24:00) are refused, not
// carried into the next month or day as absl::CivilSecond would.
bool ParseWallClock(absl::string_view s, int64_t* v) {
  int f[6] = {0, 0, 0, 0, 0, 0};
  int digits[6] = {0, 0, 0, 0, 0, 0};
  int n = 0;
  size_t i = 0;
  char date_sep = 0;
  while (i < s.size() && n < 6) {
    size_t j = i;
    while (j < s.size() && s[j] >= '0' && s[j] <= '9') ++j;
    // Day, month and the time fields have 1 or 2 digits; the year has 4, and
    // is the first or the third field by the date separator (checked below).
    if (j == i || j - i > 4 || (j - i > 2 && n != 0 && n != 2)) return false;
    int x = 0;
    for (size_t k = i; k < j; ++k) x = x * 10 + (s[k] - '0');
    digits[n] = static_cast<int>(j - i);
    f[n++] = x;
    if (j == s.size()) {
      i = j;
      break;
    }
    if (n == 6) return false;  // something after the seconds
    const char c = s[j];
    if (n <= 2) {
      if (c != '.' && c != '-' && c != '/') return false;
      if (date_sep == 0) date_sep = c;
      if (c != date_sep) return false;
    } else if (n == 3) {
      if (c != ' ' && c != 'T') return false;
    } else if (c != ':') {
      return false;
    }
    i = j + 1;
    if (i == s.size()) return false;  // a trailing separator ("00:05:")
  }
  if (i != s.size() || n < 5) return false;
  int year, month, day;
  if (date_sep == '-' && digits[0] == 4 && digits[2] <= 2) {  // YYYY-MM-DD
    year = f[0], month = f[1], day = f[2];
  } else if (date_sep == '.' && digits[2] == 4 && digits[0] <= 2) {  // DD.MM.YYYY
    day = f[0], month = f[1], year = f[2];
  } else {
    return false;  // D/M/Y or M/D/Y cannot be told apart
  }
  const int hour = f[3], minute = f[4], second = n == 6 ? f[5] : 0;
  if (year < 1970 || year > 2200 || hour > 23 || minute > 59 || second > 59) return false;
  const absl::CivilSecond cs(year, month, day, hour, minute, second);
  if (cs.year() != year || cs.month() != month || cs.day() != day) return false;
  *v = absl::ToUnixSeconds(absl::FromCivil(cs, absl::UTCTimeZone()));
  return true;
}

// One GWA timestamp of a file whose rows have so far been `*kind`.
bool ParseGwaTime(absl::string_view s, GwaTime* kind, int64_t* v) {
  s = Unquote(s);
  if (*kind == GwaTime::kWallClock) return ParseWallClock(s, v);
  double d;
  if (*kind == GwaTime::kUndecided && !ParseDouble(s, &d)) {
    if (!ParseWallClock(s, v)) return false;
    *kind = GwaTime::kWallClock;
    return true;
  }
  if (*kind == GwaTime::kUndecided) {
    *kind = std::fabs(d) > kMaxAbsTimestamp ? GwaTime::kUnixMillis : GwaTime::kUnixSeconds;
  }
  if (*kind == GwaTime::kUnixSeconds) return ParseTimestamp(s, v);
  // Milliseconds: whole seconds are kept (samples are minutes apart).
  if (!ParseDouble(s, &d) || d != std::floor(d) || std::fabs(d) > 1000.0 * kMaxAbsTimestamp) {
    return false;
  }
  *v = static_cast<int64_t>(std::floor(d / 1000.0));
  return true;
}

// A GWA number: "1.05", or "1,05" with a decimal comma (GWA-T-13 Materna
// writes them so; fields are separated by ';', so a comma is never a field
// separator there).
bool ParseGwaNumber(absl::string_view s, double* v) {
  s = Unquote(s);
  const size_t comma = s.find(',');
  if (comma == absl::string_view::npos) return ParseDouble(s, v);
  if (s.find(',', comma + 1) != absl::string_view::npos || s.find('.') != absl::string_view::npos) {
    return false;
  }
  std::string dot(s);
  dot[comma] = '.';
  return ParseDouble(dot, v);
}

struct GwaFile {
  std::vector<HostSample> samples;
  double total_mem_mb = 0;
  int cpu_cores = 0;
  GwaTime time = GwaTime::kUndecided;
  // Rows of an hour a wall clock repeated (IsDaylightSavingEnd), dropped.
  int64_t repeated_rows_dropped = 0;
};

// Whether a wall clock (date-times read as UTC) going back from `previous`
// to `next` is the end of daylight saving time: back by at most an hour, at
// night (22:00..03:59) on a Saturday or a Sunday, where every zone that has
// it sets its clocks back (EU and Australia 03:00 -> 02:00 and the US
// 02:00 -> 01:00 on a Sunday; Brazil and Chile Sunday 00:00 -> Saturday
// 23:00). The hour then comes twice; its second pass cannot be placed on the
// local time line the trace is read on, and is dropped.
bool IsDaylightSavingEnd(int64_t previous, int64_t next) {
  if (next >= previous || previous - next > 3600) return false;
  const absl::CivilSecond at =
      absl::ToCivilSecond(absl::FromUnixSeconds(next), absl::UTCTimeZone());
  const absl::Weekday day = absl::GetWeekday(absl::CivilDay(at));
  return (at.hour() >= 22 || at.hour() < 4) &&
         (day == absl::Weekday::saturday || day == absl::Weekday::sunday);
}

// One GWA per-VM CSV: header line, fields separated by ";\t" (a bare ';' is
// accepted too). Timestamps as GwaTime says; numbers may have a decimal comma.
absl::StatusOr<GwaFile> ParseGwaCsv(const std::string& file, absl::string_view text) {
  LineReader reader(text);
  absl::string_view line;
  if (!reader.Next(&line)) return LineError(file, 1, "empty file: expected a header row");
  RETURN_IF_ERROR(CheckLineEnds(file, line));
  std::vector<absl::string_view> fields;
  SplitInto(line, ';', &fields);
  int col_ts = -1, col_cpu_pct = -1, col_mem_cap = -1, col_mem_use = -1, col_mem_pct = -1,
      col_cores = -1;
  for (size_t i = 0; i < fields.size(); ++i) {
    std::string name = absl::AsciiStrToLower(std::string(Unquote(fields[i])));
    if (absl::StartsWith(name, "timestamp")) col_ts = static_cast<int>(i);
    if (absl::StartsWith(name, "cpu usage [%]")) col_cpu_pct = static_cast<int>(i);
    if (absl::StartsWith(name, "memory capacity provisioned")) col_mem_cap = static_cast<int>(i);
    // "Memory usage [KB]" is an amount; "Memory usage [%]" (GWA-T-13 Materna
    // has both) a share of the capacity, used only when there is no amount.
    if (absl::StartsWith(name, "memory usage")) {
      (absl::StrContains(name, "%") ? col_mem_pct : col_mem_use) = static_cast<int>(i);
    }
    if (name == "cpu cores") col_cores = static_cast<int>(i);
  }
  if (col_ts < 0) return LineError(file, 1, "header has no 'Timestamp' column");
  if (col_cpu_pct < 0) return LineError(file, 1, "header has no 'CPU usage [%]' column");
  if (col_mem_use >= 0) col_mem_pct = -1;
  const int col_mem_amount = col_mem_use >= 0 ? col_mem_use : col_mem_pct;
  const int max_col = std::max({col_ts, col_cpu_pct, col_mem_cap, col_mem_amount, col_cores});
  GwaFile out;
  out.samples.reserve(text.size() / 150);
  absl::string_view previous_ts;  // the previous row's timestamp as written
  bool repeating = false;         // in the second pass of a repeated hour
  while (reader.Next(&line)) {
    if (Trim(line).empty()) continue;
    const size_t ln = reader.line_no();
    SplitInto(line, ';', &fields);
    if (static_cast<int>(fields.size()) <= max_col) {
      return LineError(
          file, ln,
          absl::StrFormat("expected at least %d fields, found %d", max_col + 1, fields.size()));
    }
    HostSample s;
    if (const GwaTime before = out.time;
        !ParseGwaTime(fields[col_ts], &out.time, &s.unix_seconds)) {
      // What the value would be on a file's first row says whether it is
      // written another way than the rows before it, or not a time at all.
      GwaTime alone = GwaTime::kUndecided;
      int64_t unused;
      const bool other_kind = before != GwaTime::kUndecided &&
                              ParseGwaTime(fields[col_ts], &alone, &unused) && alone != before;
      const std::string what =
          other_kind ? absl::StrCat("is written as ", GwaTimeName(alone),
                                    " but the file's earlier rows as ", GwaTimeName(before))
          : before == GwaTime::kWallClock
              ? "is not a date-time DD.MM.YYYY HH:MM[:SS] or YYYY-MM-DD HH:MM[:SS] of 1970..2200"
              : "is not an integer number of Unix seconds (or milliseconds) within +-1e11 s, "
                "nor a date-time DD.MM.YYYY HH:MM[:SS] or YYYY-MM-DD HH:MM[:SS] of 1970..2200";
      return LineError(file, ln,
                       absl::StrCat("timestamp '", Excerpt(Trim(fields[col_ts])), "' ", what));
    }
    double pct;
    if (!ParseGwaNumber(fields[col_cpu_pct], &pct) || pct < 0) {
      return LineError(file, ln,
                       absl::StrCat("CPU usage [%] '", Excerpt(Trim(fields[col_cpu_pct])),
                                    "' is not a number >= 0"));
    }
    s.cpu_load = pct / 100.0;
    if (col_cores >= 0 && !Trim(fields[col_cores]).empty()) {
      int cores = 0;
      double d;
      if (!ParseGwaNumber(fields[col_cores], &d) || d != std::floor(d) || d < 0 ||
          d > kMaxCpuCores) {
        return LineError(file, ln,
                         absl::StrCat("CPU cores '", Excerpt(Trim(fields[col_cores])),
                                      "' is not an integer in [0, ", kMaxCpuCores, "]"));
      }
      cores = static_cast<int>(d);
      out.cpu_cores = std::max(out.cpu_cores, cores);
    }
    if (col_mem_cap >= 0 && col_mem_amount >= 0) {
      double cap, use;
      // Usage above the capacity is real (the shared Bitbrains trace has such
      // rows: memory pressure, free memory < 0); negative amounts are not.
      if (!ParseGwaNumber(fields[col_mem_cap], &cap) || cap < 0) {
        return LineError(file, ln,
                         absl::StrCat("memory capacity '", Excerpt(Trim(fields[col_mem_cap])),
                                      "' is not a number >= 0"));
      }
      if (!ParseGwaNumber(fields[col_mem_amount], &use) || use < 0) {
        return LineError(file, ln,
                         absl::StrCat("memory usage '", Excerpt(Trim(fields[col_mem_amount])),
                                      "' is not a number >= 0"));
      }
      if (col_mem_pct >= 0) use = cap * use / 100.0;
      s.free_mem_mb = (cap - use) / 1024.0;
      if (!std::isfinite(s.free_mem_mb)) {  // 1e308 KB x 4 %
        return LineError(file, ln, "memory capacity and usage give no finite free memory");
      }
      out.total_mem_mb = std::max(out.total_mem_mb, cap / 1024.0);
    }
    // The second pass of an hour a wall clock repeated: dropped until the
    // clock passes the last row kept.
    if (repeating && s.unix_seconds <= out.samples.back().unix_seconds) {
      ++out.repeated_rows_dropped;
      continue;
    }
    repeating = false;
    if (!out.samples.empty() && s.unix_seconds < out.samples.back().unix_seconds) {
      if (out.time == GwaTime::kWallClock) {
        // A local clock runs backwards once a year where daylight saving ends.
        if (IsDaylightSavingEnd(out.samples.back().unix_seconds, s.unix_seconds)) {
          repeating = true;
          ++out.repeated_rows_dropped;
          continue;
        }
        return LineError(
            file, ln,
            absl::StrCat("timestamp '", Excerpt(Trim(fields[col_ts])),
                         "' is earlier than the previous row's, and not as a clock set back at the "
                         "end of daylight saving time (at most an hour, at night on a weekend): "
                         "rows out of order? (or write the times as Unix seconds)"));
      }
      return LineError(file, ln,
                       absl::StrCat("timestamp '", Excerpt(Trim(fields[col_ts])),
                                    "' is earlier than the previous row's ('",
                                    Excerpt(previous_ts), "')"));
    }
    previous_ts = Trim(fields[col_ts]);
    out.samples.push_back(s);
  }
  return out;
}

// Collects the per-month files of each VM (same file name = same VM) and
// concatenates them in time order.
class GwaCollector {
 public:
  absl::Status Add(const std::string& file, const std::string& vm, absl::string_view text) {
    ASSIGN_OR_RETURN(GwaFile f, ParseGwaCsv(file, text));
    if (f.time != GwaTime::kUndecided) {
      // Date-times are a local clock, Unix times are not: one trace cannot
      // mix them, or its hosts' days would start at different instants.
      const bool wall = f.time == GwaTime::kWallClock;
      if (first_timed_file_.empty()) {
        first_timed_file_ = file;
        wall_clock_ = wall;
      } else if (wall != wall_clock_) {
        return absl::InvalidArgumentError(absl::StrCat(
            file, ":2: timestamps are ", wall ? "date-times" : "Unix times", " but ",
            first_timed_file_, " writes ", wall_clock_ ? "date-times" : "Unix times",
            " (local wall clock and Unix time cannot be mixed in one trace)"));
      }
    }
    auto it = index_.find(vm);
    if (it == index_.end()) {
      it = index_.emplace(vm, parts_.size()).first;
      parts_.push_back({vm, {}});
    }
    if (!f.samples.empty()) parts_[it->second].second.push_back({file, std::move(f)});
    return absl::OkStatus();
  }

  // `source`: the trace (directory, archive or file), for the error of a
  // trace none of whose files has a data row.
  absl::StatusOr<std::vector<HostTrace>> Finish(const std::string& source, int max_hosts) {
    if (first_timed_file_.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": no data rows, only headers (or line ends that are CR only)"));
    }
    std::vector<HostTrace> out;
    for (auto& [vm, files] : parts_) {
      if (max_hosts > 0 && static_cast<int>(out.size()) >= max_hosts) break;
      std::sort(files.begin(), files.end(), [](const auto& a, const auto& b) {
        return a.second.samples.front().unix_seconds < b.second.samples.front().unix_seconds;
      });
      HostTrace t;
      t.host = vm;
      t.wall_clock_timestamps = wall_clock_;
      for (size_t i = 0; i < files.size(); ++i) {
        const GwaFile& f = files[i].second;
        if (!t.samples.empty() && f.samples.front().unix_seconds < t.samples.back().unix_seconds) {
          return absl::InvalidArgumentError(absl::StrCat(
              files[i].first, ":2: VM ", vm, " overlaps in time with ", files[i - 1].first));
        }
        t.samples.insert(t.samples.end(), f.samples.begin(), f.samples.end());
        t.repeated_rows_dropped += f.repeated_rows_dropped;
        t.total_mem_mb = std::max(t.total_mem_mb, f.total_mem_mb);
        t.cpu_cores = std::max(t.cpu_cores, f.cpu_cores);
      }
      t.period_seconds = MedianSpacing(t.samples);
      out.push_back(std::move(t));
    }
    return out;
  }

 private:
  std::unordered_map<std::string, size_t> index_;
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, GwaFile>>>> parts_;
  std::string first_timed_file_;  // the first file with a row
  bool wall_clock_ = false;       // its timestamps are date-times
};

// A file name without its compression suffix (.gz, .xz): "vm7.csv.gz" is the
// CSV "vm7.csv".
std::string WithoutCompression(const std::string& name) {
  for (const char* ext : {".gz", ".xz"}) {
    if (absl::EndsWithIgnoreCase(name, ext)) return name.substr(0, name.size() - 3);
  }
  return name;
}

// The VM of a per-VM CSV: its file name without ".csv" (and compression).
std::string VmIdOf(const std::string& path) {
  return fs::path(WithoutCompression(fs::path(path).filename().string())).stem().string();
}

// A per-VM CSV: a name ending in .csv (any case; in a directory also .csv.gz
// or .csv.xz, which ReadWholeFile decompresses) that is not hidden (".x.csv",
// and the "._x.csv" AppleDouble files macOS puts into tarballs, are not VMs).
bool IsGwaCsvName(const std::string& path, bool compressed_ok) {
  const std::string base = fs::path(path).filename().string();
  const std::string plain = compressed_ok ? WithoutCompression(base) : base;
  return absl::EndsWithIgnoreCase(plain, ".csv") && !absl::StartsWith(base, ".");
}

absl::StatusOr<std::vector<HostTrace>> ImportGwaDirectory(const std::string& dir, int max_hosts) {
  std::vector<std::string> files;
  std::error_code ec;
  // Linked folders are followed (a month folder may be a symlink: it was
  // skipped, and its VMs lost their month silently), a folder reached twice
  // (a link cycle, or two links to one folder) only once.
  std::set<fs::path> seen_dirs;
  std::error_code canonical_ec;
  seen_dirs.insert(fs::weakly_canonical(dir, canonical_ec));
  for (auto it = fs::recursive_directory_iterator(
           dir, fs::directory_options::follow_directory_symlink, ec);
       !ec && it != fs::end(it); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_directory(type_ec)) {
      if (!seen_dirs.insert(fs::weakly_canonical(it->path(), type_ec)).second) {
        it.disable_recursion_pending();
      }
      continue;
    }
    if (it->is_regular_file(type_ec) && IsGwaCsvName(it->path().string(), true)) {
      files.push_back(it->path().string());
    }
  }
  if (ec) return absl::NotFoundError(absl::StrCat(dir, ": cannot list directory: ", ec.message()));
  if (files.empty()) return absl::InvalidArgumentError(absl::StrCat(dir, ": no .csv files"));
  std::sort(files.begin(), files.end());
  GwaCollector collector;
  for (const std::string& f : files) {
    ASSIGN_OR_RETURN(std::string text, ReadWholeFile(f));
    RETURN_IF_ERROR(collector.Add(f, VmIdOf(f), text));
  }
  return collector.Finish(dir, max_hosts);
}

absl::StatusOr<std::vector<HostTrace>> ImportGwaArchive(const std::string& path, int max_hosts) {
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  // Tar (ustar, pax, GNU) and zip (the GWA's own downloads are zip files)
  // only: with every format, libarchive read a text file named .tar.xz as an
  // (mtree) archive without entries, and the run said "archive holds no .csv
  // files" rather than that it is no archive.
  archive_read_support_format_tar(a.get());
  archive_read_support_format_zip(a.get());
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 20) != ARCHIVE_OK) {
    const char* why = archive_error_string(a.get());
    if (std::ifstream(path, std::ios::binary).is_open()) {
      // Readable, so libarchive refused the data: neither a tar archive nor
      // a compressed one (libarchive's own errno for that is not public).
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": not a tar (plain, gzip or xz compressed) or zip archive: ",
                       why != nullptr ? why : "unrecognized data"));
    }
    return absl::NotFoundError(
        absl::StrCat(path, ": cannot open archive: ", why != nullptr ? why : "open failed"));
  }
  GwaCollector collector;
  archive_entry* entry;
  std::string text;
  int n = 0;
  int headers = 0;
  while (true) {
    int r = archive_read_next_header(a.get(), &entry);
    if (r == ARCHIVE_EOF) break;
    if (r != ARCHIVE_OK && r != ARCHIVE_WARN) {
      const char* why = archive_error_string(a.get());
      if (headers == 0) {
        // Nothing recognised: not a (compressed) tarball at all.
        return absl::InvalidArgumentError(
            absl::StrCat(path, ": not a tar (plain, gzip or xz compressed) or zip archive: ",
                         why != nullptr ? why : "unrecognized data"));
      }
      return absl::DataLossError(absl::StrCat(path, ": ", why != nullptr ? why : "read error"));
    }
    ++headers;
    std::string name = archive_entry_pathname(entry);
    if (const char* target = archive_entry_hardlink(entry);
        target != nullptr && IsGwaCsvName(name, false)) {
      // The data is stored once, under the first name: reading only regular
      // entries dropped this VM silently.
      return absl::InvalidArgumentError(absl::StrCat(
          path, "/", name, ": a hard link to ", target,
          " in the archive; unpack it and pass the directory, or archive copies"));
    }
    if (archive_entry_filetype(entry) != AE_IFREG) continue;
    if (!IsGwaCsvName(name, false)) continue;
    int64_t size = archive_entry_size(entry);
    text.clear();
    if (size > 0) text.reserve(static_cast<size_t>(size));
    char buf[1 << 16];
    while (true) {
      la_ssize_t got = archive_read_data(a.get(), buf, sizeof(buf));
      if (got < 0) {
        return absl::DataLossError(
            absl::StrCat(path, "/", name, ": ", archive_error_string(a.get())));
      }
      if (got == 0) break;
      text.append(buf, static_cast<size_t>(got));
    }
    RETURN_IF_ERROR(collector.Add(absl::StrCat(path, "/", name), VmIdOf(name), text));
    ++n;
  }
  if (n == 0)
    return absl::InvalidArgumentError(absl::StrCat(path, ": archive holds no .csv files"));
  return collector.Finish(path, max_hosts);
}

// ---------------------------------------------------------------- matrix

absl::StatusOr<std::vector<HostTrace>> ParseAvailabilityMatrix(const std::string& file,
                                                               absl::string_view text,
                                                               const ImportOptions& opt) {
  if (opt.period_seconds <= 0) {
    return absl::InvalidArgumentError("availability matrix: period must be positive");
  }
  LineReader reader(text);
  absl::string_view line;
  std::vector<HostTrace> out;
  size_t width = 0;
  while (reader.Next(&line)) {
    const size_t ln = reader.line_no();
    if (Trim(line).empty()) continue;
    if (opt.max_hosts > 0 && static_cast<int>(out.size()) >= opt.max_hosts) break;
    HostTrace t;
    t.host = absl::StrCat("row", ln - 1);
    t.period_seconds = opt.period_seconds;
    size_t col = 0;
    size_t i = 0;
    while (i < line.size()) {
      char c = line[i];
      if (c == ' ' || c == '\t' || c == ',' || c == ';') {
        ++i;
        continue;
      }
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != ',' &&
             line[j] != ';') {
        ++j;
      }
      absl::string_view tok = line.substr(i, j - i);
      if (tok != "0" && tok != "1") {
        return LineError(file, ln, absl::StrCat("column ", col + 1, ": '", Excerpt(tok), "' is not 0 or 1"));
      }
      if (tok == "1") {
        HostSample s;
        s.unix_seconds = opt.start_unix_seconds + static_cast<int64_t>(col) * opt.period_seconds;
        s.cpu_load = 0.0;
        s.free_mem_mb = kNaN;
        t.samples.push_back(s);
      }
      ++col;
      i = j;
    }
    if (width == 0) width = col;
    if (col != width) {
      return LineError(file, ln,
                       absl::StrFormat("%d values, but the first row has %d", col, width));
    }
    out.push_back(std::move(t));
  }
  if (out.empty()) return LineError(file, 1, "availability matrix has no rows");
  return out;
}

bool LooksLikeMatrixLine(absl::string_view line) {
  bool any = false;
  for (char c : line) {
    if (c == '0' || c == '1') {
      any = true;
    } else if (c != ' ' && c != '\t' && c != ',' && c != ';' && c != '\r') {
      return false;
    }
  }
  return any;
}

// By the file name's ending only: "my.targets/c.csv" is no archive.
bool IsArchiveName(const std::string& path) {
  const std::string base = fs::path(path).filename().string();
  for (const char* ext : {".tar", ".tar.gz", ".tar.xz", ".tar.bz2", ".tar.zst", ".tar.lz",
                          ".tar.lzma", ".tgz", ".txz", ".tbz2", ".zip"}) {
    if (absl::EndsWithIgnoreCase(base, ext)) return true;
  }
  return false;
}

}  // namespace

absl::Status CheckGridSize(const std::vector<HostTrace>& traces, int64_t step_seconds,
                           const GridLimits& limits, const std::string& advice) {
  if (step_seconds <= 0) return absl::InvalidArgumentError("the grid step must be positive");
  const double step = static_cast<double>(step_seconds);
  double first = 0, last = 0, total = 0;
  bool any = false;
  for (const HostTrace& t : traces) {
    if (t.samples.empty()) continue;
    const double a = static_cast<double>(t.samples.front().unix_seconds);
    const double b = static_cast<double>(t.samples.back().unix_seconds);
    const double points = (b - a) / step + 1;
    if (b - a > limits.span_seconds) {
      // No grid step helps here: do not advise a larger one.
      return absl::InvalidArgumentError(absl::StrFormat(
          "host %s spans %.4g s (%.0f to %.0f), above the limit of %.4g s (%.3g years) at any "
          "grid step; cut the trace",
          t.host, b - a, a, b, limits.span_seconds, limits.span_seconds / 31536000));
    }
    if (points > limits.host_points) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "host %s spans %.4g s (%.0f to %.0f): %.0f grid points of %d s, above the limit of "
          "%.0f per host; %s",
          t.host, b - a, a, b, points, step_seconds, limits.host_points, advice));
    }
    total += points;
    first = any ? std::min(first, a) : a;
    last = any ? std::max(last, b) : b;
    any = true;
  }
  if (!any) return absl::OkStatus();
  const double span_points = (last - first) / step + 1;
  if (last - first > limits.span_seconds) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the trace spans %.4g s (%.0f to %.0f, first to last sample over all hosts), above the "
        "limit of %.4g s (%.3g years) at any grid step; cut the trace",
        last - first, first, last, limits.span_seconds, limits.span_seconds / 31536000));
  }
  if (span_points > limits.span_points) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the trace spans %.4g s (%.0f to %.0f): %.0f grid points of %d s, above the limit of "
        "%.0f; %s",
        last - first, first, last, span_points, step_seconds, limits.span_points, advice));
  }
  if (total > limits.total_points) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the %d hosts' grids hold %.0f points of %d s in all, above the limit of %.0f; %s",
        traces.size(), total, step_seconds, limits.total_points, advice));
  }
  return absl::OkStatus();
}

SampledGridDefaults DefaultSampledGrid(const std::vector<HostTrace>& traces) {
  std::vector<int64_t> periods;
  for (const HostTrace& t : traces) {
    if (t.samples.size() >= 2 && t.period_seconds > 0) periods.push_back(t.period_seconds);
  }
  SampledGridDefaults out;
  if (periods.empty()) return out;
  std::nth_element(periods.begin(), periods.begin() + static_cast<std::ptrdiff_t>(periods.size() / 2),
                   periods.end());
  out.period_seconds = periods[periods.size() / 2];
  if (out.period_seconds > 300) {
    for (int64_t d = std::min<int64_t>(out.period_seconds, 3600); d >= 300; --d) {
      if (3600 % d == 0) {
        out.step_seconds = d;
        break;
      }
    }
  }
  out.revocation_gap_seconds = std::max<int64_t>(900, 3 * out.period_seconds);
  return out;
}

absl::StatusOr<TraceFormat> ParseTraceFormat(const std::string& name) {
  if (name == "auto") return TraceFormat::kAuto;
  if (name == "canonical") return TraceFormat::kCanonical;
  if (name == "gwa") return TraceFormat::kGwa;
  if (name == "availability-matrix") return TraceFormat::kAvailabilityMatrix;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown trace format '", name, "' (expected canonical, gwa, availability-matrix or auto)"));
}

absl::StatusOr<std::vector<HostTrace>> ImportTrace(const std::string& path,
                                                   const ImportOptions& options) {
  return ImportTrace(path, options, nullptr);
}

absl::StatusOr<std::vector<HostTrace>> ImportTrace(const std::string& path,
                                                   const ImportOptions& options,
                                                   TraceFormat* format_used) {
  TraceFormat unused;
  if (format_used == nullptr) format_used = &unused;
  std::error_code ec;
  const bool is_dir = fs::is_directory(path, ec);
  if (!is_dir && !fs::exists(path, ec)) {
    return absl::NotFoundError(absl::StrCat(path, ": no such file or directory"));
  }
  TraceFormat format = options.format;
  if (is_dir) {
    if (format != TraceFormat::kAuto && format != TraceFormat::kGwa) {
      return absl::InvalidArgumentError(
          absl::StrCat(path, ": a directory can only be read as a GWA trace"));
    }
    *format_used = TraceFormat::kGwa;
    return ImportGwaDirectory(path, options.max_hosts);
  }
  if (IsArchiveName(path) && (format == TraceFormat::kAuto || format == TraceFormat::kGwa)) {
    *format_used = TraceFormat::kGwa;
    return ImportGwaArchive(path, options.max_hosts);
  }
  ASSIGN_OR_RETURN(std::string text, ReadWholeFile(path));
  if (format == TraceFormat::kAuto) {
    LineReader reader(text);
    absl::string_view first;
    if (!reader.Next(&first)) return LineError(path, 1, "empty file");
    std::string lower = absl::AsciiStrToLower(std::string(first));
    // GWA separates its fields with ';', canonical CSV with ',' (a GWA header
    // may name a host column too).
    if (absl::StrContains(lower, "timestamp") && absl::StrContains(lower, ";")) {
      format = TraceFormat::kGwa;
    } else if (absl::StrContains(lower, "host") && absl::StrContains(lower, "timestamp")) {
      format = TraceFormat::kCanonical;
    } else if (LooksLikeMatrixLine(first)) {
      format = TraceFormat::kAvailabilityMatrix;
    } else {
      return LineError(path, 1, "cannot tell the trace format from the first line (use --format)");
    }
  }
  *format_used = format;
  switch (format) {
    case TraceFormat::kCanonical:
      return ParseCanonical(path, text, options.max_hosts);
    case TraceFormat::kAvailabilityMatrix:
      return ParseAvailabilityMatrix(path, text, options);
    case TraceFormat::kGwa: {
      GwaCollector collector;
      RETURN_IF_ERROR(collector.Add(path, VmIdOf(path), text));
      return collector.Finish(path, options.max_hosts);
    }
    case TraceFormat::kAuto:
      break;
  }
  return absl::InternalError("unreachable trace format");
}

namespace {

// Rows handed to the OutputFile at a time.
constexpr size_t kFlushBytes = 1 << 20;

}  // namespace

absl::StatusOr<std::unique_ptr<CanonicalCsvWriter>> CanonicalCsvWriter::Open(
    const std::string& path) {
  std::unique_ptr<CanonicalCsvWriter> w(new CanonicalCsvWriter());
  ASSIGN_OR_RETURN(w->out_, OutputFile::Open(path));
  w->buffer_ = "host,timestamp,cpu_load,free_mem_mb,total_mem_mb,cpu_cores\n";
  return w;
}

CanonicalCsvWriter::~CanonicalCsvWriter() = default;

absl::Status CanonicalCsvWriter::Write(const std::string& host,
                                       const std::vector<HostSample>& samples, double total_mem_mb,
                                       int cpu_cores) {
  if (out_->finished()) return absl::FailedPreconditionError("the trace is already finished");
  RETURN_IF_ERROR(out_->status());  // an earlier write failed
  // A row is one line, so a host name may not hold a line break; one with a
  // comma or a quote, or starting or ending with a blank (which an unquoted
  // field loses), is written as an RFC 4180 quoted field, which ParseCanonical
  // reads as written.
  if (host.find_first_of("\n\r") != std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat("host name '", Excerpt(host), "' contains a line break"));
  }
  // The whole batch is checked before any of it is written: a refused batch
  // leaves the trace as it was.
  auto last_it = last_unix_.find(host);
  int64_t last =
      last_it == last_unix_.end() ? std::numeric_limits<int64_t>::min() : last_it->second;
  for (const HostSample& s : samples) {
    if (s.unix_seconds < last) {
      return absl::InvalidArgumentError(
          absl::StrCat("host '", Excerpt(host), "': timestamp ", s.unix_seconds,
                       " is earlier than the host's previous row (", last, ")"));
    }
    last = s.unix_seconds;
  }
  auto blank = [](char c) { return c == ' ' || c == '\t'; };
  const bool quote = host.find_first_of(",\"") != std::string::npos ||
                     (!host.empty() && (blank(host.front()) || blank(host.back())));
  const std::string field =
      quote ? absl::StrCat("\"", absl::StrReplaceAll(host, {{"\"", "\"\""}}), "\"") : host;
  std::string tail = ",";
  if (total_mem_mb > 0) AppendShortest(&tail, total_mem_mb);
  tail.push_back(',');
  if (cpu_cores > 0) absl::StrAppend(&tail, cpu_cores);
  tail.push_back('\n');
  for (const HostSample& s : samples) {
    absl::StrAppend(&buffer_, field, ",", s.unix_seconds, ",");
    AppendShortest(&buffer_, s.cpu_load);
    buffer_.push_back(',');
    if (s.has_free_mem()) AppendShortest(&buffer_, s.free_mem_mb);
    buffer_ += tail;
    if (buffer_.size() >= kFlushBytes) {
      absl::Status written = out_->Write(buffer_);
      buffer_.clear();
      RETURN_IF_ERROR(written);
    }
  }
  rows_ += static_cast<int64_t>(samples.size());
  if (!samples.empty()) last_unix_[host] = last;
  return absl::OkStatus();
}

absl::Status CanonicalCsvWriter::Finish() {
  if (out_->finished()) return absl::FailedPreconditionError("the trace is already finished");
  absl::Status written = out_->Write(buffer_);
  buffer_.clear();  // given to the file (which refuses everything after a failure)
  RETURN_IF_ERROR(written);
  return out_->Finish();
}

absl::Status WriteCanonicalCsv(const std::vector<HostTrace>& traces, const std::string& path) {
  ASSIGN_OR_RETURN(std::unique_ptr<CanonicalCsvWriter> w, CanonicalCsvWriter::Open(path));
  for (const HostTrace& t : traces) {
    RETURN_IF_ERROR(w->Write(t.host, t.samples, t.total_mem_mb, t.cpu_cores));
  }
  return w->Finish();
}

}  // namespace sojourn::traces
