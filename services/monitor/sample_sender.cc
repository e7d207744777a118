#include "services/monitor/sample_sender.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "services/convert.h"

namespace sojourn::monitor {

namespace {

// One spool line: unix_seconds,cpu_load,free_mem_mb,swap_in,swap_out ("nan"
// for unknown values).
std::string SpoolLine(const HostSample& s) {
  return absl::StrFormat("%d,%.17g,%.17g,%.17g,%.17g\n", s.unix_seconds, s.cpu_load,
                         s.free_mem_mb, s.swap_in_per_s, s.swap_out_per_s);
}

bool ParseSpoolLine(absl::string_view line, HostSample* s) {
  std::vector<absl::string_view> f = absl::StrSplit(line, ',');
  return f.size() == 5 && absl::SimpleAtoi(f[0], &s->unix_seconds) &&
         absl::SimpleAtod(f[1], &s->cpu_load) && absl::SimpleAtod(f[2], &s->free_mem_mb) &&
         absl::SimpleAtod(f[3], &s->swap_in_per_s) && absl::SimpleAtod(f[4], &s->swap_out_per_s);
}

}  // namespace

SampleSender::SampleSender(const SenderConfig& config, Clock& clock)
    : config_(config), clock_(clock) {
  stub_ = sojourn::v1::StateManager::NewStub(
      grpc::CreateChannel(config_.statemgr_address, OrInsecure(config_.credentials)));
  if (!config_.spool_path.empty()) {
    absl::MutexLock l(&mu_);
    LoadSpool();
  }
}

void SampleSender::LoadSpool() {
  std::ifstream in(config_.spool_path);
  const int64_t latest = absl::ToUnixSeconds(clock_.Now() + config_.max_spool_future);
  std::vector<HostSample> samples;
  std::string rejected;  // raw lines, newline-terminated
  size_t line_no = 0;
  std::string first_reason;
  size_t dropped_over_max = 0;
  auto reject = [&](const std::string& line, const std::string& reason) {
    if (rejected_++ == 0) first_reason = absl::StrCat("line ", line_no, ": ", reason);
    rejected.append(line).push_back('\n');
  };
  // A line is a few dozen bytes: a longer one is garbage, and is read in
  // pieces (never whole into memory) and rejected.
  constexpr size_t kMaxLine = 512;
  std::string line;
  bool too_long = false;
  char buf[kMaxLine];
  while (in.is_open()) {
    in.getline(buf, sizeof(buf));
    if (in.bad() || (in.eof() && in.gcount() == 0)) break;
    if (in.fail() && !in.eof()) {
      // The line goes on: keep its start for the rejected file, skip the rest.
      in.clear();
      if (!too_long) line.assign(buf, in.gcount());
      too_long = true;
      continue;
    }
    ++line_no;
    if (too_long) {
      reject(line + "...", "line too long");
      too_long = false;
      if (in.eof()) break;
      continue;
    }
    line.assign(buf);
    HostSample s;
    const char* problem = nullptr;
    if (!ParseSpoolLine(line, &s)) {
      // Also a torn last line (crash mid-write).
      if (!line.empty()) reject(line, "not a spool line");
    } else if ((problem = SampleProblem(s)) != nullptr) {
      reject(line, problem);
    } else if (s.unix_seconds > latest) {
      reject(line, absl::StrCat("stamped more than ", absl::FormatDuration(config_.max_spool_future),
                                " after the clock"));
    } else {
      samples.push_back(s);
      if (samples.size() >= 2 * config_.max_buffer + 1024) {
        // A huge spool: keep memory bounded by the newest max_buffer so far.
        std::stable_sort(samples.begin(), samples.end(),
                         [](const HostSample& a, const HostSample& b) {
                           return a.unix_seconds < b.unix_seconds;
                         });
        const size_t excess = samples.size() - config_.max_buffer;
        samples.erase(samples.begin(), samples.begin() + static_cast<ptrdiff_t>(excess));
        dropped_over_max += excess;
      }
    }
    if (in.eof()) break;
  }
  // Time order, each time once: the state manager refuses an out-of-order
  // batch (one clock step back would wedge the sender) and stores a time once.
  auto by_time = [](const HostSample& a, const HostSample& b) {
    return a.unix_seconds < b.unix_seconds;
  };
  std::stable_sort(samples.begin(), samples.end(), by_time);
  for (const HostSample& s : samples) {
    if (buffer_.empty() || s.unix_seconds > buffer_.back().unix_seconds) buffer_.push_back(s);
  }
  if (buffer_.size() > config_.max_buffer) {
    dropped_over_max += buffer_.size() - config_.max_buffer;
    while (buffer_.size() > config_.max_buffer) buffer_.pop_front();
  }
  if (dropped_over_max > 0) {
    SOJOURN_LOG(WARNING, "spool %s: the oldest %d samples dropped beyond the buffer of %d",
                config_.spool_path, dropped_over_max, config_.max_buffer);
  }
  restored_ = buffer_.size();
  if (rejected_ > 0) {
    // Kept for a person to look at, not deleted with the rewrite below.
    const std::string path = config_.spool_path + ".rejected";
    std::ofstream out(path, std::ios::app);
    out << rejected;
    out.flush();
    SOJOURN_LOG(WARNING, "spool %s: %d lines left out (%s); %s", config_.spool_path, rejected_,
                first_reason,
                out ? absl::StrCat("moved to ", path)
                    : absl::StrCat("cannot write ", path, ": the spool is left as it is"));
    if (!out) return;  // rewriting would lose them
  }
  RewriteSpool();
}

void SampleSender::RewriteSpool() {
  if (config_.spool_path.empty()) return;
  const std::string tmp = config_.spool_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const HostSample& s : buffer_) out << SpoolLine(s);
    // A full disk shows only when the data leave the stream's buffer (at
    // close): an empty file was renamed over a good spool.
    out.close();
    if (out.fail()) {
      SpoolWriteFailed(absl::StrCat("cannot write ", tmp, " (", std::strerror(errno),
                                    "); the old spool is kept"));
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), config_.spool_path.c_str()) != 0) {
    SpoolWriteFailed(absl::StrCat("cannot replace ", config_.spool_path, " (",
                                  std::strerror(errno), ")"));
    return;
  }
  SpoolWriteSucceeded();
}

