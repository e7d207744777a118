#include "models/turnaround/swf.h"

#include <archive.h>
#include <archive_entry.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"
#include "common/status.h"
#include "common/text.h"

namespace sojourn::turnaround {
namespace {

// Digits, sign, point and exponent only: SimpleAtod also reads hexadecimal
// ("0x10" as 16), which no SWF writer emits and a log should not mean.
bool IsDecimal(absl::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return (c >= '0' && c <= '9') || c == '+' || c == '-' || c == '.' || c == 'e' || c == 'E';
  });
}

// Fields (0-based) that may hold a fractional value: submit, wait and run
// time, average CPU time, used memory, requested time, requested memory and
// think time.
constexpr bool kFractionalField[18] = {false, true,  true,  true,  false, true,
                                       true,  false, true,  true,  false, false,
                                       false, false, false, false, false, true};

class LineParser {
 public:
  LineParser(std::string name, const SwfReadOptions& options) : name_(std::move(name)), options_(options) {}

  // Returns false when reading should stop (max_jobs reached).
  absl::Status Feed(absl::string_view line, bool* stop) {
    ++line_no_;
    *stop = false;
    // A UTF-8 byte-order mark (an editor's or a spreadsheet's export), as the
    // trace importers skip it.
    if (line_no_ == 1) absl::ConsumePrefix(&line, "\xEF\xBB\xBF");
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty()) return absl::OkStatus();
    // A NUL would otherwise cut the line short in C string handling, or
    // make a binary file look like a log with odd fields.
    if (trimmed.find('\0') != absl::string_view::npos) {
      return Malformed("the line contains a NUL byte (binary data?)");
    }
    if (trimmed.front() == ';') {
      std::string reason;
      if (!ParseHeader(trimmed.substr(1), &reason)) return Malformed(reason);
      return absl::OkStatus();
    }
    std::string reason;
    SwfJob job;
    job.line = line_no_;
    if (!ParseJob(trimmed, &job, &reason)) return Malformed(reason);
    if (!FitsMachine(job, &reason)) {
      if (log_.oversized_jobs++ == 0) log_.warnings.push_back({line_no_, reason});
    }
    log_.jobs.push_back(job);
    if (options_.max_jobs > 0 && static_cast<int64_t>(log_.jobs.size()) >= options_.max_jobs) {
      *stop = true;
    }
    return absl::OkStatus();
  }

  SwfLog Take() { return std::move(log_); }
  int64_t line_no() const { return line_no_; }

 private:
  absl::Status Malformed(const std::string& reason) {
    if (options_.on_malformed == SwfReadOptions::OnMalformed::kReject) {
      return absl::InvalidArgumentError(absl::StrCat(name_, ":", line_no_, ": ", reason));
    }
    log_.skipped.push_back({line_no_, reason});
    return absl::OkStatus();
  }

  // A job that needs more processors than the header's machine has
  // (MaxProcs, else MaxNodes): replay squeezes it onto the machine and its
  // estimates are poor (a log of 110-processor jobs on "MaxNodes: 2" gave
  // 1540 % error). The SWF definition has no overuse of processors
  // (AllowOveruse is about runtime and memory), so such a line is
  // inconsistent; the job is kept (a real log with a few is still scored) and
  // counted in SwfLog::oversized_jobs, the first one in SwfLog::warnings.
  bool FitsMachine(const SwfJob& job, std::string* reason) const {
    const int64_t machine = std::max(log_.header.max_nodes, log_.header.max_procs);
    if (machine <= 0 || job.procs() <= machine) return true;
    const bool allocated = job.allocated_procs > 0;
    const bool procs = log_.header.max_procs >= log_.header.max_nodes;
    *reason = absl::StrCat("field ", allocated ? 5 : 8, " is ", job.procs(),
                           " processors, more than ", procs ? "MaxProcs " : "MaxNodes ", machine,
                           " of the header (the machine's size)");
    return false;
  }

  // False (with `reason`) for a node count the simulators cannot allocate.
  bool ParseHeader(absl::string_view body, std::string* reason) {
    size_t colon = body.find(':');
    if (colon == absl::string_view::npos) return true;
    std::string key(absl::StripAsciiWhitespace(body.substr(0, colon)));
    std::string value(absl::StripAsciiWhitespace(body.substr(colon + 1)));
    if (key.empty() || key.find(' ') != std::string::npos) return true;  // free text
    if (key == "MaxNodes" || key == "MaxProcs") {
      // SimpleAtod also sees values beyond int64 ("99999999999999999999").
      double size = 0;
      if (absl::SimpleAtod(value, &size) && size > static_cast<double>(kSwfMaxNodes)) {
        *reason = absl::StrCat(key, " ", value, " is above the limit of ", kSwfMaxNodes);
        return false;
      }
      // The machine's size sizes the replay's cluster and scales simulate's
      // jobs: "abc", 0 or -5 is no size. It is ignored, as it always was,
      // but no longer silently: SwfLog::warnings (a whole log is not refused
      // for a header field the archive's own logs sometimes leave odd).
      int64_t n = 0;
      if (!absl::SimpleAtoi(value, &n) || n < 1) {
        log_.warnings.push_back(
            {line_no_, absl::StrCat(key, " '", value, "' is not a positive integer (the machine's ",
                                    key == "MaxNodes" ? "nodes" : "processors",
                                    "): ignored, the machine's size is unknown")});
      }
    }
    auto& slot = log_.header.fields[key];
    slot = slot.empty() ? value : slot + "\n" + value;
    SwfHeader& h = log_.header;
    auto as_int = [&](int64_t* out) {
      int64_t v;
      if (absl::SimpleAtoi(value, &v)) *out = v;
    };
    if (key == "Version") h.version = value;
    else if (key == "UnixStartTime") as_int(&h.unix_start_time);
    else if (key == "TimeZone") as_int(&h.time_zone);
    else if (key == "TimeZoneString") h.time_zone_string = value;
    else if (key == "MaxJobs") as_int(&h.max_jobs);
    else if (key == "MaxRecords") as_int(&h.max_records);
    else if (key == "MaxNodes") as_int(&h.max_nodes);
    else if (key == "MaxProcs") as_int(&h.max_procs);
    else if (key == "MaxRuntime") as_int(&h.max_runtime);
    else if (key == "MaxMemory") as_int(&h.max_memory);
    else if (key == "MaxQueues") as_int(&h.max_queues);
    else if (key == "MaxPartitions") as_int(&h.max_partitions);
    else if (key == "AllowOveruse") h.allow_overuse = absl::AsciiStrToLower(value) == "true";
    return true;
  }

  static bool ParseJob(absl::string_view text, SwfJob* job, std::string* reason) {
    std::vector<absl::string_view> f = absl::StrSplit(text, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (f.size() != 18) {
      *reason = absl::StrCat("expected 18 fields, found ", f.size());
      return false;
    }
    int64_t v[18];
    double d[18];
    for (int i = 0; i < 18; ++i) {
      // The SWF definition (v2.2, field 4) permits floating-point values in
      // the time fields, and archive logs have fractional average CPU times
      // and memory: fields 2, 3, 4, 6, 7, 9, 10 and 18 may be fractional and
      // are rounded to the nearest second or KB (fields 6 and 7 are also kept
      // as read). Counts and ids (processors, status, user, ...) must be
      // whole numbers; "128.0" is read as 128.
      const bool fractional_ok = kFractionalField[i];
      if (absl::SimpleAtoi(f[i], &v[i])) {
        d[i] = static_cast<double>(v[i]);
      } else if (IsDecimal(f[i]) && absl::SimpleAtod(f[i], &d[i]) && std::isfinite(d[i]) &&
                 (fractional_ok || d[i] == std::trunc(d[i]))) {
        // Beyond int64 the rounding is undefined; the limits below refuse
        // such a time or size anyway, and no id or memory comes near it.
        if (std::fabs(d[i]) >= 9e18) {
          *reason = absl::StrCat("field ", i + 1, " is ", f[i], ", out of range");
          return false;
        }
        v[i] = static_cast<int64_t>(std::llround(d[i]));
      } else {
        *reason = absl::StrCat("field ", i + 1, " '", f[i], "' is not ",
                               fractional_ok ? "a number" : "an integer");
        return false;
      }
      if (d[i] < 0 && d[i] != -1) {
        *reason = absl::StrCat("field ", i + 1, " is ", f[i], " (negative and not -1)");
        return false;
      }
    }
    job->job_number = v[0];
    job->submit_time = v[1];
    job->wait_time = v[2];
    job->run_time = v[3];
    job->allocated_procs = v[4];
    job->avg_cpu_time = d[5];
    job->used_memory_kb = d[6];
    job->requested_procs = v[7];
    job->requested_time = v[8];
    job->requested_memory_kb = v[9];
    job->status = v[10];
    job->user = v[11];
    job->group = v[12];
    job->executable = v[13];
    job->queue = v[14];
    job->partition = v[15];
    job->preceding_job = v[16];
    job->think_time = v[17];
    if (job->submit_time < 0) {
      *reason = "submit time (field 2) is unknown";
      return false;
    }
    // Bounded here so that submit + wait + runtime cannot overflow and the
    // simulators never size anything by a corrupt value.
    for (int i : {1, 2, 3, 5, 8, 17}) {
      if (d[i] > static_cast<double>(kSwfMaxSeconds)) {
        *reason = absl::StrCat("field ", i + 1, " is ", f[i], " s, above the limit of ",
                               kSwfMaxSeconds, " s");
        return false;
      }
    }
    for (int i : {4, 7}) {
      if (v[i] > kSwfMaxNodes) {
        *reason = absl::StrCat("field ", i + 1, " is ", f[i], " processors, above the limit of ",
                               kSwfMaxNodes);
        return false;
      }
    }
    return true;
  }

  std::string name_;
  SwfReadOptions options_;
  int64_t line_no_ = 0;
  SwfLog log_;
};

}  // namespace

