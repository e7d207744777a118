#include "services/broker/broker_service.h"

#include <algorithm>
#include <cmath>
#include <map>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/cli_util.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/reactors.h"
#include "common/status.h"
#include "common/text.h"
#include "models/turnaround/job.h"
#include "services/job_spec.h"

namespace sojourn::broker {
GrpcTrSource::GrpcTrSource(const std::string& predictor_address, absl::Duration timeout,
                           std::shared_ptr<grpc::ChannelCredentials> credentials)
    : address_(predictor_address),
      timeout_(timeout),
      channel_(grpc::CreateChannel(predictor_address, OrInsecure(std::move(credentials)))),
      stub_(sojourn::v1::Predictor::NewStub(channel_)) {}

absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> GrpcTrSource::Predict(
    const sojourn::v1::PredictAvailabilityRequest& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  sojourn::v1::PredictAvailabilityResponse resp;
  grpc::Status s = stub_->PredictAvailability(&ctx, request, &resp);
  if (s.ok()) return resp;
  // UNAVAILABLE / DEADLINE_EXCEEDED on a channel that is not connected: the
  // predictor itself is down or unreachable (its own UNAVAILABLE answers,
  // e.g. a host's state manager being down, come over a READY channel).
  if ((s.error_code() == grpc::StatusCode::UNAVAILABLE ||
       s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) &&
      channel_->GetState(/*try_to_connect=*/false) != GRPC_CHANNEL_READY) {
    return PredictorUnreachableError(address_, s.error_message());
  }
  return FromGrpcStatus(s);
}

absl::StatusOr<std::vector<HostSample>> GrpcLoadSource::RecentSamples(
    const sojourn::v1::RegisteredHost& host, int64_t start_unix) {
  sojourn::v1::GetSeriesRequest req;
  req.set_host(host.host());
  req.set_start_unix_seconds(std::max<int64_t>(0, start_unix));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout_));
  sojourn::v1::GetSeriesResponse resp;
  grpc::Status s = Stub(host.statemgr_address())->GetSeries(&ctx, req, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  std::vector<HostSample> out;
  out.reserve(resp.samples_size());
  for (const auto& p : resp.samples()) {
    HostSample h;
    h.unix_seconds = p.unix_seconds();
    h.cpu_load = p.cpu_load_ratio();
    if (p.has_free_mem_mb()) h.free_mem_mb = p.free_mem_mb();
    out.push_back(h);
  }
  return out;
}

sojourn::v1::StateManager::Stub* GrpcLoadSource::Stub(const std::string& address) {
  absl::MutexLock l(&mu_);
  auto& stub = stubs_[address];
  if (stub == nullptr) {
    stub = sojourn::v1::StateManager::NewStub(grpc::CreateChannel(address, credentials_));
  }
  return stub.get();
}

GrpcJobHistory::GrpcJobHistory(const std::string& predictor_address, absl::Duration record_timeout,
                               absl::Duration estimate_timeout,
                               std::shared_ptr<grpc::ChannelCredentials> credentials)
    : record_timeout_(record_timeout),
      estimate_timeout_(estimate_timeout),
      stub_(sojourn::v1::Predictor::NewStub(
          grpc::CreateChannel(predictor_address, OrInsecure(std::move(credentials))))) {}

absl::StatusOr<sojourn::v1::RecordJobEventResponse> GrpcJobHistory::Record(
    const sojourn::v1::JobEvent& event) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + record_timeout_));
  sojourn::v1::RecordJobEventResponse resp;
  grpc::Status s = stub_->RecordJobEvent(&ctx, event, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

absl::StatusOr<sojourn::v1::EstimateTurnaroundResponse> GrpcJobHistory::Estimate(
    const sojourn::v1::EstimateTurnaroundRequest& request) {
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + estimate_timeout_));
  sojourn::v1::EstimateTurnaroundResponse resp;
  grpc::Status s = stub_->EstimateTurnaround(&ctx, request, &resp);
  if (!s.ok()) return FromGrpcStatus(s);
  return resp;
}

BrokerService::BrokerService(HostRegistry& registry, TrSource& tr_source, ThreadPool& pool)
    : registry_(registry),
      own_ranker_(std::make_unique<Ranker>(tr_source, nullptr, Clock::Real(), RankerConfig{})),
      ranker_(*own_ranker_),
      pool_(pool),
      started_(ranker_.clock().Now()) {}

grpc::ServerUnaryReactor* BrokerService::RegisterHost(
    grpc::CallbackServerContext* context, const sojourn::v1::RegisterHostRequest* request,
    sojourn::v1::RegisterHostResponse* response) {
  if (bind_hosts_) {
    // Checked after the request's own checks (a malformed request is INVALID_ARGUMENT).
    if (absl::Status s = ValidateLookupName(request->host()); !s.ok()) return FinishNow(context, s);
    if (absl::Status s = CheckCaller(*context, request->host(), request->statemgr_address());
        !s.ok()) {
      return FinishNow(context, s);
    }
  }
  absl::Status s = registry_.Register(*request);
  response->set_heartbeat_ttl_seconds(absl::ToInt64Seconds(registry_.ttl()));
  return FinishNow(context, s);
}