void SampleSender::SpoolWriteFailed(const std::string& what) {
  ++spool_write_errors_;
  if (!spool_failing_) {
    SOJOURN_LOG(WARNING,
                "spool %s: %s; unacknowledged samples are kept in memory only until it can be "
                "written (a restart now loses them)",
                config_.spool_path, what);
  }
  spool_failing_ = true;
}

void SampleSender::SpoolWriteSucceeded() {
  if (spool_failing_) SOJOURN_LOG(INFO, "spool %s: written again", config_.spool_path);
  spool_failing_ = false;
}

size_t SampleSender::spool_write_errors() const {
  absl::MutexLock l(&mu_);
  return spool_write_errors_;
}

void SampleSender::Add(const HostSample& sample) {
  absl::MutexLock l(&mu_);
  if (buffer_.empty() || sample.unix_seconds > buffer_.back().unix_seconds) {
    buffer_.push_back(sample);
  } else {
    auto at = std::lower_bound(
        buffer_.begin(), buffer_.end(), sample.unix_seconds,
        [](const HostSample& s, int64_t t) { return s.unix_seconds < t; });
    if (at != buffer_.end() && at->unix_seconds == sample.unix_seconds) return;  // duplicate
    buffer_.insert(at, sample);
  }
  if (!config_.spool_path.empty()) {
    std::ofstream out(config_.spool_path, std::ios::app);
    out << SpoolLine(sample);
    out.close();
    if (out.fail()) {
      SpoolWriteFailed(absl::StrCat("cannot append to it (", std::strerror(errno), ")"));
    } else {
      SpoolWriteSucceeded();
    }
  }
  if (buffer_.size() > config_.max_buffer) {
    // Full (the state manager has been away for days): drop the oldest
    // sixteenth at once, so the spool is rewritten once per max_buffer / 16
    // samples, not on every sample (200,000 lines, ~16 MB, every period).
    const size_t keep = config_.max_buffer - config_.max_buffer / 16;
    if (dropped_full_ == 0) {
      SOJOURN_LOG(WARNING,
                  "buffer full (%d samples): dropping the oldest; the state manager at %s has "
                  "not acknowledged anything for a long time",
                  config_.max_buffer, config_.statemgr_address);
    }
    while (buffer_.size() > keep) {
      buffer_.pop_front();
      ++dropped_full_;
    }
    RewriteSpool();
  }
}

