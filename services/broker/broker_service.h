// gRPC adapter of the broker: registry calls answer inline; RankHosts, which
// may call the predictor and the state managers, runs on a worker pool (the
// ranker fans its cache misses out on its own pool).
#ifndef SOJOURN_SERVICES_BROKER_BROKER_SERVICE_H_
#define SOJOURN_SERVICES_BROKER_BROKER_SERVICE_H_

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "common/thread_pool.h"
#include "common/tls.h"
#include "services/broker/host_registry.h"
#include "services/broker/job_queue.h"
#include "services/broker/ranker.h"
#include "sojourn/v1/broker.grpc.pb.h"
#include "sojourn/v1/predictor.grpc.pb.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::broker {

// TrSource backed by the predictor service. A call that fails because the
// predictor cannot be reached (its channel is not connected) returns
// PredictorUnreachableError; errors the predictor answers pass through.
class GrpcTrSource final : public TrSource {
 public:
  // `credentials`: TLS to the predictor (common/tls.h); null = plaintext.
  explicit GrpcTrSource(const std::string& predictor_address,
                        absl::Duration timeout = absl::Seconds(10),
                        std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);
  absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request) override;

 private:
  std::string address_;
  absl::Duration timeout_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<sojourn::v1::Predictor::Stub> stub_;
};

// LoadSource backed by the hosts' state managers (GetSeries). Thread-safe.
class GrpcLoadSource final : public LoadSource {
 public:
  // `credentials`: TLS to the state managers (common/tls.h); null = plaintext.
  explicit GrpcLoadSource(absl::Duration timeout = absl::Seconds(5),
                          std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr)
      : timeout_(timeout), credentials_(OrInsecure(std::move(credentials))) {}
  absl::StatusOr<std::vector<HostSample>> RecentSamples(const sojourn::v1::RegisteredHost& host,
                                                        int64_t start_unix) override;

 private:
  sojourn::v1::StateManager::Stub* Stub(const std::string& address);
  const absl::Duration timeout_;
  const std::shared_ptr<grpc::ChannelCredentials> credentials_;
  absl::Mutex mu_;
  std::map<std::string, std::unique_ptr<sojourn::v1::StateManager::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

// The predictor's job history and turnaround kernels, as the job queue uses
// them. Thread-safe.
class JobHistory {
 public:
  virtual ~JobHistory() = default;
  virtual absl::StatusOr<sojourn::v1::RecordJobEventResponse> Record(
      const sojourn::v1::JobEvent& event) = 0;
  virtual absl::StatusOr<sojourn::v1::EstimateTurnaroundResponse> Estimate(
      const sojourn::v1::EstimateTurnaroundRequest& request) = 0;
};

// JobHistory backed by the predictor service (RecordJobEvent,
// EstimateTurnaround).
class GrpcJobHistory final : public JobHistory {
 public:
  // `credentials`: TLS to the predictor (common/tls.h); null = plaintext.
  explicit GrpcJobHistory(const std::string& predictor_address,
                          absl::Duration record_timeout = absl::Seconds(10),
                          absl::Duration estimate_timeout = absl::Seconds(60),
                          std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);
  absl::StatusOr<sojourn::v1::RecordJobEventResponse> Record(
      const sojourn::v1::JobEvent& event) override;
  absl::StatusOr<sojourn::v1::EstimateTurnaroundResponse> Estimate(
      const sojourn::v1::EstimateTurnaroundRequest& request) override;

 private:
  const absl::Duration record_timeout_;
  const absl::Duration estimate_timeout_;
  std::unique_ptr<sojourn::v1::Predictor::Stub> stub_;
};

// RankHosts with a job queue: eligible hosts holding `mpl_limit` or more
// tasks of the queue's running jobs become ineligible (their figures kept,
// the jobs named in the reason) and go after the usable hosts, whose ranks
// are renumbered 1..n in their order.
void MarkBusyHosts(const JobQueue::Listing& jobs, int mpl_limit,
                   sojourn::v1::RankHostsResponse* response);

struct JobQueueServiceConfig {
  // The cluster's scheduling policy, recorded with each forwarded event and
  // used by estimates and listings that name none.
  sojourn::v1::SchedulingPolicy policy;
  // Job times (submit, start, finish) may be at most kMaxJobClockSkewSeconds
  // (services/job_spec.h) after the broker's clock: the predictor's limit,
  // not the broker's --max_clock_skew_seconds (host samples), so that the job
  // history records every event the queue takes.
  // The directory of the RocksDB database and the MiB that must stay free
  // on its disk for a write to be taken (sojourn::CheckFreeDisk; 0 = no
  // check): RESOURCE_EXHAUSTED below it.
  std::string data_dir;
  int64_t min_free_disk_mb = 0;
  // When CheckJobs drops jobs nothing was reported of (off by default).
  JobExpiry expiry;
};

class BrokerService final : public sojourn::v1::Broker::CallbackService {
 public:
  // All references must outlive the service.
  BrokerService(HostRegistry& registry, Ranker& ranker, ThreadPool& pool)
      : registry_(registry), ranker_(ranker), pool_(pool), started_(ranker.clock().Now()) {}
  // A ranker of default configuration without load forecasts, on `tr_source`.
  BrokerService(HostRegistry& registry, TrSource& tr_source, ThreadPool& pool);
  // --tls_bind_hosts: RegisterHost and Heartbeat take a host only from a
  // caller whose TLS certificate names it, and RegisterHost only a state
  // manager address whose host it names (CheckHostNamed, common/tls.h);
  // PERMISSION_DENIED otherwise. Needs mutual TLS. Call before serving.
  void set_bind_hosts(bool on) { bind_hosts_ = on; }

