// broker: the registry of hosts and the ranking of hosts for incoming jobs.
#include <cstdint>
#include <limits>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
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
#include "services/broker/broker_service.h"
#include "services/broker/host_registry.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:7401", "gRPC listen address (port 0 = any free port)");
ABSL_FLAG(std::string, metrics_listen, "127.0.0.1:9401",
          "HTTP address serving /metrics for Prometheus (empty = off)");
ABSL_FLAG(std::string, port_file, "", "write the bound gRPC and metrics ports to this file");
ABSL_FLAG(std::string, predictor, "127.0.0.1:7402", "predictor address used by RankHosts");
ABSL_FLAG(int64_t, heartbeat_ttl_seconds, 60,
          "a host without a heartbeat for this long is expired (listed, not ranked)");
ABSL_FLAG(int64_t, max_clock_skew_seconds, sojourn::broker::kDefaultMaxSampleSkewSeconds,
          "RegisterHost / Heartbeat may report a last_sample_unix_seconds at most this many seconds "
          "after this broker's clock (later or negative: INVALID_ARGUMENT); the default covers "
          "the statemgr's own --max_clock_skew_seconds (1 h) plus 1 h between the two clocks. Job "
          "times (SubmitJob, StartJob, FinishJob, EstimateJobTurnaround) may be at most 1 h "
          "ahead, the predictor's limit, whatever this flag says");
ABSL_FLAG(int64_t, forget_hosts_after_seconds, 7 * 86400,
          "forget a host with no heartbeat, or no sample, for this long (checked every minute; "
          "less than --heartbeat_ttl_seconds counts as that): it leaves ListHosts and "
          "sojourn_broker_hosts, its state manager's registrations of it are refused (logged "
          "there once), and it registers again as new once it samples; 0 = keep hosts until "
          "--max_hosts needs the room of expired ones");
ABSL_FLAG(int, max_hosts, sojourn::broker::kDefaultMaxHosts,
          "hosts kept in the registry (1..1000000): a new host beyond them takes the place of the "
          "expired host silent the longest, and is refused (RESOURCE_EXHAUSTED) when every host is "
          "live");
ABSL_FLAG(int, threads, 4, "worker threads for rankings");
ABSL_FLAG(int, fanout_threads, 16,
          "concurrent predictor / state manager calls for the cache misses of a ranking "
          "(0 = one after the other)");
ABSL_FLAG(int64_t, cache_ttl_seconds, 60,
          "cached predictions (TR curve, load forecast) per host and horizon expire after this; "
          "a host registering another condition than the prediction's (state, its start, load "
          "band, grid step; or, from a state manager that reports none, a newer sample), or "
          "silent for longer than its revocation gap (it is S5 then), invalidates them earlier");
ABSL_FLAG(bool, cache_spread_refreshes, true,
          "each host and horizon's cached predictions expire at their own phase of "
          "--cache_ttl_seconds (at most the TTL after they were asked for), so the hosts fetched "
          "by one ranking are not all fetched again by one ranking a TTL later; false = each entry "
          "lives the TTL from its fetch");
ABSL_FLAG(int, cache_refresh_threads, 2,
          "threads fetching again, in the background, a cached prediction that a ranking finds "
          "due (from --cache_ttl_seconds / 6 before its expiry, or from the middle of its life if "
          "that is later; the ranking uses it as it is), so that rankings do not wait for the "
          "TTL's refreshes; the predictor then computes about 1.2 x hosts x horizons / TTL curves "
          "for the broker instead of 1 x (0 = off: the ranking after the expiry fetches it; no "
          "effect with --cache_ttl_seconds=0)");
ABSL_FLAG(int64_t, horizon_seconds, 86400,
          "TR curves behind MTTF / JCTF / ETL cover max(this, 2 x the job's duration), in whole "
          "days, at most 7 days");
