// sojourn-replay: feeds hosts of a recorded trace to a state manager, as if
// their monitors were running. The trace is shifted by whole weeks (keeping
// weekdays and clock times) so that it ends after now: everything up to now is
// loaded at once as history, the rest is streamed when its time comes, and
// the trace then repeats (shifted by its length rounded up to whole weeks).
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/clock.h"
#include "common/flags_usage.h"
#include "common/logging.h"
#include "common/server.h"
#include "common/text.h"
#include "common/tls.h"
#include "models/traces/traces.h"
#include "services/monitor/sample_sender.h"

ABSL_FLAG(std::string, trace, "", "trace in any --format: a file (canonical CSV or availability matrix, optionally "
          ".gz/.xz), or a Grid Workloads Archive directory or tarball; required");
ABSL_FLAG(std::string, format, "auto", "trace format: auto, canonical, gwa, availability-matrix");
ABSL_FLAG(std::string, statemgr, "127.0.0.1:7403", "state manager receiving the replayed hosts");
ABSL_FLAG(std::string, hosts, "", "comma-separated hosts to replay (default: all)");
ABSL_FLAG(bool, follow, true,
          "after loading the history, keep streaming the rest of the trace in real time");
ABSL_FLAG(bool, shift, true, "shift the trace by whole weeks so that it ends after now");
ABSL_FLAG(int, connect_timeout_seconds, 60,
          "wait up to this long for the state manager to accept a connection (one starting on a "
          "large database opens its port only once it is loaded), 0..3600");

namespace {
constexpr int64_t kWeek = 7 * 86400;

// A trace may measure more than the machine: Bitbrains VMs report CPU use
// above their capacity (46,897 rows of the shared 100 VMs) and memory use
// above it (5,822), i.e. a load above 1 and negative free memory, which
// PushSamples refuses. Such a sample is sent at the bound (load 1, free 0),
// which the state manager classifies as the trace's value would be (above
// Th2, below the guest working set), as sojourn-eval does. True when it
// changed anything.
bool ClampToProtocol(sojourn::HostSample* s) {
  bool changed = false;
  if (s->cpu_load > 1) {
    s->cpu_load = 1;
    changed = true;
  }
  if (s->has_free_mem() && s->free_mem_mb < 0) {
    s->free_mem_mb = 0;
    changed = true;
  }
  return changed;
}
}

