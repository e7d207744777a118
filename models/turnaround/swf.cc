#include "models/turnaround/swf.h"

#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"

namespace sojourn::turnaround {
namespace {

class LineParser {
 public:
  LineParser(std::string name, const SwfReadOptions& options) : name_(std::move(name)), options_(options) {}

  // Returns false when reading should stop (max_jobs reached).
  absl::Status Feed(absl::string_view line, bool* stop) {
    ++line_no_;
    *stop = false;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    absl::string_view trimmed = absl::StripAsciiWhitespace(line);
    if (trimmed.empty()) return absl::OkStatus();
    if (trimmed.front() == ';') {
      ParseHeader(trimmed.substr(1));
      return absl::OkStatus();
    }
    std::string reason;
    SwfJob job;
    job.line = line_no_;
    if (!ParseJob(trimmed, &job, &reason)) {
      if (options_.on_malformed == SwfReadOptions::OnMalformed::kReject) {
        return absl::InvalidArgumentError(absl::StrCat(name_, ":", line_no_, ": ", reason));
      }
      log_.skipped.push_back({line_no_, reason});
      return absl::OkStatus();
    }
    log_.jobs.push_back(job);
    if (options_.max_jobs > 0 && static_cast<int64_t>(log_.jobs.size()) >= options_.max_jobs) {
      *stop = true;
    }
    return absl::OkStatus();
  }

  SwfLog Take() { return std::move(log_); }

 private:
  void ParseHeader(absl::string_view body) {
    size_t colon = body.find(':');
    if (colon == absl::string_view::npos) return;
    std::string key(absl::StripAsciiWhitespace(body.substr(0, colon)));
    std::string value(absl::StripAsciiWhitespace(body.substr(colon + 1)));
    if (key.empty() || key.find(' ') != std::string::npos) return;  // free text
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
      // Fields 6 and 7 (average CPU time, used memory) may be fractional in
      // some archive logs; every other field is an integer.
      bool fractional_ok = (i == 5 || i == 6);
      if (absl::SimpleAtoi(f[i], &v[i])) {
        d[i] = static_cast<double>(v[i]);
      } else if (fractional_ok && absl::SimpleAtod(f[i], &d[i]) && std::isfinite(d[i])) {
        v[i] = static_cast<int64_t>(std::llround(d[i]));
      } else {
        *reason = absl::StrCat("field ", i + 1, " '", f[i], "' is not an integer");
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

absl::StatusOr<SwfLog> ReadSwf(const std::string& path, const SwfReadOptions& options) {
  gzFile file = gzopen(path.c_str(), "rb");
  if (file == nullptr) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  std::unique_ptr<gzFile_s, int (*)(gzFile)> closer(file, gzclose);
  gzbuffer(file, 1 << 17);
  LineParser parser(path, options);
  std::string line;
  char buf[4096];
  while (true) {
    line.clear();
    bool got = false;
    while (gzgets(file, buf, sizeof(buf)) != nullptr) {
      got = true;
      line.append(buf);
      if (!line.empty() && line.back() == '\n') break;
    }
    if (!got) break;
    if (!line.empty() && line.back() == '\n') line.pop_back();
    bool stop = false;
    absl::Status st = parser.Feed(line, &stop);
    if (!st.ok()) return st;
    if (stop) break;
  }
  int errnum = 0;
  const char* msg = gzerror(file, &errnum);
  if (errnum != Z_OK && errnum != Z_STREAM_END) {
    return absl::DataLossError(absl::StrCat(path, ": read error: ", msg));
  }
  return parser.Take();
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
