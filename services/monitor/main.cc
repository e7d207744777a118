// monitor: samples this host from /proc and streams to its state manager.
#include <unistd.h>

#include <algorithm>
#include <optional>
#include <random>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "common/build_info_metric.h"
#include "common/cli_util.h"
#include "common/clock.h"
#include "common/flags_usage.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/server.h"
#include "common/text.h"
#include "services/monitor/adaptive_period.h"
#include "services/monitor/monitor.h"
#include "services/monitor/monitor_service.h"
#include "services/monitor/proc_sampler.h"
#include "services/monitor/sample_sender.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7405",
          "gRPC listen address for guest registration (port 0 = any free port)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9405",
          "HTTP address serving /metrics for Prometheus (empty = off)");
ABSL_FLAG(std::string, port_file, "", "write the bound gRPC and metrics ports to this file");
ABSL_FLAG(std::string, statemgr, "127.0.0.1:7403", "address of this host's state manager");
ABSL_FLAG(std::string, host, "", "name of this host as sojourn knows it (default: hostname)");
ABSL_FLAG(int64_t, period_seconds, 6,
          "sampling period (paper 000: 6 s); with --adaptive_period, the nominal period told to "
          "the state manager (the step of its state grid)");
ABSL_FLAG(bool, adaptive_period, false,
          "adapt the sampling period to how often the host's state changes (paper 001 section "
          "IV.B): start at --min_period_seconds, double the period after --stable_seconds without "
          "a change of state or load band (classified with --th1, --th2, --grace_seconds and "
          "--working_set_mb) up to --max_period_seconds, take one random extra sample within "
          "each period longer than --period_seconds, and go back to the minimum on any change; "
          "off: a sample every --period_seconds");
ABSL_FLAG(int64_t, min_period_seconds, 1,
          "with --adaptive_period: the shortest period, where it starts (paper 001: 1 s)");
ABSL_FLAG(int64_t, max_period_seconds, 30,
          "with --adaptive_period: the longest period; must be below the state manager's "
          "revocation gap, max(--revocation_gap_seconds, 1.5 x --period_seconds), and at most "
          "--grace_seconds");
ABSL_FLAG(int64_t, stable_seconds, 60,
          "with --adaptive_period: time without a change before the period doubles (the default "
          "is the default --grace_seconds, the time scale of the five states; a fixed value: "
          "change it along with --grace_seconds)");
ABSL_FLAG(int64_t, revocation_gap_seconds, 60,
          "with --adaptive_period: the state manager's --revocation_gap_seconds, which "
          "--max_period_seconds must stay below");
ABSL_FLAG(std::string, proc_root, "/proc",
          "where to read /proc from (its stat and meminfo must be readable)");
ABSL_FLAG(bool, gateway, false,
          "act on registered guest processes after each sample, as an FGCS gateway does: "
          "renice to 19 in S2, suspend during a load spike above --th2, resume when it ends, "
          "terminate in S3 (above --th2 for longer than --grace_seconds) and S4 (free memory "
          "below --working_set_mb); needs permission to signal the guests (and CAP_SYS_NICE to "
          "give a reniced guest its priority back)");
ABSL_FLAG(double, th1, 0.2, "with --gateway or --adaptive_period: CPU load below this is S1 (guest at its priority)");
ABSL_FLAG(double, th2, 0.6, "with --gateway or --adaptive_period: CPU load above this suspends the guests");
ABSL_FLAG(int64_t, grace_seconds, 60,
          "with --gateway or --adaptive_period: load above --th2 for longer than this "
          "terminates the guests (S3)");
ABSL_FLAG(double, working_set_mb, 256,
          "with --gateway or --adaptive_period: free memory below this (MiB) terminates the "
          "guests (S4)");
ABSL_FLAG(std::string, spool_path, "",
          "file keeping the samples not yet acknowledged by the state manager, so they survive a "
          "restart of the monitor while the state manager is unreachable (empty = memory only)");