ABSL_FLAG(int64_t, curve_resolution_seconds, 300, "spacing of the TR curve points requested");
ABSL_FLAG(std::string, data_dir, "",
          "RocksDB directory of the job queue (created when missing; an existing one must be empty "
          "or hold a RocksDB database); empty = the queue is kept in memory and lost when the "
          "broker stops");
ABSL_FLAG(int64_t, min_free_disk_mb, sojourn::kDefaultMinFreeDiskMb,
          "with --data_dir: SubmitJob, StartJob and FinishJob are refused (RESOURCE_EXHAUSTED) "
          "while fewer MiB than this are free on its disk, and the broker does not start then: "
          "RocksDB aborts on a full disk (0 = no check)");
ABSL_FLAG(int, max_queued_jobs, sojourn::broker::kDefaultMaxQueuedJobs,
          "SubmitJob refuses a job beyond this many queued (waiting + running) jobs");
ABSL_FLAG(std::string, job_selection, "fcfs",
          "the cluster's job selection, recorded with each job event and used by estimates that "
          "name none: fcfs or easy (EASY backfilling)");
ABSL_FLAG(std::string, node_selection, "normal",
          "the cluster's node selection (paper 002): normal (least loaded first) or uniform");
ABSL_FLAG(bool, tls_bind_hosts, false,
          "with mutual TLS: register a host, and take its heartbeats, only from a caller whose "
          "TLS certificate names it and the host of its state manager address (a state manager "
          "per host, with that host's certificate); PERMISSION_DENIED otherwise. Needs "
          "--tls_cert, --tls_key, --tls_ca and --tls_client_auth=require");
ABSL_FLAG(int, mpl_limit, 1, "parallel tasks one host may hold at once (multiprogramming limit)");
ABSL_FLAG(int64_t, expire_waiting_jobs_after_seconds, 0,
          "drop a waiting job from the queue this long after its submission (or after the "
          "broker took it, when later), as cancelled: for jobs the middleware lost before they "
          "started (0 = never; else at least 3600; set it above the longest wait your scheduler "
          "has)");
ABSL_FLAG(int64_t, expire_running_jobs_after_seconds, 0,
          "drop a running job from the queue this long after its start plus its requested time "
          "(its start when that is unknown; or after the broker took the start, when later), as "
          "cancelled: for jobs whose finish was never reported, which hold their hosts out of "
          "rankings (0 = never; else at least 3600)");
ABSL_FLAG(int64_t, history_retry_seconds, 30,
          "how often job events the predictor's job history could not take (it was unreachable) "
          "are sent again from the queue's outbox, oldest first");
ABSL_FLAG(int64_t, load_history_seconds, 4 * 3600,
          "recent history fetched from a host's state manager (GetSeries) for its load forecast "
          "(0 = no load forecast: L = 0)");