grpc::ServerUnaryReactor* BrokerService::Heartbeat(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::HeartbeatRequest* request,
                                                   sojourn::v1::HeartbeatResponse* response) {
  if (absl::Status s = ValidateLookupName(request->host()); !s.ok()) return FinishNow(context, s);
  if (bind_hosts_) {
    if (absl::Status s = CheckCaller(*context, request->host(), ""); !s.ok()) {
      return FinishNow(context, s);
    }
  }
  response->set_heartbeat_ttl_seconds(absl::ToInt64Seconds(registry_.ttl()));
  return FinishNow(context,
                   registry_.Heartbeat(request->host(), request->last_sample_unix_seconds(),
                                       request->has_condition() ? &request->condition() : nullptr));
}

absl::Status BrokerService::CheckCaller(const grpc::CallbackServerContext& context,
                                        const std::string& host,
                                        const std::string& statemgr_address) const {
  const CertificateIdentity peer = PeerCertificateIdentity(context);
  RETURN_IF_ERROR(CheckHostNamed(peer, "host", host));
  if (statemgr_address.empty()) return absl::OkStatus();
  return CheckHostNamed(peer, "state manager address host", AddressHost(statemgr_address));
}

grpc::ServerUnaryReactor* BrokerService::ListHosts(
    grpc::CallbackServerContext* context, const sojourn::v1::BrokerListHostsRequest* /*request*/,
    sojourn::v1::BrokerListHostsResponse* response) {
  for (auto& h : registry_.List()) *response->add_hosts() = std::move(h);
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* BrokerService::GetHost(grpc::CallbackServerContext* context,
                                                 const sojourn::v1::GetHostRequest* request,
                                                 sojourn::v1::RegisteredHost* response) {
  if (absl::Status s = ValidateLookupName(request->host()); !s.ok()) return FinishNow(context, s);
  auto h = registry_.Get(request->host());
  if (h.ok()) *response = std::move(*h);
  if (const std::optional<int64_t> up = SecondsSinceRestart();
      absl::IsNotFound(h.status()) && up.has_value()) {
    // Still NOT_FOUND (a lookup: nothing is lost by it), but saying why it may pass.
    return FinishNow(context, absl::NotFoundError(absl::StrCat(
                                  h.status().message(), " (the broker started ", *up,
                                  " s ago: hosts re-register with their next heartbeat)")));
  }
  return FinishNow(context, h.status());
}

namespace {

constexpr char kRankingPredictionsMetric[] = "sojourn_broker_ranking_predictions_total";
constexpr char kRankingPredictionsHelp[] =
    "Host predictions (TR curve and load forecast) the broker's successful rankings took, by "
    "source: its cache, or the predictor (and the host's state manager) while the ranking "
    "waited, including fetches that failed";

}  // namespace

void BrokerService::ExportRankingMetrics(Metrics& metrics) {
  ranking_metrics_ = &metrics;
  for (const char* source : {"cache", "predictor"}) {
    metrics.DeclareCounter(kRankingPredictionsMetric, kRankingPredictionsHelp,
                           {{"source", source}});
  }
  ranker_.ExportMetrics(metrics);
}

constexpr char kHostsMetric[] = "sojourn_broker_hosts";
constexpr char kHostsHelp[] =
    "Hosts registered with the broker: the live ones by the state their state manager last "
    "reported (S1..S5; unknown when it reported none), and the expired ones (no heartbeat for "
    "--heartbeat_ttl_seconds; not ranked)";
constexpr char kForgottenMetric[] = "sojourn_broker_hosts_forgotten_total";
constexpr char kForgottenHelp[] =
    "Hosts the broker forgot: silent for longer than --forget_hosts_after_seconds, or expired "
    "and replaced by a new host at --max_hosts";

void BrokerService::EnableHostChecks(Metrics& metrics, absl::Duration forget_after) {
  host_metrics_ = &metrics;
  forget_after_ = forget_after;
  registry_.set_forget_after(forget_after);
  for (const char* reason : {"silent", "max_hosts"}) {
    metrics.DeclareCounter(kForgottenMetric, kForgottenHelp, {{"reason", reason}});
  }
  {
    absl::MutexLock l(&check_hosts_mu_);
    forgotten_for_room_ = registry_.forgotten();
  }
  CheckHosts();
}

std::vector<std::string> BrokerService::CheckHosts() {
  absl::MutexLock l(&check_hosts_mu_);
  std::vector<std::string> forgotten = registry_.ForgetSilent();
  if (!forgotten.empty()) {
    std::string names = absl::StrJoin(
        forgotten.begin(), forgotten.begin() + std::min<size_t>(forgotten.size(), 10), ", ");
    if (forgotten.size() > 10) absl::StrAppend(&names, " and ", forgotten.size() - 10, " more");
    SOJOURN_LOG(INFO,
                "forgot %d host(s) without a heartbeat or a sample for more than %s "
                "(--forget_hosts_after_seconds): %s; each registers again once it samples",
                static_cast<int>(forgotten.size()), absl::FormatDuration(forget_after_), names);
  }
  if (host_metrics_ == nullptr) return forgotten;
  host_metrics_->Increment(kForgottenMetric, kForgottenHelp, {{"reason", "silent"}},
                           static_cast<double>(forgotten.size()));
  const int64_t for_room = registry_.forgotten();
  const int64_t before = forgotten_for_room_;
  forgotten_for_room_ = for_room;
  host_metrics_->Increment(kForgottenMetric, kForgottenHelp, {{"reason", "max_hosts"}},
                           static_cast<double>(std::max<int64_t>(0, for_room - before)));
  const HostRegistry::Census census = registry_.Count();
  static constexpr const char* kStates[6] = {"unknown", "S1", "S2", "S3", "S4", "S5"};
  for (int s = 0; s < 6; ++s) {
    host_metrics_->Set(kHostsMetric, kHostsHelp, {{"state", kStates[s]}},
                       static_cast<double>(census.live[s]));
  }
  host_metrics_->Set(kHostsMetric, kHostsHelp, {{"state", "expired"}},
                     static_cast<double>(census.expired));
  return forgotten;
}

grpc::ServerUnaryReactor* BrokerService::RankHosts(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::RankHostsRequest* request,
                                                   sojourn::v1::RankHostsResponse* response) {
  return FinishOnPoolUnlessAbandoned(
      context, pool_, ranker_.clock(),
      [this, request, response](const std::function<bool()>& abandoned) -> absl::Status {
        ASSIGN_OR_RETURN(*response, ranker_.Rank(*request, registry_.List(), abandoned));
        if (ranking_metrics_ != nullptr) {
          ranking_metrics_->Increment(kRankingPredictionsMetric, kRankingPredictionsHelp,
                                      {{"source", "cache"}}, response->predictions_cached());
          ranking_metrics_->Increment(kRankingPredictionsMetric, kRankingPredictionsHelp,
                                      {{"source", "predictor"}}, response->predictions_fetched());
        }
        if (queue_ != nullptr && !request->include_busy_hosts()) {
          MarkBusyHosts(queue_->List(), std::max(1, queue_config_.policy.mpl_limit()), response);
        }
        return absl::OkStatus();
      });
}

void MarkBusyHosts(const JobQueue::Listing& jobs, int mpl_limit,
                   sojourn::v1::RankHostsResponse* response) {
  std::map<std::string, std::vector<int64_t>> jobs_on;
  for (const auto& j : jobs.running) {
    for (const std::string& h : j.hosts()) jobs_on[h].push_back(j.spec().job_id());
  }
  if (jobs_on.empty()) return;
  std::vector<sojourn::v1::HostRank> usable, busy, other;
  for (auto& h : *response->mutable_hosts()) {
    auto it = jobs_on.find(h.host());
    if (!h.eligible()) {
      other.push_back(std::move(h));
    } else if (it != jobs_on.end() && static_cast<int>(it->second.size()) >= mpl_limit) {
      h.set_eligible(false);
      h.set_rank(0);
      h.set_rule("");
      h.set_reason(absl::StrCat("busy: runs guest job", it->second.size() > 1 ? "s " : " ",
                                absl::StrJoin(it->second, ", "),
                                " of the broker's queue (multiprogramming limit ", mpl_limit,
                                "); was: ", h.reason()));
      busy.push_back(std::move(h));
    } else {
      usable.push_back(std::move(h));
    }
  }
  response->clear_hosts();
  int rank = 0;
  for (auto& h : usable) {
    h.set_rank(++rank);
    *response->add_hosts() = std::move(h);
  }
  for (auto* group : {&busy, &other}) {
    for (auto& h : *group) *response->add_hosts() = std::move(h);
  }
}

namespace {

constexpr char kJobEventsMetric[] = "sojourn_broker_job_events_total";
constexpr char kJobEventsHelp[] =
    "Job events the broker took, by kind and whether the predictor's job history recorded them";

constexpr char kReplayedMetric[] = "sojourn_broker_job_events_replayed_total";
constexpr char kReplayedHelp[] =
    "Job events the broker sent from its outbox (those the job history could not take when they "
    "happened, and the cancels of jobs the broker dropped as expired), by outcome: recorded by "
    "the job history, or dropped because it refused them for good";
constexpr char kPendingMetric[] = "sojourn_broker_job_events_pending";
constexpr char kPendingHelp[] =
    "Job events in the broker's outbox, waiting for the predictor's job history to take them";

constexpr char kExpiredMetric[] = "sojourn_broker_jobs_expired_total";
constexpr char kExpiredHelp[] =
    "Jobs the broker dropped from its queue because nothing was reported of them for too long "
    "(--expire_waiting_jobs_after_seconds, --expire_running_jobs_after_seconds), by the state "
    "they were in";
constexpr char kOverdueMetric[] = "sojourn_broker_jobs_overdue";
constexpr char kOverdueHelp[] =
    "Running jobs more than an hour past their start plus their requested time: most likely "
    "finished or killed without a report, and holding their hosts out of rankings";
constexpr char kAgeMetric[] = "sojourn_broker_job_age_max_seconds";
constexpr char kAgeHelp[] =
    "The longest a queued job has waited since its submission (state waiting) or run since its "
    "start (state running), by the broker's clock; 0 when there is none";

std::string Utc(int64_t unix_seconds) {
  return absl::FormatTime("%Y-%m-%d %H:%M:%S UTC", absl::FromUnixSeconds(unix_seconds),
                          absl::UTCTimeZone());
}

// Why CheckJobs dropped `job` at `now`, for the log and for StartJob or
// FinishJob of it afterwards.
std::string ExpiryReason(const sojourn::v1::QueuedJob& job, int64_t now, const JobExpiry& expiry) {
  const int64_t id = job.spec().job_id();
  if (job.start_unix_seconds() <= 0) {
    return absl::StrCat("job ", id, " was dropped from the broker's queue at ", Utc(now),
                        ": it was submitted at ", Utc(job.spec().submit_unix_seconds()),
                        " and had not started ", expiry.waiting_seconds,
                        " s later (--expire_waiting_jobs_after_seconds)");
  }
  std::string hosts =
      absl::StrJoin(job.hosts().begin(), job.hosts().begin() + std::min(job.hosts_size(), 3), ",");
  if (job.hosts_size() > 3) absl::StrAppend(&hosts, " and ", job.hosts_size() - 3, " more");
  const int64_t requested = job.spec().requested_seconds();
  return absl::StrCat("job ", id, " was dropped from the broker's queue at ", Utc(now),
                      ": it started at ", Utc(job.start_unix_seconds()), " on ", hosts,
                      requested > 0 ? absl::StrCat(" with a requested time of ", requested, " s")
                                    : std::string(" with no requested time"),
                      ", and no finish was reported ", expiry.running_seconds, " s after ",
                      requested > 0 ? "that time" : "its start",
                      " (--expire_running_jobs_after_seconds)");
}

void SetQueueGauges(const JobQueue::Counts& counts, Metrics& metrics) {
  metrics.Set("sojourn_broker_jobs", "Jobs in the broker's queue", {{"state", "waiting"}},
              counts.waiting);
  metrics.Set("sojourn_broker_jobs", "Jobs in the broker's queue", {{"state", "running"}},
              counts.running);
}

// A failure that may pass (the predictor down, slow or overloaded): the event
// waits in the outbox. Any other answer is the history's verdict on the event.
bool Transient(const absl::Status& s) {
  return absl::IsUnavailable(s) || absl::IsDeadlineExceeded(s) || absl::IsResourceExhausted(s) ||
         absl::IsAborted(s);
}

const char* EventKind(const sojourn::v1::JobEvent& event) {
  return event.has_submitted() ? "submitted"
         : event.has_started() ? "started"
         : event.has_finished() ? "finished"
                                : "cancelled";
}

}  // namespace

void BrokerService::EnableJobQueue(JobQueue& queue, JobHistory& history,
                                   const JobQueueServiceConfig& config, Metrics* metrics) {
  queue_ = &queue;
  history_ = &history;
  queue_config_ = config;
  metrics_ = metrics;
  if (metrics_ != nullptr) {
    for (const char* kind : {"submitted", "started", "finished", "cancelled"}) {
      for (const char* recorded : {"true", "false"}) {
        metrics_->DeclareCounter(kJobEventsMetric, kJobEventsHelp,
                                 {{"event", kind}, {"recorded", recorded}});
      }
    }
    for (const char* outcome : {"recorded", "dropped"}) {
      metrics_->DeclareCounter(kReplayedMetric, kReplayedHelp, {{"outcome", outcome}});
    }
    SetQueueGauges(queue.Count(), *metrics_);
    metrics_->Set(kPendingMetric, kPendingHelp, {}, queue.OutboxSize());
    for (const char* state : {"waiting", "running"}) {
      metrics_->DeclareCounter(kExpiredMetric, kExpiredHelp, {{"state", state}});
    }
  }
  SetJobAgeGauges(NowUnix());
}

BrokerService::JobCheck BrokerService::CheckJobs() {
  JobCheck out;
  if (queue_ == nullptr) return out;
  const int64_t now = NowUnix();
  const JobExpiry& expiry = queue_config_.expiry;
  std::vector<sojourn::v1::QueuedJob> dropped;
  std::vector<std::string> reasons;
  if (expiry.waiting_seconds > 0 || expiry.running_seconds > 0) {
    // Held across the removal and the reasons, so that a StartJob or
    // FinishJob never finds a dropped job gone without its reason.
    absl::MutexLock l(&expired_mu_);
    absl::StatusOr<std::vector<sojourn::v1::QueuedJob>> removed =
        queue_->RemoveExpired(now, expiry);
    if (!removed.ok()) {
      out.status = removed.status();
      SOJOURN_LOG(ERROR, "dropping expired jobs: %s", removed.status().ToString());
    } else {
      dropped = *std::move(removed);
      for (const sojourn::v1::QueuedJob& job : dropped) {
        reasons.push_back(ExpiryReason(job, now, expiry));
        const uint64_t seq = ++expired_sequence_;
        expired_[job.spec().job_id()] = {seq, reasons.back()};
        expired_order_.emplace_back(seq, job.spec().job_id());
        while (static_cast<int>(expired_order_.size()) > kRememberedExpiries) {
          const auto [old_seq, old_id] = expired_order_.front();
          expired_order_.pop_front();
          auto it = expired_.find(old_id);
          if (it != expired_.end() && it->second.first == old_seq) expired_.erase(it);
        }
      }
    }
  }
  out.overdue = SetJobAgeGauges(now);
  if (dropped.empty()) return out;
  // The cancels RemoveExpired put in the outbox, behind whatever was there:
  // cancelled, not finished, since when the job ended is unknown, and a
  // guess would teach the turnaround kernels a run time that never was.
  FlushJobHistory();
  for (size_t i = 0; i < dropped.size(); ++i) {
    const bool running = dropped[i].start_unix_seconds() > 0;
    ++(running ? out.expired_running : out.expired_waiting);
    SOJOURN_LOG(WARNING, "%s; the job history gets it as cancelled", reasons[i]);
    if (metrics_ != nullptr) {
      metrics_->Increment(kExpiredMetric, kExpiredHelp,
                          {{"state", running ? "running" : "waiting"}});
    }
  }
  return out;
}

int BrokerService::SetJobAgeGauges(int64_t now) {
  const JobQueue::Listing l = queue_->List();
  int overdue = 0;
  int64_t oldest_waiting = 0, longest_running = 0;
  for (const auto& j : l.waiting) {
    oldest_waiting = std::max(oldest_waiting, now - j.spec().submit_unix_seconds());
  }
  for (const auto& j : l.running) {
    longest_running = std::max(longest_running, now - j.start_unix_seconds());
    if (OverdueSeconds(j, now) > kOverdueGraceSeconds) ++overdue;
  }
  if (metrics_ != nullptr) {
    metrics_->Set(kOverdueMetric, kOverdueHelp, {}, overdue);
    metrics_->Set(kAgeMetric, kAgeHelp, {{"state", "waiting"}}, oldest_waiting);
    metrics_->Set(kAgeMetric, kAgeHelp, {{"state", "running"}}, longest_running);
  }
  return overdue;
}

std::optional<int64_t> BrokerService::SecondsSinceRestart() const {
  const absl::Duration up = ranker_.clock().Now() - started_;
  if (up >= registry_.ttl()) return std::nullopt;
  return std::max<int64_t>(0, absl::ToInt64Seconds(up));
}

absl::Status BrokerService::NotRegistered(int64_t job_id, const std::string& host) const {
  // UNAVAILABLE, not INVALID_ARGUMENT, while the registry may still be
  // filling up: a client told not to retry would lose the start, and the
  // job would wait for good.
  if (const std::optional<int64_t> up = SecondsSinceRestart(); up.has_value()) {
    return absl::UnavailableError(absl::StrCat(
        "job ", job_id, ": host '", host, "' is not registered with this broker yet: the broker "
        "started ", *up, " s ago and hosts re-register with their next heartbeat (within ",
        absl::ToInt64Seconds(registry_.ttl()), " s, --heartbeat_ttl_seconds); retry"));
  }
  return absl::InvalidArgumentError(
      absl::StrCat("job ", job_id, ": host '", host, "' is not registered with this broker"));
}

absl::Status BrokerService::ExplainNotQueued(int64_t job_id, absl::Status s, bool finishing) const {
  if (!absl::IsNotFound(s)) return s;
  absl::MutexLock l(&expired_mu_);
  auto it = expired_.find(job_id);
  if (it == expired_.end()) return s;
  return absl::FailedPreconditionError(absl::StrCat(
      it->second.second, finishing
                             ? "; the job history has it as cancelled, so this is not recorded"
                             : "; submit it again to queue it anew"));
}

int BrokerService::FlushJobHistory() {
  if (queue_ == nullptr) return 0;
  int recorded = 0;
  while (true) {
    // One event at a time under the lock: a new event (Forward) waits for at
    // most one call, and goes behind whatever is still in the outbox.
    absl::MutexLock l(&history_mu_);
    std::optional<std::pair<uint64_t, sojourn::v1::JobEvent>> front = queue_->OutboxFront();
    if (!front) break;
    absl::StatusOr<sojourn::v1::RecordJobEventResponse> r = history_->Record(front->second);
    if (!r.ok() && Transient(r.status())) break;
    if (r.ok()) {
      ++recorded;
    } else {
      // Refused for good (e.g. the job was already finished there, or the
      // predictor keeps no job history): sending it again cannot help.
      SOJOURN_LOG(WARNING, "job history refused a %s event of the outbox, dropped: %s",
                  EventKind(front->second), r.status().ToString());
    }
    if (metrics_ != nullptr) {
      metrics_->Increment(kReplayedMetric, kReplayedHelp,
                          {{"outcome", r.ok() ? "recorded" : "dropped"}});
    }
    if (absl::Status s = queue_->PopOutbox(front->first); !s.ok()) {
      SOJOURN_LOG(ERROR, "job history outbox: %s", s.ToString());
      break;
    }
  }
  if (metrics_ != nullptr) metrics_->Set(kPendingMetric, kPendingHelp, {}, queue_->OutboxSize());
  return recorded;
}

absl::StatusOr<int64_t> BrokerService::EventTime(int64_t job_id, const char* field,
                                                 int64_t t) const {
  const int64_t now = NowUnix();
  if (t == 0) return now;
  const int64_t latest = now + kMaxJobClockSkewSeconds;
  // At most a year back (the longest wait the predictor estimates,
  // turnaround::kMaxWaitSeconds): a job queued as submitted in 1970 recorded a
  // decades-long wait when it started, and its estimates were refused.
  const int64_t earliest = std::max<int64_t>(1, now - turnaround::kMaxWaitSeconds);
  if (t >= earliest && t <= latest) return t;
  return absl::InvalidArgumentError(absl::StrCat(
      "job ", job_id, ": ", field, " ", t, " must be in [", earliest, ", ", latest,
      "] (0 = now; from a year before the broker's clock to ", kMaxJobClockSkewSeconds,
      " s after it, as the predictor's job history takes it)"));
}

sojourn::v1::ClusterSnapshot BrokerService::Snapshot(const sojourn::v1::SchedulingPolicy& policy,
                                                     int64_t exclude_job_id,
                                                     std::vector<std::string>* node_hosts) const {
  return BuildSnapshot(NowUnix(), policy, registry_.List(), queue_->List(), exclude_job_id,
                       node_hosts);
}

void BrokerService::Forward(const JobQueue::OutboxAppend& outbox,
                            sojourn::v1::JobQueueResponse* response) {
  const sojourn::v1::JobEvent& event = outbox.event;
  absl::StatusOr<sojourn::v1::RecordJobEventResponse> r;
  // Events reach the history in the order they happened: behind the outbox
  // while it holds any earlier one.
  const std::optional<std::pair<uint64_t, sojourn::v1::JobEvent>> front = queue_->OutboxFront();
  if (outbox.sequence.ok() && front.has_value() && front->first == *outbox.sequence) {
    r = history_->Record(event);
    if (r.ok() || !Transient(r.status())) {
      // Taken, or refused for good (the history's verdict): done with. Should
      // the pop fail, the event is sent again, and the history refuses the
      // repeat (ALREADY_EXISTS, FAILED_PRECONDITION or NOT_FOUND).
      if (absl::Status s = queue_->PopOutbox(*outbox.sequence); !s.ok()) {
        SOJOURN_LOG(ERROR, "job history outbox: %s", s.ToString());
      }
    } else {
      r = absl::Status(r.status().code(),
                       absl::StrCat(r.status().message(), "; kept in the broker's outbox, sent "
                                                          "again when the predictor answers"));
    }
  } else {
    // Earlier events wait (or the outbox is full of them): the event waits
    // behind them, when there was room for it.
    const int waiting = queue_->OutboxSize() - (outbox.sequence.ok() ? 1 : 0);
    r = absl::UnavailableError(absl::StrCat("the job history has not yet taken ", waiting,
                                            " earlier event", waiting == 1 ? "" : "s", "; ",
                                            outbox.sequence.ok()
                                                ? "kept in the broker's outbox, sent again when "
                                                  "the predictor answers"
                                                : outbox.sequence.status().message()));
  }
  response->set_history_pending(queue_->OutboxSize());
  response->set_recorded_in_history(r.ok());
  if (r.ok()) {
    response->set_history_records(r->history_records());
  } else {
    response->set_history_error(r.status().ToString());
    SOJOURN_LOG(WARNING, "job history did not take the event: %s", r.status().ToString());
  }
  const JobQueue::Counts counts = queue_->Count();
  response->set_waiting_jobs(counts.waiting);
  response->set_running_jobs(counts.running);
  if (metrics_ != nullptr) {
    metrics_->Increment(kJobEventsMetric, kJobEventsHelp,
                        {{"event", EventKind(event)}, {"recorded", r.ok() ? "true" : "false"}});
    SetQueueGauges(counts, *metrics_);
    metrics_->Set(kPendingMetric, kPendingHelp, {}, response->history_pending());
  }
}

namespace {

absl::Status NoQueue() {
  return absl::FailedPreconditionError("this broker serves no job queue");
}

// `jobs` as starting waiting job `job_id` on `hosts` at `start_unix` leaves
// them (JobQueue::Start, JobQueue::List's order); unchanged when the job
// does not wait (Start refuses it then).
JobQueue::Listing AsStarted(JobQueue::Listing jobs, int64_t job_id, int64_t start_unix,
                            const std::vector<std::string>& hosts) {
  auto it = std::find_if(jobs.waiting.begin(), jobs.waiting.end(),
                         [job_id](const auto& j) { return j.spec().job_id() == job_id; });
  if (it == jobs.waiting.end()) return jobs;
  sojourn::v1::QueuedJob job = std::move(*it);
  jobs.waiting.erase(it);
  job.set_start_unix_seconds(start_unix);
  for (const std::string& h : hosts) job.add_hosts(h);
  const auto by_start = [](const sojourn::v1::QueuedJob& a, const sojourn::v1::QueuedJob& b) {
    return std::make_pair(a.start_unix_seconds(), a.spec().job_id()) <
           std::make_pair(b.start_unix_seconds(), b.spec().job_id());
  };
  jobs.running.insert(std::upper_bound(jobs.running.begin(), jobs.running.end(), job, by_start),
                      std::move(job));
  return jobs;
}

}  // namespace

grpc::ServerUnaryReactor* BrokerService::SubmitJob(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::SubmitJobRequest* request,
                                                   sojourn::v1::JobQueueResponse* response) {
  if (queue_ == nullptr) return FinishNow(context, NoQueue());
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    sojourn::v1::JobSpec spec = request->job();
    ASSIGN_OR_RETURN(const int64_t submit,
                     EventTime(spec.job_id(), "submit_unix_seconds", spec.submit_unix_seconds()));
    spec.set_submit_unix_seconds(submit);
    RETURN_IF_ERROR(CheckFreeDisk(queue_config_.data_dir, queue_config_.min_free_disk_mb,
                                  "--data_dir"));
    absl::MutexLock history(&history_mu_);  // from the change on (Forward)
    JobQueue::OutboxAppend outbox;
    *outbox.event.mutable_submitted()->mutable_job() = spec;
    std::vector<std::string> hosts;
    // The queue and cluster at submit, without the job itself (not yet in
    // the queue; the job RPCs change it one at a time).
    *outbox.event.mutable_submitted()->mutable_snapshot() =
        Snapshot(queue_config_.policy, spec.job_id(), &hosts);
    ASSIGN_OR_RETURN(*response->mutable_job(), queue_->Submit(spec, NowUnix(), &outbox));
    {
      absl::MutexLock l(&expired_mu_);
      expired_.erase(spec.job_id());  // queued anew: its drop no longer explains a NOT_FOUND
    }
    Forward(outbox, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* BrokerService::StartJob(grpc::CallbackServerContext* context,
                                                  const sojourn::v1::StartJobRequest* request,
                                                  sojourn::v1::JobQueueResponse* response) {
  if (queue_ == nullptr) return FinishNow(context, NoQueue());
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    const int64_t id = request->job_id();
    RETURN_IF_ERROR(CheckRecordedJobId(id));
    RETURN_IF_ERROR(ExplainNotQueued(id, queue_->Get(id).status(), /*finishing=*/false));
    ASSIGN_OR_RETURN(const int64_t start,
                     EventTime(id, "start_unix_seconds", request->start_unix_seconds()));
    std::vector<std::string> hosts(request->hosts().begin(), request->hosts().end());
    for (const std::string& h : hosts) {
      if (absl::Status s = ValidateLookupName(h); !s.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("job ", id, ": ", s.message()));
      }
      if (!registry_.Get(h).ok()) return NotRegistered(id, h);
    }
    RETURN_IF_ERROR(CheckFreeDisk(queue_config_.data_dir, queue_config_.min_free_disk_mb,
                                  "--data_dir"));
    absl::MutexLock history(&history_mu_);  // from the change on (Forward)
    JobQueue::OutboxAppend outbox;
    sojourn::v1::JobStarted* e = outbox.event.mutable_started();
    e->set_job_id(id);
    e->set_start_unix_seconds(start);
    // The snapshot holds the job as running, so its hosts are nodes; the
    // history leaves the job itself out of the load it records. Taken at the
    // start, which may be up to the skew after the clock: a snapshot at the
    // clock left such a job out, and with it its hosts that were not live
    // (the event then named nodes the snapshot did not have).
    std::vector<std::string> node_hosts;
    *e->mutable_snapshot() =
        BuildSnapshot(std::max(NowUnix(), start), queue_config_.policy, registry_.List(),
                      AsStarted(queue_->List(), id, start, hosts), 0, &node_hosts);
    for (const std::string& h : hosts) {
      const auto it = std::find(node_hosts.begin(), node_hosts.end(), h);
      e->add_nodes(static_cast<int32_t>(it - node_hosts.begin()));
    }
    absl::StatusOr<sojourn::v1::QueuedJob> started =
        queue_->Start(id, start, hosts, NowUnix(), &outbox);
    if (!started.ok()) return ExplainNotQueued(id, started.status(), /*finishing=*/false);
    *response->mutable_job() = *std::move(started);
    Forward(outbox, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* BrokerService::FinishJob(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::FinishJobRequest* request,
                                                   sojourn::v1::JobQueueResponse* response) {
  if (queue_ == nullptr) return FinishNow(context, NoQueue());
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    const int64_t id = request->job_id();
    RETURN_IF_ERROR(CheckRecordedJobId(id));
    absl::StatusOr<sojourn::v1::QueuedJob> queued = queue_->Get(id);
    if (!queued.ok()) return ExplainNotQueued(id, queued.status(), !request->cancelled());
    const sojourn::v1::QueuedJob& job = *queued;
    JobQueue::OutboxAppend outbox;
    sojourn::v1::JobEvent& event = outbox.event;
    if (request->cancelled()) {
      event.mutable_cancelled()->set_job_id(id);
    } else {
      if (job.start_unix_seconds() == 0) {
        return absl::FailedPreconditionError(absl::StrCat(
            "job ", id, " never started: report StartJob first, or cancel it (cancelled = true)"));
      }
      ASSIGN_OR_RETURN(const int64_t finish,
                       EventTime(id, "finish_unix_seconds", request->finish_unix_seconds()));
      if (finish < job.start_unix_seconds()) {
        return absl::InvalidArgumentError(absl::StrCat("job ", id, ": finish ", finish,
                                                       " is before its start ",
                                                       job.start_unix_seconds()));
      }
      const double cpu = request->cpu_seconds_per_task();
      if (!(cpu == -1 || (std::isfinite(cpu) && cpu >= 0))) {
        return absl::InvalidArgumentError(absl::StrCat(
            "job ", id, ": cpu_seconds_per_task must be finite and >= 0 (-1 or 0 = unknown), got ",
            cpu));
      }
      // What the job history refuses (a task uses at most one CPU), refused
      // before the job leaves the queue, so that it is not lost to the history.
      RETURN_IF_ERROR(
          turnaround::CheckCpuTimePerTask(id, cpu, finish - job.start_unix_seconds()));
      sojourn::v1::JobFinished* e = event.mutable_finished();
      e->set_job_id(id);
      e->set_finish_unix_seconds(finish);
      e->set_cpu_seconds_per_task(cpu > 0 ? cpu : -1);
    }
    RETURN_IF_ERROR(CheckFreeDisk(queue_config_.data_dir, queue_config_.min_free_disk_mb,
                                  "--data_dir"));
    absl::MutexLock history(&history_mu_);  // from the change on (Forward)
    absl::StatusOr<sojourn::v1::QueuedJob> removed = queue_->Remove(id, &outbox);
    if (!removed.ok()) return ExplainNotQueued(id, removed.status(), !request->cancelled());
    *response->mutable_job() = *std::move(removed);
    Forward(outbox, response);
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* BrokerService::ListJobs(grpc::CallbackServerContext* context,
                                                  const sojourn::v1::ListJobsRequest* request,
                                                  sojourn::v1::ListJobsResponse* response) {
  if (queue_ == nullptr) return FinishNow(context, NoQueue());
  if (request->has_policy()) {
    if (absl::Status s = CheckSchedulingPolicy(request->policy()); !s.ok()) {
      return FinishNow(context, s);
    }
  }
  const JobQueue::Listing l = queue_->List();
  const int64_t now = NowUnix();
  for (const auto& j : l.waiting) *response->add_waiting() = j;
  for (const auto& j : l.running) {
    sojourn::v1::QueuedJob* r = response->add_running();
    *r = j;
    r->set_overdue_seconds(OverdueSeconds(j, now));
  }
  std::vector<std::string> hosts;
  *response->mutable_snapshot() =
      BuildSnapshot(now, request->has_policy() ? request->policy() : queue_config_.policy,
                    registry_.List(), l, 0, &hosts);
  for (auto& h : hosts) response->add_snapshot_hosts(std::move(h));
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* BrokerService::EstimateJobTurnaround(
    grpc::CallbackServerContext* context, const sojourn::v1::EstimateJobTurnaroundRequest* request,
    sojourn::v1::EstimateJobTurnaroundResponse* response) {
  if (queue_ == nullptr) return FinishNow(context, NoQueue());
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    sojourn::v1::EstimateTurnaroundRequest req;
    *req.mutable_job() = request->job();
    // The submit times SubmitJob takes, and the job checked as the predictor
    // checks it (job_id >= 0: 0 = a job not queued), before any snapshot is
    // built: a job the queue would take is one the predictor estimates. A
    // job waiting in the queue is estimated from when it was submitted (its
    // whole wait, the forecast its finish is scored against), not from now.
    int64_t submit_given = req.job().submit_unix_seconds();
    if (submit_given == 0 && req.job().job_id() > 0) {
      if (absl::StatusOr<sojourn::v1::QueuedJob> queued = queue_->Get(req.job().job_id());
          queued.ok() && queued->start_unix_seconds() == 0 &&
          NowUnix() - queued->spec().submit_unix_seconds() < turnaround::kMaxWaitSeconds) {
        submit_given = queued->spec().submit_unix_seconds();
      }
    }
    ASSIGN_OR_RETURN(const int64_t submit,
                     EventTime(req.job().job_id(), "submit_unix_seconds", submit_given));
    req.mutable_job()->set_submit_unix_seconds(submit);
    RETURN_IF_ERROR(CheckJobSpec(req.job()));
    std::vector<std::string> hosts;
    *req.mutable_snapshot() =
        Snapshot(request->has_policy() ? request->policy() : queue_config_.policy,
                 req.job().job_id(), &hosts);
    if (req.snapshot().nodes_size() == 0) {
      return absl::FailedPreconditionError(
          "no live host is registered: the turnaround kernels need at least one node");
    }
    ASSIGN_OR_RETURN(sojourn::v1::EstimateTurnaroundResponse r, history_->Estimate(req));
    for (auto& e : *r.mutable_estimates()) *response->add_estimates() = std::move(e);
    *response->mutable_snapshot() = std::move(*req.mutable_snapshot());
    for (auto& h : hosts) response->add_snapshot_hosts(std::move(h));
    return absl::OkStatus();
  });
}

}  // namespace sojourn::broker