int main(int argc, char** argv) {
  sojourn::ParseFlags(
      argc, argv,
      "monitor: samples this host's CPU load (excluding registered guest processes), free "
      "memory and swap activity from /proc every period and streams the samples to the host's "
      "state manager, buffering and retrying with backoff while it is unreachable.\n"
      "usage: monitor [--flag=value ...]",
      __FILE__);
  sojourn::BlockTerminationSignals();
  sojourn::RaiseOpenFileLimitOrWarn();
  // The state manager refuses a period over a day, a bad host name or
  // address on every push: the monitor would start and then retry forever.
  if (absl::GetFlag(FLAGS_period_seconds) <= 0 ||
      absl::GetFlag(FLAGS_period_seconds) > sojourn::kMaxPeriodSeconds) {
    SOJOURN_LOG(ERROR, "--period_seconds must be in [1, %d], got %d", sojourn::kMaxPeriodSeconds,
                absl::GetFlag(FLAGS_period_seconds));
    return 2;
  }
  sojourn::availability::ClassifierConfig gateway_config;
  gateway_config.th1 = absl::GetFlag(FLAGS_th1);
  gateway_config.th2 = absl::GetFlag(FLAGS_th2);
  gateway_config.grace_seconds = absl::GetFlag(FLAGS_grace_seconds);
  gateway_config.guest_working_set_mb = absl::GetFlag(FLAGS_working_set_mb);
  // The monitor's own samples are never further apart than a few periods;
  // the gateway does not judge revocation (the state manager does).
  gateway_config.revocation_gap_seconds = 1000 * absl::GetFlag(FLAGS_period_seconds);
  // The state manager's own checks of these flags: the gateway and the
  // adaptive period classify with its classifier.
  sojourn::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_listen);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  if (!sojourn::FlagsOk({sojourn::ValidateClassifierFlags(
                             gateway_config.th1, gateway_config.th2, gateway_config.grace_seconds,
                             gateway_config.guest_working_set_mb),
                         sojourn::ValidateServerOptions(options)})) {
    return sojourn::kExitUsage;
  }
  const std::shared_ptr<grpc::ChannelCredentials> credentials =
      sojourn::ServiceTlsFromFlags(&options);
  if (credentials == nullptr) return sojourn::kExitUsage;
  sojourn::monitor::AdaptivePeriodConfig adaptive_config;
  if (absl::GetFlag(FLAGS_adaptive_period)) {
    const int64_t period = absl::GetFlag(FLAGS_period_seconds);
    const int64_t min_period = absl::GetFlag(FLAGS_min_period_seconds);
    const int64_t max_period = absl::GetFlag(FLAGS_max_period_seconds);
    const int64_t stable = absl::GetFlag(FLAGS_stable_seconds);
    const int64_t gap_flag = absl::GetFlag(FLAGS_revocation_gap_seconds);
    constexpr int64_t kYear = 365 * 86400;
    // The state manager's revocation gap for this host (HostBook::
    // ClassifierFor): a sample gap longer than it is recorded as S5, so the
    // longest period must stay below it.
    const int64_t gap = std::max<int64_t>(gap_flag, (period * 3 + 1) / 2);
    std::string bad;
    if (gap_flag < 1 || gap_flag > kYear) {
      bad = absl::StrFormat("--revocation_gap_seconds must be in [1, %d] (a year), got %d", kYear,
                            gap_flag);
    } else if (max_period < 1 || max_period > sojourn::kMaxPeriodSeconds) {
      bad = absl::StrFormat("--max_period_seconds must be in [1, %d], got %d",
                            sojourn::kMaxPeriodSeconds, max_period);
    } else if (min_period < 1 || min_period > max_period) {
      bad = absl::StrFormat(
          "--min_period_seconds must be in [1, --max_period_seconds = %d], got %d", max_period,
          min_period);
    } else if (max_period >= gap) {
      bad = absl::StrFormat(
          "--max_period_seconds must be below the state manager's revocation gap of %d s "
          "(max(--revocation_gap_seconds, 1.5 x --period_seconds)), got %d: samples that far "
          "apart would be recorded as a revocation (S5)",
          gap, max_period);
    } else if (gateway_config.grace_seconds > 0 && max_period > gateway_config.grace_seconds) {
      bad = absl::StrFormat(
          "--max_period_seconds must be at most --grace_seconds = %d, got %d: one sample above "
          "--th2 after a longer interval would be S3 at once, never a transient spike",
          gateway_config.grace_seconds, max_period);
    } else if (stable < 1 || stable > sojourn::kMaxPeriodSeconds) {
      bad = absl::StrFormat("--stable_seconds must be in [1, %d], got %d",
                            sojourn::kMaxPeriodSeconds, stable);
    }
    if (!bad.empty()) {
      SOJOURN_LOG(ERROR, "%s", bad);
      return 2;
    }
    adaptive_config.min_period = absl::Seconds(min_period);
    adaptive_config.max_period = absl::Seconds(max_period);
    adaptive_config.stable = absl::Seconds(stable);
    adaptive_config.extra_samples_above = absl::Seconds(period);
    // The same classification as the gateway's (and the state manager's,
    // given the same thresholds).
    adaptive_config.classifier = gateway_config;
  }
  std::string host = absl::GetFlag(FLAGS_host);
  if (host.empty()) {
    char buf[256] = {0};
    gethostname(buf, sizeof(buf) - 1);
    host = buf;
  }
  // A bare "localhost" would be dialed on port 443: samples would only pile
  // up in the buffer.
  for (absl::Status s :
       {sojourn::ValidateHostName(host, "--host"),
        sojourn::ValidateDialAddress(absl::GetFlag(FLAGS_statemgr), "--statemgr")}) {
    if (!s.ok()) {
      SOJOURN_LOG(ERROR, "%s", s.message());
      return 2;
    }
  }
  // Every sample reads <proc_root>/stat and /meminfo: without them the
  // monitor would run, serve and only log a sampling error every period.
  sojourn::monitor::ProcSampler sampler(absl::GetFlag(FLAGS_proc_root));
  if (absl::StatusOr<sojourn::monitor::ProcCounters> first = sampler.Read({}); !first.ok()) {
    SOJOURN_LOG(ERROR, "--proc_root: %s", first.status().message());
    return 2;
  }
  if (const std::string spool = absl::GetFlag(FLAGS_spool_path); !spool.empty()) {
    // The spool is rewritten through <spool>.tmp and a rename: both the file
    // and its directory must be writable, or samples would be kept in memory
    // only while the monitor claims a spool.
    for (const std::string& path : {spool, spool + ".tmp"}) {
      if (absl::Status s = sojourn::CheckWritableFile(path); !s.ok()) {
        SOJOURN_LOG(ERROR, "--spool_path: %s", s.message());
        return 2;
      }
    }
  }
  sojourn::Clock& clock = sojourn::Clock::Real();
  sojourn::monitor::SenderConfig sc;
  sc.host = host;
  sc.statemgr_address = absl::GetFlag(FLAGS_statemgr);
  sc.credentials = credentials;
  sc.attributes = sampler.Attributes();
  // With --adaptive_period too, the state manager is told --period_seconds,
  // the fixed period's default of 6 s, as the host's nominal period: it is the
  // step of the host's state grid (HostBook, ClassifyToGrid gives each grid
  // point the state after all samples at or before it) and sets its
  // revocation gap. Samples closer than that (after a change) only refine
  // which state a grid point gets, as a fixed 6 s monitor's would; samples
  // further apart (a stable host) leave grid points between them in the
  // last sample's state, which is the paper's premise for a longer period
  // (no state change within it). Telling it --min_period_seconds (1 s) would
  // make the grid, and the window statistics the predictor steps through, six
  // times denser for every hour of history, mostly repeating one state;
  // telling it --max_period_seconds would blur every state change to 30 s.
  sc.period_seconds = absl::GetFlag(FLAGS_period_seconds);
  sc.spool_path = absl::GetFlag(FLAGS_spool_path);
  sojourn::monitor::SampleSender sender(sc, clock);
  sojourn::Metrics metrics("monitor");
  std::optional<sojourn::monitor::Gateway> gateway;
  if (absl::GetFlag(FLAGS_gateway)) gateway.emplace(gateway_config);
  std::optional<sojourn::monitor::AdaptivePeriod> adaptive;
  if (absl::GetFlag(FLAGS_adaptive_period)) {
    adaptive.emplace(adaptive_config, std::random_device{}());
  }
  sojourn::monitor::Monitor monitor(sampler, sender, clock, metrics,
                                    absl::Seconds(sc.period_seconds),
                                    gateway.has_value() ? &*gateway : nullptr,
                                    adaptive.has_value() ? &*adaptive : nullptr);
  sojourn::monitor::MonitorService service(monitor, sender);
  auto server = sojourn::GrpcServer::Start(options, {&service}, metrics);
  if (!server.ok()) {
    SOJOURN_LOG(ERROR, "%s", server.status().ToString());
    return 1;
  }
  // After the start: a refused start prints one line.
  sojourn::ExportBuildInfo(metrics);
  if (sender.restored() > 0) {
    SOJOURN_LOG(INFO, "restored %d unacknowledged samples from %s", sender.restored(),
                sc.spool_path);
  }
  SOJOURN_LOG(INFO, "monitor of host %s on %s (%s), streaming to %s every %s; guest gateway %s",
              host, (*server)->listen_address(), (*server)->metrics_description(),
              sc.statemgr_address,
              adaptive.has_value()
                  ? absl::StrFormat("%d..%ds (adaptive period, doubled after %ds without a "
                                    "change; nominal period %ds)",
                                    absl::GetFlag(FLAGS_min_period_seconds),
                                    absl::GetFlag(FLAGS_max_period_seconds),
                                    absl::GetFlag(FLAGS_stable_seconds), sc.period_seconds)
                  : absl::StrFormat("%ds", sc.period_seconds),
              gateway.has_value()
                  ? absl::StrFormat("on (th1 %.2f, th2 %.2f, grace %ds, working set %.0f MiB)",
                                    gateway_config.th1, gateway_config.th2,
                                    gateway_config.grace_seconds,
                                    gateway_config.guest_working_set_mb)
                  : std::string("off"));
  monitor.Start();
  sojourn::WaitForTerminationSignal();
  monitor.Stop();
  (void)sender.Flush();  // last samples, best effort
  (*server)->Shutdown(absl::Seconds(5));
  return 0;
}