absl::StatusOr<SwfLog> ParseSwf(const std::string& text, const std::string& name,
                                const SwfReadOptions& options) {
  LineParser parser(name, options);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    bool stop = false;
    absl::Status st = parser.Feed(absl::string_view(text).substr(pos, nl - pos), &stop);
    if (!st.ok()) return st;
    if (stop) break;
    pos = nl + 1;
  }
  SwfLog log = parser.Take();
  log.jobs.shrink_to_fit();
  return log;
}

namespace {

// The compression the file's first bytes say ("" for plain text; gzip is
// left to zlib, which reads plain text too).
std::string CompressionOfFile(const std::string& path) {
  char head[kCompressionMagicBytes] = {0};
  size_t n = 0;
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    n = std::fread(head, 1, sizeof(head), f);
    std::fclose(f);
  }
  return CompressionOf(absl::string_view(head, n));
}

// Feeds `read`'s bytes to `parser` line by line. `read` returns the number of
// bytes read, 0 at the end and -1 on an error (reported by the caller).
template <typename Read>
absl::Status FeedLines(const std::string& path, Read read, LineParser* parser, bool* stop,
                       bool* read_failed) {
  // Whole blocks rather than line reads (gzgets): a NUL byte inside a line
  // must not cut it (and join it to the next), and a stream that stops
  // mid-line must be reported as truncated before its partial last line is
  // parsed.
  std::string pending;
  std::vector<char> buf(1 << 16);
  *stop = false;
  *read_failed = false;
  while (!*stop) {
    const int64_t n = read(buf.data(), buf.size());
    if (n < 0) {
      *read_failed = true;
      return absl::OkStatus();
    }
    if (n == 0) break;
    pending.append(buf.data(), static_cast<size_t>(n));
    size_t begin = 0;
    for (size_t nl = pending.find('\n'); nl != std::string::npos && !*stop;
         nl = pending.find('\n', begin)) {
      absl::Status st = parser->Feed(absl::string_view(pending).substr(begin, nl - begin), stop);
      if (!st.ok()) return st;
      begin = nl + 1;
    }
    pending.erase(0, begin);
    // An SWF line is about 100 bytes; /dev/zero or a binary file has none
    // (it was read on, searched from the start on every block, until killed).
    if (pending.size() > kMaxSwfLineBytes) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ":", parser->line_no() + 1, ": a line longer than ", kMaxSwfLineBytes >> 20,
          " MiB: not an SWF log"));
    }
  }
  if (*stop || pending.empty()) return absl::OkStatus();
  // The last line without its newline, reached only at a clean end (a
  // failed read returned above, so a truncated stream is not taken for a
  // short last line).
  return parser->Feed(pending, stop);
}

