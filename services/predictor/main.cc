// predictor: temporal reliability (TR), TR curves and MTTF for any host
// registered with the broker, from the statistics of its state manager.
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>

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
#include "models/turnaround/estimator.h"
#include "models/turnaround/hist_db_rocksdb.h"
#include "services/job_spec.h"
#include "services/predictor/availability_predictor.h"
#include "services/predictor/availability_scorer.h"
#include "services/predictor/predictor_service.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7402", "gRPC listen address (port 0 = any free port)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9402",
          "HTTP address serving /metrics for Prometheus (empty = off)");
ABSL_FLAG(std::string, port_file, "", "write the bound gRPC and metrics ports to this file");
ABSL_FLAG(int64_t, min_free_disk_mb, sojourn::kDefaultMinFreeDiskMb,
          "with --histdb_path: RecordJobEvent is refused (RESOURCE_EXHAUSTED; the broker keeps the "
          "event and sends it again) while fewer MiB than this are free on its disk, and the "
          "predictor does not start then: RocksDB aborts on a full disk (0 = no check)");
ABSL_FLAG(std::string, broker, "127.0.0.1:7401",
          "broker address, used to find a host's state manager when a request does not name it "
          "(empty = requests must carry statemgr_address)");
ABSL_FLAG(int, utc_offset_seconds, 0,
          "local time of the hosts minus UTC, seconds, all year (day types and same-clock windows "
          "use it; it does not follow daylight saving time: use --time_zone for that)");
ABSL_FLAG(std::string, time_zone, "",
          "the hosts' time zone, a tz database name such as Europe/Amsterdam or America/New_York "
          "(--utc_offset_seconds is then not used): day types and same-clock windows follow the "
          "lab's wall clock through changes of daylight saving time; every state manager needs "
          "the tzdata package (empty = --utc_offset_seconds)");
// Ten years: more history than any host keeps; beyond it a typo.
constexpr int kMaxHistoryDays = 3650;
ABSL_FLAG(int, history_days, 0,
          "use the most recent N days of a day type (0 = all; at most 3650, ten years)");
ABSL_FLAG(int, min_history_windows, 3, "fewer training windows than this mark low_history");
ABSL_FLAG(bool, paper_estimator, false,
          "use the original paper's estimator (transition counting that drops "
          "censored sojourns) instead of sojourn's censoring-aware, shrunk, age-conditioned one");
ABSL_FLAG(int, threads, 4, "worker threads for predictions");
ABSL_FLAG(std::string, histdb_path, "./predictor-histdb",
          "RocksDB directory of the job history (HistDB) behind EstimateTurnaround (empty = off)");
ABSL_FLAG(int64_t, max_clock_skew_seconds, sojourn::kMaxJobClockSkewSeconds,
          "job events and turnaround requests may carry times at most this many seconds after "
          "this predictor's clock (later: INVALID_ARGUMENT); at least 3600, the broker's limit "
          "for the job times it queues, so that the job history records every event it sends");
ABSL_FLAG(bool, score_availability, true,
          "score the TR answers live: one window per host and length at a time is kept until it "
          "has passed, then scored against the states the host's state manager saw in it, beside "
          "the host's own window frequency (sojourn_predictor_availability_* on /metrics; a call "
          "to the state manager per window); false = off");
ABSL_FLAG(int, population_prior_minutes, 10,
          "shrink each host's model towards the same time window pooled over every registered host "
          "(helps hosts with little history); the pooled model of a window (its start taken to "
          "the minute) is kept N minutes and built once for all requests that need it; 0 = off");

namespace {

// --time_zone, or else --utc_offset_seconds.
absl::StatusOr<sojourn::availability::LocalClock> ClockFromFlags(const std::string& zone,
                                                                int utc_offset_seconds) {
  if (zone.empty()) return sojourn::availability::LocalClock(utc_offset_seconds);
  auto clock = sojourn::availability::LocalClock::Zone(zone);
  if (!clock.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--time_zone: ", clock.status().message()));
  }
  return clock;
}

}  // namespace

