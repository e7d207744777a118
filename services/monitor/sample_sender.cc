#include "services/monitor/sample_sender.h"

#include <algorithm>
#include <cstdio>
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
      grpc::CreateChannel(config_.statemgr_address, grpc::InsecureChannelCredentials()));
  if (!config_.spool_path.empty()) {
    std::ifstream in(config_.spool_path);
    std::string line;
    absl::MutexLock l(&mu_);
    while (std::getline(in, line)) {
      HostSample s;
      // A torn last line (crash mid-write) is skipped.
      if (ParseSpoolLine(line, &s) && (buffer_.empty() || s.unix_seconds > buffer_.back().unix_seconds)) {
        buffer_.push_back(s);
      }
    }
    while (buffer_.size() > config_.max_buffer) buffer_.pop_front();
    restored_ = buffer_.size();
    RewriteSpool();
  }
}

void SampleSender::RewriteSpool() {
  if (config_.spool_path.empty()) return;
  const std::string tmp = config_.spool_path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    for (const HostSample& s : buffer_) out << SpoolLine(s);
    if (!out) {
      SOJOURN_LOG(WARNING, "cannot write spool %s", tmp);
      return;
    }
  }
  if (std::rename(tmp.c_str(), config_.spool_path.c_str()) != 0) {
    SOJOURN_LOG(WARNING, "cannot replace spool %s", config_.spool_path);
  }
}

void SampleSender::Add(const HostSample& sample) {
  absl::MutexLock l(&mu_);
  buffer_.push_back(sample);
  if (!config_.spool_path.empty()) {
    std::ofstream out(config_.spool_path, std::ios::app);
    out << SpoolLine(sample);
  }
  if (buffer_.size() > config_.max_buffer) {
    while (buffer_.size() > config_.max_buffer) buffer_.pop_front();
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
  // heartbeat that keeps the host's registration fresh.
  while (first || i < pending.size()) {
    sojourn::v1::PushSamplesRequest req;
    req.set_host(config_.host);
    req.set_period_seconds(config_.period_seconds);
    if (first) *req.mutable_attributes() = config_.attributes;
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
    return absl::UnavailableError(absl::StrCat("pushing to ", config_.statemgr_address, ": ",
                                               s.error_message()));
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