absl::Status SampleSender::Flush() {
  absl::MutexLock flush_lock(&flush_mu_);
  std::vector<HostSample> pending;
  {
    absl::MutexLock l(&mu_);
    pending.assign(buffer_.begin(), buffer_.end());
  }
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  sojourn::v1::PushSamplesResponse response;
  std::unique_ptr<grpc::ClientWriter<sojourn::v1::PushSamplesRequest>> writer(
      stub_->PushSamples(&ctx, &response));
  size_t i = 0;
  bool first = true;
  // An empty buffer still sends one message (with the attributes): a
  // heartbeat that keeps the host's registration fresh. Every message
  // carries the attributes and the period, like the host: a state manager
  // from before the rule "a message without attributes keeps the stored
  // ones" replaced them with empty ones on the second message of a stream.
  while (first || i < pending.size()) {
    sojourn::v1::PushSamplesRequest req;
    req.set_host(config_.host);
    req.set_period_seconds(config_.period_seconds);
    *req.mutable_attributes() = config_.attributes;
    first = false;
    for (size_t n = 0; i < pending.size() && n < config_.batch_size; ++i, ++n) {
      *req.add_samples() = ToProto(pending[i]);
    }
    if (!writer->Write(req)) break;
  }
  writer->WritesDone();
  grpc::Status s = writer->Finish();
  absl::MutexLock l(&mu_);
  if (!s.ok()) {
    connected_ = false;
    backoff_ = std::clamp(backoff_ * 2, config_.min_backoff, config_.max_backoff);
    next_try_ = clock_.Now() + backoff_;
    // The state manager's code (UNAVAILABLE when unreachable, INVALID_ARGUMENT
    // for a sample it refuses), so callers can tell bad input from an outage.
    absl::Status got = FromGrpcStatus(s);
    return absl::Status(got.code(), absl::StrCat("pushing to ", config_.statemgr_address, ": ",
                                                 got.message()));
  }
  connected_ = true;
  backoff_ = absl::ZeroDuration();
  auto it = response.last_persisted_unix_seconds().find(config_.host);
  const int64_t acked_until =
      it == response.last_persisted_unix_seconds().end() ? INT64_MIN : it->second;
  size_t dropped = 0;
  while (!buffer_.empty() && buffer_.front().unix_seconds <= acked_until) {
    buffer_.pop_front();
    ++acknowledged_;
    ++dropped;
  }
  if (dropped > 0) RewriteSpool();
  return absl::OkStatus();
}

absl::Status SampleSender::MaybeFlush() {
  {
    absl::MutexLock l(&mu_);
    if (clock_.Now() < next_try_) return absl::OkStatus();
  }
  return Flush();
}

size_t SampleSender::unacknowledged() const {
  absl::MutexLock l(&mu_);
  return buffer_.size();
}

int64_t SampleSender::acknowledged() const {
  absl::MutexLock l(&mu_);
  return acknowledged_;
}

bool SampleSender::connected() const {
  absl::MutexLock l(&mu_);
  return connected_;
}

}  // namespace sojourn::monitor