int main(int argc, char** argv) {
  sojourn::ParseFlags(
      argc, argv,
      "predictor: computes a host's temporal reliability TR (probability of staying usable "
      "through a window), the TR curve and MTTF by the semi-Markov method.\n"
      "usage: predictor [--flag=value ...]",
      __FILE__);
  sojourn::BlockTerminationSignals();
  sojourn::RaiseOpenFileLimitOrWarn();

  sojourn::predictor::AvailabilityPredictorConfig config;
  const int utc_offset_seconds = absl::GetFlag(FLAGS_utc_offset_seconds);
  const absl::StatusOr<sojourn::availability::LocalClock> local_clock =
      ClockFromFlags(absl::GetFlag(FLAGS_time_zone), utc_offset_seconds);
  if (local_clock.ok()) config.clock = *local_clock;
  config.history_days = absl::GetFlag(FLAGS_history_days);
  config.min_history_windows = absl::GetFlag(FLAGS_min_history_windows);
  if (absl::GetFlag(FLAGS_paper_estimator)) {
    config.estimator = sojourn::availability::PaperEstimatorOptions();
  }
  config.population_prior_ttl = absl::Minutes(absl::GetFlag(FLAGS_population_prior_minutes));
  sojourn::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_listen);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  const std::string broker = absl::GetFlag(FLAGS_broker);
  const std::string histdb_path = absl::GetFlag(FLAGS_histdb_path);
  // Each check names its flag. Thread creation fails beyond a few thousand
  // (an uncaught std::system_error at start-up); a negative TTL or window
  // count is a typo.
  const absl::StatusOr<sojourn::DbBackupConfig> backup_config = sojourn::DbBackupConfigFromFlags(
      "predictor", histdb_path, "--histdb_path", absl::GetFlag(FLAGS_min_free_disk_mb));
  if (!sojourn::FlagsOk({
          sojourn::IntFlagInRange("--history_days", config.history_days, 0, kMaxHistoryDays,
                                  "(0 = all)"),
          sojourn::IntFlagInRange("--utc_offset_seconds", utc_offset_seconds, -14 * 3600,
                                  14 * 3600, "(+-14 h)"),
          local_clock.status(),
          sojourn::IntFlagInRange("--threads", absl::GetFlag(FLAGS_threads), 1,
                                  sojourn::kMaxServiceThreads),
          sojourn::IntFlagInRange("--population_prior_minutes",
                                  absl::GetFlag(FLAGS_population_prior_minutes), 0, 7 * 24 * 60,
                                  "(0 = off)"),
          sojourn::IntFlagInRange("--min_history_windows", config.min_history_windows, 0,
                                  std::numeric_limits<int>::max()),
          // Below the broker's limit, jobs the broker queued would have
          // their events refused by the history for good.
          sojourn::IntFlagInRange("--max_clock_skew_seconds",
                                  absl::GetFlag(FLAGS_max_clock_skew_seconds),
                                  sojourn::kMaxJobClockSkewSeconds,
                                  std::numeric_limits<int64_t>::max(),
                                  "(at least the broker's limit for job times)"),
          // Empty: requests must name their state manager. Port 99999 would
          // be dialed as 34463 (gRPC takes it modulo 65536), a bare
          // "localhost" on port 443.
          broker.empty() ? absl::OkStatus() : sojourn::ValidateDialAddress(broker, "--broker"),
          sojourn::ValidateServerOptions(options),
          histdb_path.empty() ? absl::OkStatus()
                              : sojourn::CheckDatabaseDirectory(histdb_path, "--histdb_path"),
          sojourn::IntFlagInRange("--min_free_disk_mb", absl::GetFlag(FLAGS_min_free_disk_mb), 0,
                                  int64_t{1} << 40),
          sojourn::CheckFreeDisk(histdb_path, absl::GetFlag(FLAGS_min_free_disk_mb),
                                 "--histdb_path"),
          backup_config.status(),
      })) {
    return sojourn::kExitUsage;
  }
  const std::shared_ptr<grpc::ChannelCredentials> credentials =
      sojourn::ServiceTlsFromFlags(&options);
  if (credentials == nullptr) return sojourn::kExitUsage;
  sojourn::predictor::StatemgrDirectory directory(
      absl::GetFlag(FLAGS_broker), absl::Seconds(10),
      sojourn::predictor::StatemgrDirectory::kDefaultMaxChannels, nullptr, credentials);
  sojourn::predictor::AvailabilityPredictor predictor(config, directory, sojourn::Clock::Real());
  sojourn::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  std::unique_ptr<sojourn::turnaround::RocksHistDb> histdb;
  std::unique_ptr<sojourn::turnaround::TurnaroundEstimator> turnaround;
  if (!histdb_path.empty()) {
    auto db = sojourn::turnaround::RocksHistDb::Open(histdb_path, {});
    if (!db.ok()) {
      SOJOURN_LOG(ERROR, "%s",
                  sojourn::DatabaseOpenError("--histdb_path", histdb_path, db.status()));
      return 1;
    }
    histdb = std::move(*db);
    turnaround = std::make_unique<sojourn::turnaround::TurnaroundEstimator>(
        *histdb, sojourn::turnaround::EstimatorOptions{});
  }
  sojourn::predictor::PredictorServiceConfig sc;
  sc.max_clock_skew_seconds = absl::GetFlag(FLAGS_max_clock_skew_seconds);
  sc.histdb_path = histdb_path;
  sc.min_free_disk_mb = absl::GetFlag(FLAGS_min_free_disk_mb);
  sojourn::predictor::PredictorService service(predictor, directory, pool, turnaround.get(), sc);
  sojourn::Metrics metrics("predictor");
  if (turnaround != nullptr) service.ExportTurnaroundAccuracy(metrics);
  std::unique_ptr<sojourn::predictor::AvailabilityScorer> scorer;
  if (absl::GetFlag(FLAGS_score_availability)) {
    sojourn::predictor::AvailabilityScorerConfig scorer_config;
    scorer_config.method = absl::GetFlag(FLAGS_paper_estimator) ? "smp_paper" : "smp";
    scorer = std::make_unique<sojourn::predictor::AvailabilityScorer>(
        directory, sojourn::Clock::Real(), metrics, scorer_config);
    service.ScoreAvailability(scorer.get());
  }
  auto backup = sojourn::StartDbBackup(*backup_config, histdb ? histdb->db() : nullptr,
                                       sojourn::Clock::Real(), &metrics);
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
  SOJOURN_LOG(INFO, "predictor serving on %s (%s), broker %s, local clock %s",
              (*server)->listen_address(), (*server)->metrics_description(),
              absl::GetFlag(FLAGS_broker), config.clock.ToString());
  // Scores the windows that have passed, every minute.
  absl::Mutex scoring_mu;
  bool stopping = false;
  std::thread scoring;
  if (scorer != nullptr) {
    scoring = std::thread([&] {
      sojourn::RunEvery(sojourn::Clock::Real(), absl::Minutes(1), &scoring_mu, &stopping, [&] {
        scorer->ScoreDue([&] {
          absl::MutexLock l(&scoring_mu);
          return stopping;
        });
      });
    });
  }
  sojourn::WaitForTerminationSignal();
  {
    absl::MutexLock l(&scoring_mu);
    stopping = true;
  }
  if (scoring.joinable()) scoring.join();
  if (*backup) (*backup)->Stop();
  (*server)->Shutdown(absl::Seconds(5));
  return 0;
}