  grpc::ServerUnaryReactor* RegisterHost(grpc::CallbackServerContext* context,
                                         const sojourn::v1::RegisterHostRequest* request,
                                         sojourn::v1::RegisterHostResponse* response) override;
  grpc::ServerUnaryReactor* Heartbeat(grpc::CallbackServerContext* context,
                                      const sojourn::v1::HeartbeatRequest* request,
                                      sojourn::v1::HeartbeatResponse* response) override;
  grpc::ServerUnaryReactor* ListHosts(grpc::CallbackServerContext* context,
                                      const sojourn::v1::BrokerListHostsRequest* request,
                                      sojourn::v1::BrokerListHostsResponse* response) override;
  grpc::ServerUnaryReactor* GetHost(grpc::CallbackServerContext* context,
                                    const sojourn::v1::GetHostRequest* request,
                                    sojourn::v1::RegisteredHost* response) override;
  grpc::ServerUnaryReactor* RankHosts(grpc::CallbackServerContext* context,
                                      const sojourn::v1::RankHostsRequest* request,
                                      sojourn::v1::RankHostsResponse* response) override;

  // Counts the host predictions each successful RankHosts took, by source,
  // in sojourn_broker_ranking_predictions_total{source="cache"|"predictor"}
  // (the predictor: fetched, or tried, while the ranking waited), and the
  // ranker's refreshes ahead (Ranker::ExportMetrics); all exported at 0 from
  // this call. The share from the cache is what --cache_ttl_seconds and the
  // hosts' conditions leave of the rankings' waiting for the predictor.
  // `metrics` must outlive the service. Call before the server starts.
  void ExportRankingMetrics(Metrics& metrics);
  // The registry's look after its hosts, every minute (main.cc) and once at
  // start-up: forgets the hosts silent (no heartbeat, or no sample) for more
  // than `forget_after` (0 = never; HostRegistry::set_forget_after), logging them,
  // and sets the gauge sojourn_broker_hosts{state} (live hosts by their
  // reported state S1..S5, "unknown" without one, and "expired") and the
  // counter sojourn_broker_hosts_forgotten_total{reason="silent"|"max_hosts"}.
  // `metrics` must outlive the service. Call EnableHostChecks before the
  // server starts; CheckHosts returns the hosts it forgot.
  void EnableHostChecks(Metrics& metrics, absl::Duration forget_after);
  std::vector<std::string> CheckHosts();
  // Serves the job queue RPCs on `queue`, forwarding to `history`; both (and
  // `metrics`, when not null) must outlive the service. Without this call
  // they answer FAILED_PRECONDITION. Call before the server starts.
  void EnableJobQueue(JobQueue& queue, JobHistory& history, const JobQueueServiceConfig& config,
                      Metrics* metrics = nullptr);
  // Sends the job queue's outbox (events the history has not taken: it
  // could not when they happened, the predictor being unreachable, or the
  // broker stopped before it answered) to the history, oldest
  // first, until it is empty or the history still cannot take one for a
  // reason that may pass (UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED,
  // ABORTED); an event it refuses for good is dropped (logged, counted).
  // Returns the events recorded. The broker calls it every
  // --history_retry_seconds; safe to call at any time.
  int FlushJobHistory();
  // The broker's look at its queue, every minute (main.cc): drops the jobs
  // that expired under the config's `expiry` (JobQueue::RemoveExpired, which
  // puts a cancel of each in the outbox; sent at once when the predictor
  // answers; each logged and counted in
  // sojourn_broker_jobs_expired_total{state}), and sets the gauges sojourn_broker_jobs_overdue
  // (running jobs more than kOverdueGraceSeconds past their requested time)
  // and sojourn_broker_job_age_max_seconds{state} (the longest a job has
  // waited since its submission, or run since its start). StartJob and
  // FinishJob of a dropped job then answer FAILED_PRECONDITION saying when
  // and why, for the last kRememberedExpiries drops. Safe to call at any time.
  struct JobCheck {
    int expired_waiting = 0;
    int expired_running = 0;
    int overdue = 0;
    absl::Status status;  // of the queue's write, when the drop failed
  };
  JobCheck CheckJobs();
  static constexpr int kRememberedExpiries = 10000;
  grpc::ServerUnaryReactor* SubmitJob(grpc::CallbackServerContext* context,
                                      const sojourn::v1::SubmitJobRequest* request,
                                      sojourn::v1::JobQueueResponse* response) override;
  grpc::ServerUnaryReactor* StartJob(grpc::CallbackServerContext* context,
                                     const sojourn::v1::StartJobRequest* request,
                                     sojourn::v1::JobQueueResponse* response) override;
  grpc::ServerUnaryReactor* FinishJob(grpc::CallbackServerContext* context,
                                      const sojourn::v1::FinishJobRequest* request,
                                      sojourn::v1::JobQueueResponse* response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const sojourn::v1::ListJobsRequest* request,
                                     sojourn::v1::ListJobsResponse* response) override;
  grpc::ServerUnaryReactor* EstimateJobTurnaround(
      grpc::CallbackServerContext* context,
      const sojourn::v1::EstimateJobTurnaroundRequest* request,
      sojourn::v1::EstimateJobTurnaroundResponse* response) override;

