// statemgr: persists a host's samples in RocksDB, classifies them into the
// five availability states and serves per-window statistics.
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "common/build_info_metric.h"
#include "common/cli_util.h"
#include "common/clock.h"
#include "common/db_backup.h"
#include "common/flags_usage.h"
#include "common/logging.h"
#include "common/metrics.h"
#include "common/server.h"
#include "common/text.h"
#include "common/thread_pool.h"
#include "services/statemgr/host_book.h"
#include "services/statemgr/registrar.h"
#include "services/statemgr/sample_store.h"
#include "services/statemgr/statemgr_service.h"
#include "services/statemgr/usage_keeper.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7403", "gRPC listen address (port 0 = any free port)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9403",
          "HTTP address serving /metrics for Prometheus (empty = off)");
ABSL_FLAG(std::string, port_file, "", "write the bound gRPC and metrics ports to this file");
ABSL_FLAG(std::string, db_path, "./statemgr-db",
          "RocksDB directory (created if missing; an existing one must be empty or hold a "
          "RocksDB database)");
ABSL_FLAG(int64_t, min_free_disk_mb, sojourn::kDefaultMinFreeDiskMb,
          "PushSamples refuses samples (RESOURCE_EXHAUSTED; the monitor keeps them and sends them "
          "again) while fewer MiB than this are free on --db_path's disk, and the state manager "
          "does not start then: RocksDB aborts on a full disk (0 = no check)");
ABSL_FLAG(bool, tls_bind_hosts, false,
          "with mutual TLS: take samples of a host only from a caller whose TLS certificate names "
          "it (a state manager per host, its monitor's certificate naming the host); "
          "PERMISSION_DENIED otherwise. Needs --tls_cert, --tls_key, --tls_ca and "
          "--tls_client_auth=require");
ABSL_FLAG(bool, sync_writes, true,
          "fsync every acknowledged batch (off: survives a process kill, not a power loss)");
ABSL_FLAG(double, th1, 0.20, "CPU load below this is S1 (idle)");
ABSL_FLAG(double, th2, 0.60, "CPU load above this for longer than --grace_seconds is S3");
ABSL_FLAG(int64_t, grace_seconds, 60, "load spikes above --th2 shorter than this stay S1/S2");
ABSL_FLAG(double, working_set_mb, 256, "free memory below this guest working set (MiB) is S4");
ABSL_FLAG(int64_t, revocation_gap_seconds, 60,
          "no sample for longer than this is S5 (at least 1.5 sampling periods of the host)");
ABSL_FLAG(int64_t, default_period_seconds, 6,
          "state grid step for hosts whose monitor does not report its period");
ABSL_FLAG(int64_t, max_clock_skew_seconds, 3600,
          "PushSamples refuses samples stamped more than this many seconds after this state "
          "manager's clock (INVALID_ARGUMENT; a sample from the future would make every later "
          "real sample a duplicate)");
ABSL_FLAG(std::string, broker, "",
          "broker address; when set, every host held is registered there and kept alive");
ABSL_FLAG(std::string, advertise_address, "",
          "address the broker and predictor use to reach this state manager (default: --listen "
          "with the bound port; this host's name when --listen is a wildcard address)");
ABSL_FLAG(int64_t, heartbeat_seconds, 10, "how often hosts are re-registered with the broker");
ABSL_FLAG(int, utc_offset_seconds, 0,
          "local time minus UTC, seconds: usage days (48 h pattern objects) start at local midnight");
ABSL_FLAG(int, usage_clusters, 5, "number of use classes of the daily pattern analysis (5 or 10 work well)");
ABSL_FLAG(bool, usage_selector, true,
          "answer usage questions with the per-host best-of selector (false: the paper's data-age "
          "rule only)");
ABSL_FLAG(int, threads, 2, "worker threads for usage questions");
ABSL_FLAG(int64_t, silence_check_seconds, 5,
          "how often to look for hosts silent for longer than their revocation gap, to tell "
          "WatchStates watchers they are gone (S5)");
ABSL_FLAG(int64_t, retention_days, 0,
          "delete samples older than this many days (whole local days, see "
          "--utc_offset_seconds), checked at start-up and every hour; the state grid, the usage "
          "series and the answers follow as after a restart. 0 = keep every sample. A year of "
          "6 s samples is about 180 MB per host; the state grid holds the last 278 to 312 days "
          "at 6 s anyway");