// Reads a whole log from `read` (see FeedLines). When `read` fails, the log
// is truncated or corrupt: DataLoss naming the last complete line and
// `why_failed()`.
template <typename Read, typename WhyFailed>
absl::StatusOr<SwfLog> ParseStream(const std::string& path, const std::string& kind,
                                   const SwfReadOptions& options, Read read,
                                   WhyFailed why_failed) {
  LineParser parser(path, options);
  bool stop = false;
  bool failed = false;
  absl::Status st = FeedLines(path, read, &parser, &stop, &failed);
  if (failed) {
    return absl::DataLossError(absl::StrCat(path, ": truncated or corrupt ", kind,
                                            " data after line ", parser.line_no(), " (",
                                            why_failed(), ")"));
  }
  if (!st.ok()) return st;
  return parser.Take();
}

// xz, bzip2, zstd or lz4 through libarchive's raw format (one stream, no
// archive): the Parallel Workloads Archive ships gzip, but a user who
// recompressed a log got "line 1 contains a NUL byte".
absl::StatusOr<SwfLog> ReadCompressedSwf(const std::string& path, const std::string& kind,
                                         const SwfReadOptions& options) {
  std::unique_ptr<archive, int (*)(archive*)> a(archive_read_new(), archive_read_free);
  archive_read_support_filter_all(a.get());
  archive_read_support_format_raw(a.get());
  archive_entry* entry = nullptr;
  if (archive_read_open_filename(a.get(), path.c_str(), 1 << 17) != ARCHIVE_OK ||
      archive_read_next_header(a.get(), &entry) != ARCHIVE_OK) {
    const char* why = archive_error_string(a.get());
    return absl::DataLossError(absl::StrCat(path, ": truncated or corrupt ", kind, " data (",
                                            why != nullptr ? why : "unknown error", ")"));
  }
  // The last partial line is parsed by FeedLines only after a clean end, so a
  // truncated stream is reported as such, not as a short last line.
  return ParseStream(
      path, kind, options,
      [&](char* buf, size_t cap) -> int64_t {
        la_ssize_t n = archive_read_data(a.get(), buf, cap);
        return n < 0 ? -1 : static_cast<int64_t>(n);
      },
      [&]() -> std::string {
        const char* why = archive_error_string(a.get());
        return why != nullptr ? why : "read error";
      });
}

}  // namespace