int main(int argc, char** argv) {
  sojourn::ParseFlags(
      argc, argv,
      "sojourn-replay: replays recorded hosts into a state manager (history first, then live).\n"
      "usage: sojourn-replay --trace PATH [--format F] [--statemgr ADDR] [--hosts a,b] [--follow=false]",
      __FILE__);
  sojourn::BlockTerminationSignals();
  if (absl::GetFlag(FLAGS_trace).empty()) {
    std::fprintf(stderr, "sojourn-replay: --trace is required\n");
    return 2;
  }
  if (absl::Status s = sojourn::ValidateDialAddress(absl::GetFlag(FLAGS_statemgr), "--statemgr");
      !s.ok()) {
    std::fprintf(stderr, "sojourn-replay: %s\n", std::string(s.message()).c_str());
    return 2;
  }
  const int connect_timeout = absl::GetFlag(FLAGS_connect_timeout_seconds);
  if (connect_timeout < 0 || connect_timeout > 3600) {
    std::fprintf(stderr, "sojourn-replay: --connect_timeout_seconds must be in [0, 3600], got %d\n",
                 connect_timeout);
    return 2;
  }
  // Checked before the (possibly long) import of the trace.
  absl::StatusOr<sojourn::TlsMaterial> tls = sojourn::LoadTlsFromFlags(sojourn::TlsRole::kClient);
  if (!tls.ok()) {
    std::fprintf(stderr, "sojourn-replay: %s\n", std::string(tls.status().message()).c_str());
    return 2;
  }
  const std::shared_ptr<grpc::ChannelCredentials> credentials =
      sojourn::ChannelCredentialsFor(*tls);
  sojourn::traces::ImportOptions io;
  auto format = sojourn::traces::ParseTraceFormat(absl::GetFlag(FLAGS_format));
  if (!format.ok()) {
    std::fprintf(stderr, "sojourn-replay: %s\n", std::string(format.status().message()).c_str());
    return 2;
  }
  io.format = *format;
  auto traces = sojourn::traces::ImportTrace(absl::GetFlag(FLAGS_trace), io);
  if (!traces.ok()) {
    std::fprintf(stderr, "sojourn-replay: %s\n", std::string(traces.status().message()).c_str());
    return 2;
  }
  if (!traces->empty() && traces->front().wall_clock_timestamps) {
    // The statemgr keeps Unix time and its own --utc_offset_seconds.
    std::fprintf(stderr,
                 "sojourn-replay: the trace's timestamps are local date-times; they are sent as "
                 "if they were UTC\n");
  }
  const std::string hosts_flag = absl::GetFlag(FLAGS_hosts);
  std::vector<std::string> wanted = absl::StrSplit(hosts_flag, ',', absl::SkipEmpty());
  // "--hosts ," replayed every host; a misspelt name was skipped unsaid.
  if (!hosts_flag.empty() && wanted.empty()) {
    std::fprintf(stderr, "sojourn-replay: --hosts lists no host (give comma-separated names)\n");
    return 2;
  }
  for (const std::string& w : wanted) {
    if (std::none_of(traces->begin(), traces->end(),
                     [&](const sojourn::HostTrace& t) { return t.host == w; })) {
      std::fprintf(stderr, "sojourn-replay: --hosts: no host '%s' in %s\n",
                   sojourn::Excerpt(w).c_str(), absl::GetFlag(FLAGS_trace).c_str());
      return 2;
    }
  }
  std::vector<sojourn::HostTrace> hosts;
  for (auto& t : *traces) {
    if (t.samples.empty()) continue;
    if (wanted.empty() || std::find(wanted.begin(), wanted.end(), t.host) != wanted.end()) {
      hosts.push_back(std::move(t));
    }
  }
  // The state manager stores host names as proto strings: refuse one it
  // would refuse (a non-UTF-8 name failed in libprotobuf and was reported as
  // an empty stream).
  for (const auto& h : hosts) {
    absl::Status st = sojourn::ValidateHostName(h.host);
    if (st.ok() && !sojourn::IsValidUtf8(h.host)) {
      st = absl::InvalidArgumentError(
          absl::StrCat("host ", sojourn::Excerpt(h.host), " is not valid UTF-8"));
    }
    if (!st.ok()) {
      std::fprintf(stderr, "sojourn-replay: %s: %s\n", absl::GetFlag(FLAGS_trace).c_str(),
                   std::string(st.message()).c_str());
      return 2;
    }
  }
  if (hosts.empty()) {
    std::fprintf(stderr, "sojourn-replay: no matching host with samples in %s\n",
                 absl::GetFlag(FLAGS_trace).c_str());
    return 2;
  }
  // A state manager still loading its database has no port yet: the first
  // push failed at once with "Connection refused" (exit 1).
  {
    auto channel = grpc::CreateChannel(absl::GetFlag(FLAGS_statemgr), credentials);
    if (!channel->WaitForConnected(std::chrono::system_clock::now() +
                                   std::chrono::seconds(connect_timeout))) {
      SOJOURN_LOG(ERROR, "state manager %s did not accept a connection within %d s "
                  "(--connect_timeout_seconds)", absl::GetFlag(FLAGS_statemgr), connect_timeout);
      return 1;
    }
  }
  sojourn::Clock& clock = sojourn::Clock::Real();
  int64_t first = INT64_MAX, last = INT64_MIN;
  for (const auto& h : hosts) {
    first = std::min(first, h.samples.front().unix_seconds);
    last = std::max(last, h.samples.back().unix_seconds);
  }
  const int64_t now = absl::ToUnixSeconds(clock.Now());
  int64_t shift = 0;
  if (absl::GetFlag(FLAGS_shift) && last < now) shift = ((now - last) / kWeek + 1) * kWeek;
  const int64_t span = ((last - first) / kWeek + 1) * kWeek;

  std::vector<std::unique_ptr<sojourn::monitor::SampleSender>> senders;
  for (const auto& h : hosts) {
    sojourn::monitor::SenderConfig sc;
    sc.host = h.host;
    sc.statemgr_address = absl::GetFlag(FLAGS_statemgr);
    sc.credentials = credentials;
    // What the trace knows of the host (0 = unknown); sent with every message.
    sc.attributes.set_total_mem_mb(h.total_mem_mb);
    sc.attributes.set_cpu_cores(h.cpu_cores);
    sc.period_seconds = h.period_seconds > 0 ? h.period_seconds : 300;
    sc.batch_size = 5000;
    senders.push_back(std::make_unique<sojourn::monitor::SampleSender>(sc, clock));
  }
  // History: everything up to now, in one stream per host, sent a chunk at
  // a time: a sender keeps at most max_buffer samples (200,000) and drops
  // the oldest beyond, so adding a whole history first lost all but its
  // last 200,000 samples (14 days at 6 s) while saying every one was loaded.
  std::vector<size_t> next(hosts.size(), 0);
  // A row with its host's previous timestamp is left out (a sender keeps the
  // first sample of a time), and counted: "loaded" counted them, so a trace
  // with repeated rows (0.5 % of the shared Bitbrains tarball's) said more
  // samples were loaded than the state manager stored.
  auto repeats = [&hosts](size_t i, size_t k) {
    return k > 0 && hosts[i].samples[k].unix_seconds == hosts[i].samples[k - 1].unix_seconds;
  };
  int64_t loaded = 0, clamped = 0, repeated = 0;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const size_t chunk = std::max<size_t>(1, senders[i]->config().max_buffer / 2);
    bool more = true;
    while (more) {
      more = false;
      while (next[i] < hosts[i].samples.size() &&
             hosts[i].samples[next[i]].unix_seconds + shift <= now) {
        if (repeats(i, next[i])) {
          ++next[i];
          ++repeated;
          continue;
        }
        sojourn::HostSample s = hosts[i].samples[next[i]++];
        s.unix_seconds += shift;
        clamped += ClampToProtocol(&s);
        senders[i]->Add(s);
        ++loaded;
        if (senders[i]->unacknowledged() >= chunk) {
          more = true;
          break;
        }
      }
      absl::Status st = senders[i]->Flush();
      if (!st.ok()) {
        SOJOURN_LOG(ERROR, "loading history of %s: %s", hosts[i].host, st.ToString());
        // The state manager refused the trace's content (bad input, exit 2),
        // as opposed to being unreachable (exit 1).
        return st.code() == absl::StatusCode::kInvalidArgument ||
                       st.code() == absl::StatusCode::kFailedPrecondition
                   ? 2
                   : 1;
      }
    }
  }
  SOJOURN_LOG(INFO,
              "replay: loaded %d samples of %d hosts as history (trace shifted by %d weeks; %d "
              "samples above the machine's CPU or memory sent at the bound; %d rows repeating "
              "their host's previous timestamp left out)",
              loaded, hosts.size(), shift / kWeek, clamped, repeated);
  if (!absl::GetFlag(FLAGS_follow)) return 0;

  // Live part: a thread waits for SIGTERM/SIGINT while this one streams.
  absl::Mutex mu;
  bool stopping = false;
  std::thread waiter([&] {
    sojourn::WaitForTerminationSignal();
    absl::MutexLock l(&mu);
    stopping = true;
  });
  absl::MutexLock l(&mu);
  while (!stopping) {
    bool all_done = true;
    for (size_t i = 0; i < hosts.size(); ++i) all_done &= next[i] >= hosts[i].samples.size();
    if (all_done) {
      // Repeat the trace, shifted by its span in whole weeks.
      shift += span;
      std::fill(next.begin(), next.end(), 0);
    }
    int64_t due = INT64_MAX;
    for (size_t i = 0; i < hosts.size(); ++i) {
      if (next[i] < hosts[i].samples.size()) {
        due = std::min(due, hosts[i].samples[next[i]].unix_seconds + shift);
      }
    }
    clock.SleepUntil(absl::FromUnixSeconds(due), &mu, &stopping);
    if (stopping) break;
    const int64_t t_now = absl::ToUnixSeconds(clock.Now());
    mu.Unlock();
    for (size_t i = 0; i < hosts.size(); ++i) {
      bool added = false;
      while (next[i] < hosts[i].samples.size() &&
             hosts[i].samples[next[i]].unix_seconds + shift <= t_now) {
        if (repeats(i, next[i])) {
          ++next[i];
          continue;
        }
        sojourn::HostSample s = hosts[i].samples[next[i]++];
        s.unix_seconds += shift;
        ClampToProtocol(&s);
        senders[i]->Add(s);
        added = true;
      }
      if (added) (void)senders[i]->MaybeFlush();
    }
    mu.Lock();
  }
  waiter.detach();
  return 0;
}