ABSL_FLAG(int64_t, max_watch_queue, 10000,
          "a WatchStates watcher this many state changes behind is disconnected "
          "(RESOURCE_EXHAUSTED)");

int main(int argc, char** argv) {
  sojourn::ParseFlags(
      argc, argv,
      "statemgr: stores host samples in RocksDB, classifies the five availability states and "
      "serves window statistics to the predictor.\nusage: statemgr [--flag=value ...]",
      __FILE__);
  sojourn::BlockTerminationSignals();
  sojourn::RaiseOpenFileLimitOrWarn();

  sojourn::statemgr::HostBookConfig config;
  config.classifier.th1 = absl::GetFlag(FLAGS_th1);
  config.classifier.th2 = absl::GetFlag(FLAGS_th2);
  config.classifier.grace_seconds = absl::GetFlag(FLAGS_grace_seconds);
  config.classifier.guest_working_set_mb = absl::GetFlag(FLAGS_working_set_mb);
  config.classifier.revocation_gap_seconds = absl::GetFlag(FLAGS_revocation_gap_seconds);
  config.default_period_seconds = absl::GetFlag(FLAGS_default_period_seconds);
  config.max_clock_skew_seconds = absl::GetFlag(FLAGS_max_clock_skew_seconds);
  sojourn::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_listen);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  const std::string db_path = absl::GetFlag(FLAGS_db_path);
  const std::string broker = absl::GetFlag(FLAGS_broker);
  const std::string advertise = absl::GetFlag(FLAGS_advertise_address);
  // Each check names its flag. Bounds no deployment reaches: beyond them the
  // classifier's arithmetic (1.5 x period, time + gap) overflows, and
  // PushSamples refuses a period over a day anyway.
  constexpr int64_t kYear = 365 * 86400;
  constexpr int64_t kMinRetentionDays = 14;
  const absl::StatusOr<sojourn::DbBackupConfig> backup_config = sojourn::DbBackupConfigFromFlags(
      "statemgr", db_path, "--db_path", absl::GetFlag(FLAGS_min_free_disk_mb));
  if (!sojourn::FlagsOk({
          sojourn::ValidateClassifierFlags(config.classifier.th1, config.classifier.th2,
                                           config.classifier.grace_seconds,
                                           config.classifier.guest_working_set_mb),
          sojourn::IntFlagInRange("--revocation_gap_seconds",
                                  config.classifier.revocation_gap_seconds, 1, kYear, "(a year)"),
          sojourn::IntFlagInRange("--default_period_seconds", config.default_period_seconds, 1,
                                  sojourn::kMaxPeriodSeconds),
          sojourn::IntFlagInRange("--max_clock_skew_seconds", config.max_clock_skew_seconds, 0,
                                  std::numeric_limits<int64_t>::max()),
          sojourn::IntFlagInRange("--heartbeat_seconds", absl::GetFlag(FLAGS_heartbeat_seconds), 1,
                                  86400),
          sojourn::IntFlagInRange("--threads", absl::GetFlag(FLAGS_threads), 1,
                                  sojourn::kMaxServiceThreads),
          sojourn::IntFlagInRange("--usage_clusters", absl::GetFlag(FLAGS_usage_clusters), 1, 100),
          sojourn::IntFlagInRange("--utc_offset_seconds", absl::GetFlag(FLAGS_utc_offset_seconds),
                                  -14 * 3600, 14 * 3600, "(+-14 h)"),
          sojourn::IntFlagInRange("--silence_check_seconds",
                                  absl::GetFlag(FLAGS_silence_check_seconds), 1, 3600),
          sojourn::IntFlagInRange("--max_watch_queue", absl::GetFlag(FLAGS_max_watch_queue), 1,
                                  10'000'000),
          absl::GetFlag(FLAGS_retention_days) == 0
              ? absl::OkStatus()
              : sojourn::IntFlagInRange("--retention_days", absl::GetFlag(FLAGS_retention_days),
                                        kMinRetentionDays, 100 * 366,
                                        "or 0 to keep every sample (a TR needs weeks of "
                                        "same-clock windows)"),
          // Empty: no broker. A bare "localhost" would be dialed on port 443
          // and every registration would fail in the background.
          broker.empty() ? absl::OkStatus() : sojourn::ValidateDialAddress(broker, "--broker"),
          advertise.empty() ? absl::OkStatus()
                            : sojourn::ValidateHostPortAddress(advertise, "--advertise_address"),
          sojourn::ValidateServerOptions(options),
          sojourn::CheckDatabaseDirectory(db_path, "--db_path"),
          sojourn::IntFlagInRange("--min_free_disk_mb", absl::GetFlag(FLAGS_min_free_disk_mb), 0,
                                  int64_t{1} << 40),
          sojourn::CheckFreeDisk(db_path, absl::GetFlag(FLAGS_min_free_disk_mb), "--db_path"),
          backup_config.status(),
      })) {
    return sojourn::kExitUsage;
  }
  const std::shared_ptr<grpc::ChannelCredentials> credentials =
      sojourn::ServiceTlsFromFlags(&options);
  if (credentials == nullptr || !sojourn::FlagsOk({sojourn::CheckBindHostsFlag(
                                    absl::GetFlag(FLAGS_tls_bind_hosts), options.tls)})) {
    return sojourn::kExitUsage;
  }

  auto store = sojourn::statemgr::SampleStore::Open(db_path, absl::GetFlag(FLAGS_sync_writes));
  if (!store.ok()) {
    SOJOURN_LOG(ERROR, "%s", sojourn::DatabaseOpenError("--db_path", db_path, store.status()));
    return 1;
  }
  sojourn::Clock& clock = sojourn::Clock::Real();
  sojourn::statemgr::HostBook book(config, **store, clock);
  int64_t skipped = 0;
  if (absl::Status s = book.Load(&skipped); !s.ok()) {
    SOJOURN_LOG(ERROR, "loading history: %s", s.ToString());
    return 1;
  }
  if (skipped > 0) {
    SOJOURN_LOG(WARNING,
                "%d damaged or invalid records in %s were left out (see the warnings above); "
                "nothing was deleted",
                skipped, absl::GetFlag(FLAGS_db_path));
  }
  sojourn::statemgr::UsageKeeperConfig uc;
  uc.utc_offset_seconds = absl::GetFlag(FLAGS_utc_offset_seconds);
  uc.model.patterns.clusters = absl::GetFlag(FLAGS_usage_clusters);
  uc.model.use_selector = absl::GetFlag(FLAGS_usage_selector);
  sojourn::statemgr::UsageKeeper usage(uc, book, **store, clock);
  sojourn::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  sojourn::Metrics metrics("statemgr");
  sojourn::statemgr::StateManagerServiceConfig sc;
  sc.max_clock_skew_seconds = config.max_clock_skew_seconds;
  sc.max_watch_queue = static_cast<size_t>(absl::GetFlag(FLAGS_max_watch_queue));
  sc.db_path = db_path;
  sc.min_free_disk_mb = absl::GetFlag(FLAGS_min_free_disk_mb);
  if (sc.min_free_disk_mb > 0 && sc.min_free_disk_mb < 64) {
    // RocksDB resumes after a write failed on a full disk only once its write
    // buffer (64 MiB) is free: between the two, every push fails although the
    // reserve is there (session 43 durability audit).
    SOJOURN_LOG(WARNING,
                "--min_free_disk_mb %d is below 64: should the disk fill, writes stay stopped until "
                "64 MiB are free, not %d",
                sc.min_free_disk_mb, sc.min_free_disk_mb);
  }
  sc.bind_hosts = absl::GetFlag(FLAGS_tls_bind_hosts);
  sc.own = sojourn::CertificateIdentityOf(options.tls.cert_pem);
  sojourn::statemgr::StateManagerService service(book, usage, pool, metrics, sc);
  auto backup = sojourn::StartDbBackup(*backup_config, (*store)->db(), clock, &metrics);
  if (!backup.ok()) {  // the configuration (--backup_dir): exit 2
    SOJOURN_LOG(ERROR, "%s", backup.status().message());
    return sojourn::kExitUsage;
  }
  auto server = sojourn::GrpcServer::Start(options, {&service}, metrics);
  if (!server.ok()) {
    SOJOURN_LOG(ERROR, "%s", server.status().ToString());
    return 1;
  }
  // After the start: a refused start prints one line.
  sojourn::ExportBuildInfo(metrics);
  SOJOURN_LOG(INFO, "statemgr serving on %s (%s), %d hosts loaded from %s",
              (*server)->listen_address(), (*server)->metrics_description(), book.List().size(),
              absl::GetFlag(FLAGS_db_path));

  std::unique_ptr<sojourn::statemgr::Registrar> registrar;
  if (!absl::GetFlag(FLAGS_broker).empty()) {
    sojourn::statemgr::RegistrarConfig rc;
    rc.broker_address = absl::GetFlag(FLAGS_broker);
    rc.advertise_address = absl::GetFlag(FLAGS_advertise_address);
    if (rc.advertise_address.empty()) {
      // Listening on a wildcard address: peers on other machines must dial
      // this host by name, not 127.0.0.1.
      const std::string listen = absl::GetFlag(FLAGS_listen);
      const std::string host = listen.substr(0, listen.rfind(':'));
      if (host == "0.0.0.0" || host == "[::]" || host.empty()) {
        char name[256] = {0};
        gethostname(name, sizeof(name) - 1);
        rc.advertise_address = std::string(name) + ":" + std::to_string((*server)->port());
      } else {
        rc.advertise_address = (*server)->address();
      }
    }
    rc.period = absl::Seconds(absl::GetFlag(FLAGS_heartbeat_seconds));
    rc.credentials = credentials;
    registrar = std::make_unique<sojourn::statemgr::Registrar>(rc, book, clock);
    registrar->Start();
  }

  // Announces hosts that fell silent to WatchStates watchers.
  absl::Mutex silence_mu;
  bool stopping = false;
  std::thread silence([&] {
    sojourn::RunEvery(clock, absl::Seconds(absl::GetFlag(FLAGS_silence_check_seconds)),
                      &silence_mu, &stopping, [&] { book.CheckSilence(); });
  });

  // Retention: at start-up, then every hour, deletes what is older than
  // --retention_days whole local days.
  std::thread retention;
  if (const int64_t days = absl::GetFlag(FLAGS_retention_days); days > 0) {
    const int64_t offset = absl::GetFlag(FLAGS_utc_offset_seconds);
    static constexpr char kDeleted[] = "sojourn_statemgr_retention_deleted_samples_total";
    static constexpr char kDeletedHelp[] =
        "samples deleted because they were older than --retention_days";
    static constexpr char kFailed[] = "sojourn_statemgr_retention_failures_total";
    static constexpr char kFailedHelp[] =
        "hosts whose retention (deletion or rebuild) failed, each logged; the next pass, within "
        "the hour, tries again";
    static constexpr char kCut[] = "sojourn_statemgr_retention_cutoff_timestamp_seconds";
    static constexpr char kCutHelp[] = "samples stamped before this are deleted (--retention_days)";
    metrics.DeclareCounter(kDeleted, kDeletedHelp, {});
    metrics.DeclareCounter(kFailed, kFailedHelp, {});
    retention = std::thread([&, days, offset] {
      sojourn::RunEvery(clock, absl::Hours(1), &silence_mu, &stopping, [&] {
        const int64_t now = absl::ToUnixSeconds(clock.Now());
        const int64_t cut = sojourn::statemgr::RetentionCutoff(now, days, offset);
        metrics.Set(kCut, kCutHelp, {}, static_cast<double>(cut));
        const sojourn::statemgr::RetainResult r = book.Retain(cut, [&] {
          absl::MutexLock l(&silence_mu);
          return stopping;
        });
        if (r.hosts > 0 || r.failed_hosts > 0) {
          SOJOURN_LOG(INFO,
                      "retention: %d samples before %s deleted from %d hosts (%d hosts failed)",
                      r.deleted_samples, absl::FormatTime(absl::FromUnixSeconds(cut)), r.hosts,
                      r.failed_hosts);
        }
        metrics.Increment(kDeleted, kDeletedHelp, {}, static_cast<double>(r.deleted_samples));
        metrics.Increment(kFailed, kFailedHelp, {}, static_cast<double>(r.failed_hosts));
      });
    });
  }

  sojourn::WaitForTerminationSignal();
  {
    absl::MutexLock l(&silence_mu);
    stopping = true;
  }
  silence.join();
  if (retention.joinable()) retention.join();
  if (*backup) (*backup)->Stop();
  if (registrar) registrar->Stop();
  // Watch streams never end by themselves: end them first, so the shutdown
  // does not wait out its grace period for them.
  book.CloseWatchers();
  (*server)->Shutdown(absl::Seconds(5));
  return 0;
}