absl::StatusOr<SwfLog> ReadSwf(const std::string& path, const SwfReadOptions& options) {
  {
    // gzopen opens a directory, and its first read failed as "truncated or
    // corrupt gzip data after line 0 (Is a directory)".
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not an SWF log"));
    }
  }
  const std::string kind = CompressionOfFile(path);
  if (kind == "zip") {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": a zip archive, not an SWF log: unpack it (plain, gzip, xz, "
                           "bzip2, zstd or lz4 logs are read)"));
  }
  if (!kind.empty() && kind != "gzip") return ReadCompressedSwf(path, kind, options);
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(file, gzclose);
  gzbuffer(file, 1 << 17);
  return ParseStream(
      path, "gzip", options,
      [&](char* buf, size_t cap) -> int64_t {
        const int n = gzread(file, buf, static_cast<unsigned>(cap));
        if (n > 0) return n;
        // gzread returns 0 both at the end of a whole stream and where a
        // truncated one stops; gzerror tells them apart.
        int errnum = 0;
        gzerror(file, &errnum);
        return (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END)) ? -1 : 0;
      },
      [&]() -> std::string {
        int errnum = 0;
        // zlib prefixes its message with the path.
        absl::string_view why(gzerror(file, &errnum));
        absl::ConsumePrefix(&why, absl::StrCat(path, ": "));
        return std::string(why);
      });
}

std::string FormatSwfJob(const SwfJob& j) {
  std::string line;
  line.reserve(128);
  absl::StrAppend(&line, j.job_number, " ", j.submit_time, " ", j.wait_time, " ", j.run_time, " ",
                  j.allocated_procs, " ");
  AppendShortest(&line, j.avg_cpu_time);
  line.push_back(' ');
  AppendShortest(&line, j.used_memory_kb);
  absl::StrAppend(&line, " ", j.requested_procs, " ", j.requested_time, " ", j.requested_memory_kb,
                  " ", j.status, " ", j.user, " ", j.group, " ", j.executable, " ", j.queue, " ",
                  j.partition, " ", j.preceding_job, " ", j.think_time);
  return line;
}

absl::Status WriteSwf(const std::vector<std::pair<std::string, std::string>>& header,
                      const std::vector<SwfJob>& jobs, OutputFile* out) {
  std::string text;
  for (const auto& [key, value] : header) {
    if (absl::StrContains(key, '\n') || absl::StrContains(value, '\n') ||
        absl::StrContains(key, ':')) {
      return absl::InvalidArgumentError(
          absl::StrCat("SWF header entry '", Excerpt(key), "' holds a line break or a colon"));
    }
    absl::StrAppend(&text, "; ", key, ": ", value, "\n");
  }
  RETURN_IF_ERROR(out->Write(text));
  for (const SwfJob& j : jobs) {  // `out` buffers
    RETURN_IF_ERROR(out->Write(absl::StrCat(FormatSwfJob(j), "\n")));
  }
  return out->Finish();
}

JobSpec ToJobSpec(const SwfJob& job) {
  JobSpec s;
  s.job_id = job.job_number;
  s.submit_time = job.submit_time;
  s.user = static_cast<int32_t>(job.user);
  s.group = static_cast<int32_t>(job.group);
  s.executable = static_cast<int32_t>(job.executable);
  s.queue = static_cast<int32_t>(job.queue);
  s.procs = static_cast<int32_t>(job.procs() > 0 ? job.procs() : 1);
  s.requested_time = job.requested_time;
  return s;
}

}  // namespace sojourn::turnaround