 private:
  // With bind_hosts_, whether the caller of `context` may report `host` (and,
  // when not empty, register a state manager at `statemgr_address`).
  absl::Status CheckCaller(const grpc::CallbackServerContext& context, const std::string& host,
                           const std::string& statemgr_address) const;
  bool bind_hosts_ = false;
  // Checks a time a job event carries (0 = now): in [now -
  // turnaround::kMaxWaitSeconds, now + kMaxJobClockSkewSeconds].
  absl::StatusOr<int64_t> EventTime(int64_t job_id, const char* field, int64_t t) const;
  // `s` for job `job_id`, or, when `s` is NOT_FOUND and the job is among the
  // remembered drops of CheckJobs, FAILED_PRECONDITION saying when and why
  // (and, `finishing`, that its finish is not recorded).
  absl::Status ExplainNotQueued(int64_t job_id, absl::Status s, bool finishing) const;
  // The gauges of CheckJobs at `now`; returns the overdue jobs.
  int SetJobAgeGauges(int64_t now);
  // Sends the event of the queue change just made (`outbox`, put in the
  // outbox with the change) to the history when nothing is ahead of it in
  // the outbox, pops it once the history took it or refused it for good (a
  // failure that may pass leaves it for FlushJobHistory), and fills the
  // history fields and queue sizes of `response`. Called with history_mu_
  // held since before the change, so that the outbox's order is the order of
  // the changes, and no other change's event is ahead of this one unless the
  // history has not taken it.
  void Forward(const JobQueue::OutboxAppend& outbox, sojourn::v1::JobQueueResponse* response)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(history_mu_);
  // How long ago the service started, while that is less than the host
  // registry's heartbeat TTL: the registry is in memory, and a host known
  // before a restart is missing from it until its next heartbeat.
  std::optional<int64_t> SecondsSinceRestart() const;
  // StartJob's answer for a host `host` not in the registry: UNAVAILABLE
  // within SecondsSinceRestart (retry: the host may re-register), else
  // INVALID_ARGUMENT.
  absl::Status NotRegistered(int64_t job_id, const std::string& host) const;
  sojourn::v1::ClusterSnapshot Snapshot(const sojourn::v1::SchedulingPolicy& policy,
                                        int64_t exclude_job_id,
                                        std::vector<std::string>* node_hosts) const;
  int64_t NowUnix() const { return absl::ToUnixSeconds(ranker_.clock().Now()); }

  HostRegistry& registry_;
  std::unique_ptr<Ranker> own_ranker_;
  Ranker& ranker_;
  ThreadPool& pool_;
  // When the service was made, by the ranker's clock: the registry is empty
  // then.
  const absl::Time started_;
  JobQueue* queue_ = nullptr;
  JobHistory* history_ = nullptr;
  JobQueueServiceConfig queue_config_;
  Metrics* metrics_ = nullptr;
  Metrics* ranking_metrics_ = nullptr;
  Metrics* host_metrics_ = nullptr;
  absl::Duration forget_after_ = absl::ZeroDuration();
  // Held by CheckHosts.
  absl::Mutex check_hosts_mu_;
  // HostRegistry::forgotten() at the last CheckHosts.
  int64_t forgotten_for_room_ ABSL_GUARDED_BY(check_hosts_mu_) = 0;
  // Held while an event goes to the history, so that events (new ones and
  // the outbox's) reach it in the order they happened; the job RPCs hold it
  // from their queue change on (Forward).
  absl::Mutex history_mu_;
  // Why CheckJobs dropped each of the last kRememberedExpiries jobs, and the
  // order of the drops (sequence, job id) for forgetting the oldest.
  mutable absl::Mutex expired_mu_;
  absl::flat_hash_map<int64_t, std::pair<uint64_t, std::string>> expired_
      ABSL_GUARDED_BY(expired_mu_);
  std::deque<std::pair<uint64_t, int64_t>> expired_order_ ABSL_GUARDED_BY(expired_mu_);
  uint64_t expired_sequence_ ABSL_GUARDED_BY(expired_mu_) = 0;
};

}  // namespace sojourn::broker

#endif  // SOJOURN_SERVICES_BROKER_BROKER_SERVICE_H_
