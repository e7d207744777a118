// monitor: samples this host from /proc and streams to its state manager.
#include <unistd.h>

#include <optional>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_format.h"
#include "common/cli_util.h"
#include "common/clock.h"
#include "common/flags_usage.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/server.h"
#include "common/text.h"
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
ABSL_FLAG(int64_t, period_seconds, 6, "sampling period (paper 000: 6 s)");
ABSL_FLAG(std::string, proc_root, "/proc", "where to read /proc from");
ABSL_FLAG(bool, gateway, false,
          "act on registered guest processes after each sample, as an FGCS gateway does: "
          "renice to 19 in S2, suspend during a load spike above --th2, resume when it ends, "
          "terminate in S3 (above --th2 for longer than --grace_seconds) and S4 (free memory "
          "below --working_set_mb); needs permission to signal the guests (and CAP_SYS_NICE to "
          "give a reniced guest its priority back)");
ABSL_FLAG(double, th1, 0.2, "with --gateway: CPU load below this is S1 (guest at its priority)");
ABSL_FLAG(double, th2, 0.6, "with --gateway: CPU load above this suspends the guests");
ABSL_FLAG(int64_t, grace_seconds, 60,
          "with --gateway: load above --th2 for longer than this terminates the guests (S3)");
ABSL_FLAG(double, working_set_mb, 256,
          "with --gateway: free memory below this (MiB) terminates the guests (S4)");
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
  if (!(gateway_config.th1 >= 0 && gateway_config.th1 <= gateway_config.th2 &&
        gateway_config.th2 <= 1) ||
      gateway_config.grace_seconds < 0 || gateway_config.grace_seconds > 86400 ||
      !(gateway_config.guest_working_set_mb >= 0 &&
        gateway_config.guest_working_set_mb < 1e9)) {
    SOJOURN_LOG(ERROR,
                "need 0 <= --th1 <= --th2 <= 1, --grace_seconds in [0, 86400] and "
                "--working_set_mb in [0, 1e9)");
    return 2;
  }
  std::string host = absl::GetFlag(FLAGS_host);
  if (host.empty()) {
    char buf[256] = {0};
    gethostname(buf, sizeof(buf) - 1);
    host = buf;
  }
  for (absl::Status s : {sojourn::ValidateHostName(host, "--host"),
                         sojourn::ValidateAddress(absl::GetFlag(FLAGS_statemgr), "--statemgr")}) {
    if (!s.ok()) {
      SOJOURN_LOG(ERROR, "%s", s.message());
      return 2;
    }
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
  sojourn::monitor::ProcSampler sampler(absl::GetFlag(FLAGS_proc_root));
  sojourn::monitor::SenderConfig sc;
  sc.host = host;
  sc.statemgr_address = absl::GetFlag(FLAGS_statemgr);
  sc.attributes = sampler.Attributes();
  sc.period_seconds = absl::GetFlag(FLAGS_period_seconds);
  sc.spool_path = absl::GetFlag(FLAGS_spool_path);
  sojourn::monitor::SampleSender sender(sc, clock);
  sojourn::Metrics metrics("monitor");
  std::optional<sojourn::monitor::Gateway> gateway;
  if (absl::GetFlag(FLAGS_gateway)) gateway.emplace(gateway_config);
  sojourn::monitor::Monitor monitor(sampler, sender, clock, metrics,
                                    absl::Seconds(sc.period_seconds),
                                    gateway.has_value() ? &*gateway : nullptr);
  sojourn::monitor::MonitorService service(monitor, sender);
  sojourn::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_listen);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  auto server = sojourn::GrpcServer::Start(options, {&service}, metrics);
  if (!server.ok()) {
    SOJOURN_LOG(ERROR, "%s", server.status().ToString());
    return 1;
  }
  if (sender.restored() > 0) {
    SOJOURN_LOG(INFO, "restored %d unacknowledged samples from %s", sender.restored(),
                sc.spool_path);
  }
  SOJOURN_LOG(INFO, "monitor of host %s on %s (%s), streaming to %s every %ds; guest gateway %s",
              host, (*server)->listen_address(), (*server)->metrics_description(),
              sc.statemgr_address, sc.period_seconds,
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