int main(int argc, char** argv) {
  sojourn::ParseFlags(
      argc, argv,
      "broker: registry of hosts (registration, heartbeats, expiry) and RankHosts, which orders "
      "hosts for a job (policies: proactive by default, condor, round_robin, tr) from their "
      "predicted TR curves and load, cached per host; the queue of guest jobs (SubmitJob, "
      "StartJob, FinishJob, ListJobs), forwarded with cluster snapshots to the predictor's job "
      "history, and EstimateJobTurnaround on it.\nusage: broker [--flag=value ...]",
      __FILE__);
  sojourn::BlockTerminationSignals();
  // Each check names its flag. Thread creation fails beyond a few thousand
  // (an uncaught std::system_error at start-up).
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  sojourn::ServerOptions options;
  options.listen_address = absl::GetFlag(FLAGS_listen);
  options.metrics_address = absl::GetFlag(FLAGS_metrics_listen);
  options.port_file = absl::GetFlag(FLAGS_port_file);
  const std::string data_dir = absl::GetFlag(FLAGS_data_dir);
  const absl::StatusOr<sojourn::DbBackupConfig> backup_config = sojourn::DbBackupConfigFromFlags(
      "broker", data_dir, "--data_dir", absl::GetFlag(FLAGS_min_free_disk_mb));
  if (!sojourn::FlagsOk({
          sojourn::IntFlagInRange("--heartbeat_ttl_seconds",
                                  absl::GetFlag(FLAGS_heartbeat_ttl_seconds), 1, kMax),
          sojourn::IntFlagInRange("--max_clock_skew_seconds",
                                  absl::GetFlag(FLAGS_max_clock_skew_seconds), 0, kMax),
          sojourn::IntFlagInRange("--max_hosts", absl::GetFlag(FLAGS_max_hosts), 1, 1000000),
          sojourn::IntFlagInRange("--forget_hosts_after_seconds",
                                  absl::GetFlag(FLAGS_forget_hosts_after_seconds), 0, kMax,
                                  "(0 = never)"),
          sojourn::IntFlagInRange("--threads", absl::GetFlag(FLAGS_threads), 1,
                                  sojourn::kMaxServiceThreads),
          sojourn::IntFlagInRange("--fanout_threads", absl::GetFlag(FLAGS_fanout_threads), 0,
                                  sojourn::kMaxServiceThreads, "(0 = one after the other)"),
          sojourn::IntFlagInRange("--cache_ttl_seconds", absl::GetFlag(FLAGS_cache_ttl_seconds),
                                  0, kMax),
          sojourn::IntFlagInRange("--cache_refresh_threads",
                                  absl::GetFlag(FLAGS_cache_refresh_threads), 0,
                                  sojourn::kMaxServiceThreads, "(0 = off)"),
          sojourn::IntFlagInRange("--horizon_seconds", absl::GetFlag(FLAGS_horizon_seconds), 1,
                                  7 * 86400, "(7 days)"),
          sojourn::IntFlagInRange("--curve_resolution_seconds",
                                  absl::GetFlag(FLAGS_curve_resolution_seconds), 1, kMax),
          sojourn::IntFlagInRange("--load_history_seconds",
                                  absl::GetFlag(FLAGS_load_history_seconds), 0, kMax,
                                  "(0 = no load forecast)"),
          // RankHosts cannot work without a predictor: dialing "", port
          // 99999 (gRPC: 34463) or a bare "localhost" (gRPC: port 443) fails
          // or reaches someone else on every call. HOST:PORT or a target with
          // a scheme, as the sojourn CLI dials it.
          sojourn::ValidateDialAddress(absl::GetFlag(FLAGS_predictor), "--predictor"),
          sojourn::IntFlagInRange("--max_queued_jobs", absl::GetFlag(FLAGS_max_queued_jobs), 1,
                                  1000000),
          sojourn::IntFlagInRange("--mpl_limit", absl::GetFlag(FLAGS_mpl_limit), 1, 1000),
          absl::GetFlag(FLAGS_expire_waiting_jobs_after_seconds) == 0
              ? absl::OkStatus()
              : sojourn::IntFlagInRange("--expire_waiting_jobs_after_seconds",
                                        absl::GetFlag(FLAGS_expire_waiting_jobs_after_seconds),
                                        sojourn::broker::kMinJobExpirySeconds,
                                        sojourn::broker::kMaxJobExpirySeconds,
                                        "or 0 to keep waiting jobs until they are reported"),
          absl::GetFlag(FLAGS_expire_running_jobs_after_seconds) == 0
              ? absl::OkStatus()
              : sojourn::IntFlagInRange("--expire_running_jobs_after_seconds",
                                        absl::GetFlag(FLAGS_expire_running_jobs_after_seconds),
                                        sojourn::broker::kMinJobExpirySeconds,
                                        sojourn::broker::kMaxJobExpirySeconds,
                                        "or 0 to keep running jobs until they are reported"),
          sojourn::IntFlagInRange("--history_retry_seconds",
                                  absl::GetFlag(FLAGS_history_retry_seconds), 1, 86400),
          sojourn::ValidateServerOptions(options),
          // Empty: the queue is kept in memory. Otherwise the state manager's
          // --db_path checks: RocksDB would fail with an INTERNAL error on a
          // file or an uncreatable path, and scatter its files among someone
          // else's in a directory without a database.
          data_dir.empty() ? absl::OkStatus()
                           : sojourn::CheckDatabaseDirectory(data_dir, "--data_dir"),
          sojourn::IntFlagInRange("--min_free_disk_mb", absl::GetFlag(FLAGS_min_free_disk_mb), 0,
                                  int64_t{1} << 40),
          sojourn::CheckFreeDisk(data_dir, absl::GetFlag(FLAGS_min_free_disk_mb), "--data_dir"),
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
  // Each registered host's state manager keeps a connection to the broker,
  // and clients and the predictor need some more.
  sojourn::RaiseOpenFileLimitOrWarn(
      int64_t{absl::GetFlag(FLAGS_max_hosts)} + 256,
      absl::StrCat("the connections of --max_hosts ", absl::GetFlag(FLAGS_max_hosts),
                   " hosts' state managers (one each) and of clients"));
  // Job times are held to the predictor's limit (kMaxJobClockSkewSeconds),
  // not to --max_clock_skew_seconds: a job the queue took 1-2 h ahead had its
  // events refused by the job history for good.
  sojourn::broker::JobQueueServiceConfig qc;
  if (const std::string js = absl::GetFlag(FLAGS_job_selection); js == "easy") {
    qc.policy.set_job_selection(sojourn::v1::JOB_SELECTION_EASY);
  } else if (js != "fcfs") {
    SOJOURN_LOG(ERROR, "--job_selection must be fcfs or easy, got '%s'", js);
    return sojourn::kExitUsage;
  }
  if (const std::string ns = absl::GetFlag(FLAGS_node_selection); ns == "uniform") {
    qc.policy.set_node_selection(sojourn::v1::NODE_SELECTION_UNIFORM);
  } else if (ns != "normal") {
    SOJOURN_LOG(ERROR, "--node_selection must be normal or uniform, got '%s'", ns);
    return sojourn::kExitUsage;
  }
  qc.policy.set_mpl_limit(absl::GetFlag(FLAGS_mpl_limit));
  qc.data_dir = data_dir;
  qc.min_free_disk_mb = absl::GetFlag(FLAGS_min_free_disk_mb);
  qc.expiry.waiting_seconds = absl::GetFlag(FLAGS_expire_waiting_jobs_after_seconds);
  qc.expiry.running_seconds = absl::GetFlag(FLAGS_expire_running_jobs_after_seconds);
  auto queue =
      sojourn::broker::JobQueue::Open(data_dir, absl::GetFlag(FLAGS_max_queued_jobs));
  if (!queue.ok()) {
    SOJOURN_LOG(ERROR, "%s", sojourn::DatabaseOpenError("--data_dir", data_dir, queue.status()));
    return 1;
  }
  sojourn::broker::HostRegistry registry(sojourn::Clock::Real(),
                                         absl::Seconds(absl::GetFlag(FLAGS_heartbeat_ttl_seconds)),
                                         absl::GetFlag(FLAGS_max_clock_skew_seconds),
                                         absl::GetFlag(FLAGS_max_hosts));
  sojourn::broker::GrpcTrSource tr_source(absl::GetFlag(FLAGS_predictor), absl::Seconds(10),
                                          credentials);
  sojourn::broker::GrpcLoadSource load_source(absl::Seconds(5), credentials);
  sojourn::broker::RankerConfig rc;
  rc.horizon_seconds = absl::GetFlag(FLAGS_horizon_seconds);
  rc.curve_resolution_seconds = absl::GetFlag(FLAGS_curve_resolution_seconds);
  rc.cache_ttl = absl::Seconds(absl::GetFlag(FLAGS_cache_ttl_seconds));
  rc.spread_cache_refreshes = absl::GetFlag(FLAGS_cache_spread_refreshes);
  rc.refresh_threads = absl::GetFlag(FLAGS_cache_refresh_threads);
  rc.load_history_seconds = absl::GetFlag(FLAGS_load_history_seconds);
  rc.fanout_threads = absl::GetFlag(FLAGS_fanout_threads);
  sojourn::broker::Ranker ranker(tr_source, &load_source, sojourn::Clock::Real(), rc);
  sojourn::ThreadPool pool(absl::GetFlag(FLAGS_threads));
  sojourn::broker::BrokerService service(registry, ranker, pool);
  service.set_bind_hosts(absl::GetFlag(FLAGS_tls_bind_hosts));
  sojourn::Metrics metrics("broker");
  sojourn::broker::GrpcJobHistory history(absl::GetFlag(FLAGS_predictor), absl::Seconds(10),
                                          absl::Seconds(60), credentials);
  service.EnableJobQueue(**queue, history, qc, &metrics);
  service.ExportRankingMetrics(metrics);
  service.EnableHostChecks(metrics, absl::Seconds(absl::GetFlag(FLAGS_forget_hosts_after_seconds)));
  auto backup = sojourn::StartDbBackup(*backup_config, (*queue)->db(), sojourn::Clock::Real(),
                                       &metrics);
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
  const sojourn::broker::JobQueue::Listing jobs = (*queue)->List();
  SOJOURN_LOG(INFO,
              "broker serving on %s (%s), predictor %s, job queue %s (%d waiting, %d running, %d "
              "events for the job history in the outbox)",
              (*server)->listen_address(), (*server)->metrics_description(),
              absl::GetFlag(FLAGS_predictor),
              (*queue)->persistent() ? absl::GetFlag(FLAGS_data_dir) : std::string("in memory"),
              static_cast<int>(jobs.waiting.size()), static_cast<int>(jobs.running.size()),
              (*queue)->OutboxSize());
  if (qc.expiry.waiting_seconds > 0 || qc.expiry.running_seconds > 0) {
    SOJOURN_LOG(INFO, "jobs nothing is reported of are dropped: waiting ones %s, running ones %s",
                qc.expiry.waiting_seconds > 0
                    ? absl::StrCat(qc.expiry.waiting_seconds, " s after their submission")
                    : std::string("never"),
                qc.expiry.running_seconds > 0
                    ? absl::StrCat(qc.expiry.running_seconds,
                                   " s after their start plus their requested time")
                    : std::string("never"));
  }

  // Sends the outbox again (events the job history could not take).
  absl::Mutex retry_mu;
  bool stopping = false;
  std::thread retry([&] {
    sojourn::RunEvery(sojourn::Clock::Real(),
                      absl::Seconds(absl::GetFlag(FLAGS_history_retry_seconds)), &retry_mu,
                      &stopping, [&] {
                        if (const int n = service.FlushJobHistory(); n > 0) {
                          SOJOURN_LOG(INFO, "job history took %d event(s) from the outbox, %d left",
                                      n, (*queue)->OutboxSize());
                        }
                      });
  });
  // Drops expired jobs (when asked to) and keeps the gauges of job ages
  // current; once a minute, as the ages move on without any event.
  std::thread check_jobs([&] {
    sojourn::RunEvery(sojourn::Clock::Real(), absl::Minutes(1), &retry_mu, &stopping,
                      [&] {
                        service.CheckJobs();
                        service.CheckHosts();
                      });
  });
  sojourn::WaitForTerminationSignal();
  {
    absl::MutexLock l(&retry_mu);
    stopping = true;
  }
  retry.join();
  check_jobs.join();
  if (*backup) (*backup)->Stop();
  (*server)->Shutdown(absl::Seconds(5));
  return 0;
}
