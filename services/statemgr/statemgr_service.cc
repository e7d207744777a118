#include "services/statemgr/statemgr_service.h"

#include <cmath>
#include <deque>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/cli_util.h"
#include "common/grpc_status.h"
#include "common/logging.h"
#include "common/reactors.h"
#include "common/status.h"
#include "common/text.h"
#include "common/tls.h"
#include "models/usage/forecasters.h"
#include "services/convert.h"
#include "services/statemgr/registrar.h"

namespace sojourn::statemgr {
namespace {

using sojourn::v1::PushSamplesRequest;
using sojourn::v1::PushSamplesResponse;

constexpr int64_t kMaxWindowSeconds = 7 * 86400;

// Event counters (declared at 0 by the constructor, so that their first
// increment is a visible change for Prometheus' rate()).
constexpr char kRejectedBatches[] = "sojourn_statemgr_rejected_batches_total";
constexpr char kRejectedBatchesHelp[] = "Sample batches rejected";
constexpr char kPersisted[] = "sojourn_statemgr_samples_persisted_total";
constexpr char kPersistedHelp[] = "Samples written to RocksDB";
constexpr char kDuplicates[] = "sojourn_statemgr_samples_duplicate_total";
constexpr char kDuplicatesHelp[] = "Samples received again and not stored";
// Duplicates that are not repeats: a sample stamped ahead of this state
// manager's clock (accepted within --max_clock_skew_seconds) makes every
// later real sample of the host up to its time "not after the last
// persisted", and those are lost.
constexpr char kShadowed[] = "sojourn_statemgr_samples_shadowed_total";
constexpr char kShadowedHelp[] =
    "Duplicate samples (not stored) of hosts whose newest stored sample is ahead of this state "
    "manager's clock (a sender whose clock is ahead, or one bad sample): new samples among them "
    "are lost";
constexpr char kUsageAnswers[] = "sojourn_statemgr_usage_answers_total";
constexpr char kUsageAnswersHelp[] = "Usage questions answered";
constexpr int64_t kMaxUtcOffsetSeconds = 14 * 3600;

// Reads accept any name a host may have been stored under; PushSamples
// applies the stricter sojourn::ValidateHostName to new names.
absl::Status ValidateHostName(const std::string& host) { return ValidateLookupName(host); }

// The time range [start, end) of GetStateIntervals and GetSeries; end 0 = up
// to the last sample. A negative end (GetWindowStats refuses one too) or an
// end before the start is a client mistake, not an empty answer.
absl::Status CheckRange(int64_t start_unix, int64_t end_unix) {
  if (end_unix < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "end_unix_seconds must be >= 0 (0 = up to the last sample), got ", end_unix));
  }
  if (end_unix != 0 && end_unix < start_unix) {
    return absl::InvalidArgumentError(absl::StrCat("end_unix_seconds is before start: ", end_unix,
                                                   " < start_unix_seconds ", start_unix,
                                                   " (0 = up to the last sample)"));
  }
  return absl::OkStatus();
}

// Reads batches of samples; each batch is persisted before the next is read,
// so the final response acknowledges only durable samples. A batch is
// validated whole before anything of it is stored: a bad sample rejects its
// batch atomically, and the error says what earlier batches stored.
class PushReactor final : public grpc::ServerReadReactor<PushSamplesRequest> {
 public:
  PushReactor(HostBook& book, Metrics& metrics, const StateManagerServiceConfig& config,
              const grpc::CallbackServerContext& context, PushSamplesResponse* response)
      : book_(book), metrics_(metrics), config_(config), response_(response) {
    if (config_.bind_hosts) peer_ = PeerCertificateIdentity(context);
    StartRead(&request_);
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      if (messages_ == 0) {
        Finish(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT,
                            "empty stream: send at least one PushSamplesRequest"));
      } else {
        Finish(grpc::Status::OK);
      }
      return;
    }
    ++messages_;
    absl::Status s = Handle();
    if (!s.ok()) {
      metrics_.Increment(kRejectedBatches, kRejectedBatchesHelp, {});
      if (response_->persisted_samples() > 0) {
        // The client only sees the error, not the response: say what of
        // this stream is already durable so it does not resend it all (or
        // think nothing was kept).
        s = absl::Status(s.code(), absl::StrCat(s.message(), " (message ", messages_,
                                                " of the stream, rejected whole; ",
                                                response_->persisted_samples(),
                                                " samples of earlier messages were stored)"));
      }
      Finish(ToGrpcStatus(s));
      return;
    }
    request_.Clear();
    StartRead(&request_);
  }

  void OnDone() override { delete this; }

 private:
  absl::Status Handle() {
    RETURN_IF_ERROR(sojourn::ValidateHostName(request_.host()));
    if (config_.bind_hosts) {
      RETURN_IF_ERROR(CheckHostNamed(peer_, "host", request_.host()));
      if (absl::Status own = CheckHostNamed(config_.own, "host", request_.host()); !own.ok()) {
        return absl::PermissionDeniedError(absl::StrCat(
            "host ", Excerpt(request_.host()),
            " is not this state manager's: its own certificate (--tls_cert) does not name it, "
            "and with --tls_bind_hosts a state manager keeps only its own host's samples"));
      }
    }
    const std::string host = Excerpt(request_.host());
    if (request_.period_seconds() != 0 &&
        (request_.period_seconds() < 1 || request_.period_seconds() > kMaxPeriodSeconds)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "host ", host, ": period_seconds must be in [1, ", kMaxPeriodSeconds,
          "] (0 = the state manager's default), got ", request_.period_seconds()));
    }
    if (request_.has_attributes()) {
      const sojourn::v1::HostAttributes& a = request_.attributes();
      RETURN_IF_ERROR(ValidateHostAttributes(host, a.cpu_mhz(), a.cpu_cores(), a.total_mem_mb()));
    }
    // Later than this is from the future (a wrong clock or a bad sender).
    const int64_t now = absl::ToUnixSeconds(book_.clock().Now());
    const int64_t latest = LatestAcceptedUnix(now, config_.max_clock_skew_seconds);
    std::vector<HostSample> samples;
    samples.reserve(request_.samples_size());
    int64_t prev = INT64_MIN;
    for (int i = 0; i < request_.samples_size(); ++i) {
      const sojourn::v1::HostSample& p = request_.samples(i);
      HostSample s = FromProto(p);
      if (!std::isfinite(s.cpu_load) || s.cpu_load < 0 || s.cpu_load > 1.05) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sample ", i, " of host ", host, ": cpu_load_ratio ", s.cpu_load,
            " is outside [0, 1]"));
      }
      s.cpu_load = std::min(s.cpu_load, 1.0);
      // A field that is present must be a number: NaN is not "unknown"
      // (unknown is an absent field).
      if (p.has_free_mem_mb() && !(std::isfinite(p.free_mem_mb()) && p.free_mem_mb() >= 0)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sample ", i, " of host ", host, ": free_mem_mb must be finite and >= 0, got ",
            p.free_mem_mb()));
      }
      for (const auto& [present, value, name] :
           {std::tuple(p.has_swap_in_pages_per_second(), p.swap_in_pages_per_second(),
                       "swap_in_pages_per_second"),
            std::tuple(p.has_swap_out_pages_per_second(), p.swap_out_pages_per_second(),
                       "swap_out_pages_per_second")}) {
        if (present && !(std::isfinite(value) && value >= 0)) {
          return absl::InvalidArgumentError(absl::StrCat("sample ", i, " of host ", host, ": ",
                                                         name, " must be finite and >= 0, got ",
                                                         value));
        }
      }
      if (s.unix_seconds <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat("sample ", i, " of host ", host, ": timestamp must be > 0"));
      }
      if (s.unix_seconds > latest) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sample ", i, " of host ", host, ": timestamp ", s.unix_seconds,
            " is more than ", config_.max_clock_skew_seconds,
            " s after the state manager's clock (", now,
            "; --max_clock_skew_seconds); the batch was not stored"));
      }
      if (s.unix_seconds < prev) {
        return absl::InvalidArgumentError(absl::StrCat(
            "sample ", i, " of host ", host, " is out of time order"));
      }
      prev = s.unix_seconds;
      samples.push_back(s);
    }
    // Attributes only when the message has them (message presence): a later
    // message of a stream without them keeps the stored ones.
    MetaUpdate update;
    if (request_.has_attributes()) update.attributes = request_.attributes();
    update.period_seconds = request_.period_seconds();
    RETURN_IF_ERROR(CheckFreeDisk(config_.db_path, config_.min_free_disk_mb, "--db_path"));
    auto result = book_.Append(request_.host(), samples, update);
    if (!result.ok()) return result.status();
    response_->set_persisted_samples(response_->persisted_samples() + result->persisted);
    response_->set_duplicate_samples(response_->duplicate_samples() + result->duplicates);
    (*response_->mutable_last_persisted_unix_seconds())[request_.host()] =
        result->last_persisted_unix;
    metrics_.Set("sojourn_statemgr_hosts", "Hosts held by this state manager", {},
                 static_cast<double>(book_.size()));
    metrics_.Increment(kPersisted, kPersistedHelp, {}, static_cast<double>(result->persisted));
    metrics_.Increment(kDuplicates, kDuplicatesHelp, {}, static_cast<double>(result->duplicates));
    if (result->duplicates > 0 && result->last_persisted_unix > now) {
      metrics_.Increment(kShadowed, kShadowedHelp, {}, static_cast<double>(result->duplicates));
    }
    return absl::OkStatus();
  }

  HostBook& book_;
  Metrics& metrics_;
  const StateManagerServiceConfig& config_;
  PushSamplesResponse* response_;
  PushSamplesRequest request_;
  CertificateIdentity peer_;  // the caller's certificate's, with bind_hosts
  int64_t messages_ = 0;
};

void FillStatus(const HostInfo& info, sojourn::v1::HostStatus* out) {
  out->set_host(info.host);
  out->set_first_sample_unix_seconds(info.first_unix);
  out->set_last_sample_unix_seconds(info.last_unix);
  out->set_sample_count(info.samples);
  out->set_current_state(ToProto(info.state));
  out->set_state_since_unix_seconds(info.state_since_unix);
  *out->mutable_attributes() = info.meta.attributes;
  out->set_period_seconds(info.meta.period_seconds);
  out->set_history_period_seconds(info.meta.history_period_seconds);
  out->set_period_changed_unix_seconds(info.meta.period_changed_unix);
}


constexpr char kWatchers[] = "sojourn_statemgr_watchers";
constexpr char kWatchersHelp[] = "WatchStates streams open";
constexpr char kWatchersDropped[] = "sojourn_statemgr_watchers_dropped_total";
constexpr char kWatchersDroppedHelp[] =
    "WatchStates streams ended because the watcher fell --max_watch_queue messages behind";

// One WatchStates stream: a StateWatcher whose changes are queued and written
// one at a time. Finish is called only when no write is in flight (after the
// last OnWriteDone), exactly once: on cancel, on a shutdown (OnClose), or when
// the queue overflows. OnDone unregisters from the book (waiting for a
// delivery in progress) before deleting.
class WatchReactor final : public grpc::ServerWriteReactor<sojourn::v1::StateTransition>,
                           public StateWatcher {
 public:
  WatchReactor(grpc::CallbackServerContext* context, HostBook& book, Metrics& metrics,
               std::atomic<int>& open, size_t max_queue,
               const sojourn::v1::WatchStatesRequest& request)
      : book_(book), metrics_(metrics), open_(open), max_queue_(max_queue) {
    if (!request.host().empty()) {
      // The check PushSamples applies: a name it refuses never changes state.
      if (absl::Status s = sojourn::ValidateHostName(request.host()); !s.ok()) {
        Finish(ToGrpcStatus(s));
        return;
      }
    }
    registered_ = true;
    context->AddInitialMetadata(std::string(kWatchRegisteredKey), "1");
    book_.AddWatcher(this, request.host(), !request.skip_snapshot());
    UpdateGauge(++open_);
    // The initial metadata leaves after the registration (alone, or with the
    // first snapshot message): a client that waits for it misses no change.
    absl::MutexLock l(&mu_);
    if (!wrote_ && !finish_called_) StartSendInitialMetadata();
  }

  void OnStateChange(const StateChange& change) override {
    absl::MutexLock l(&mu_);
    if (finishing_) return;
    // The snapshot (one message per host, queued at once on registration)
    // does not count: a book with more hosts than max_queue_ must not end
    // every watcher before its first change.
    if (!change.snapshot && queue_.size() - queued_snapshot_ >= max_queue_) {
      metrics_.Increment(kWatchersDropped, kWatchersDroppedHelp, {});
      EndLocked(grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                             absl::StrCat("the watcher fell more than ", max_queue_,
                                          " state changes behind; reconnect (the snapshot "
                                          "brings it up to date)")));
      return;
    }
    sojourn::v1::StateTransition t;
    t.set_host(change.host);
    if (change.from.has_value()) t.set_from_state(ToProto(*change.from));
    t.set_to_state(ToProto(change.to));
    t.set_since_unix_seconds(change.since_unix);
    t.set_snapshot(change.snapshot);
    t.set_reason(change.reason);
    if (change.snapshot) ++queued_snapshot_;
    queue_.push_back(std::move(t));
    if (!writing_) WriteNextLocked();
  }

  void OnClose() override {
    absl::MutexLock l(&mu_);
    EndLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "the state manager is shutting down"));
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&mu_);
    writing_ = false;
    if (!ok) EndLocked(grpc::Status(grpc::StatusCode::CANCELLED, "the stream broke"));
    if (finishing_) {
      FinishIfIdleLocked();
    } else if (!queue_.empty()) {
      WriteNextLocked();
    }
  }

  void OnCancel() override {
    absl::MutexLock l(&mu_);
    EndLocked(grpc::Status::CANCELLED);
  }

  void OnDone() override {
    if (registered_) {
      book_.RemoveWatcher(this);
      UpdateGauge(--open_);
    }
    delete this;
  }

 private:
  void UpdateGauge(int open) { metrics_.Set(kWatchers, kWatchersHelp, {}, open); }
  void WriteNextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    current_ = std::move(queue_.front());
    queue_.pop_front();
    if (current_.snapshot()) --queued_snapshot_;
    writing_ = true;
    wrote_ = true;
    StartWrite(&current_);
  }
  // The first reason to end wins.
  void EndLocked(const grpc::Status& status) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (finishing_) return;
    finishing_ = true;
    status_ = status;
    queue_.clear();
    queued_snapshot_ = 0;
    FinishIfIdleLocked();
  }
  void FinishIfIdleLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    if (writing_ || finish_called_) return;
    finish_called_ = true;
    Finish(status_);
  }

  HostBook& book_;
  Metrics& metrics_;
  std::atomic<int>& open_;
  const size_t max_queue_;
  bool registered_ = false;
  absl::Mutex mu_;
  std::deque<sojourn::v1::StateTransition> queue_ ABSL_GUARDED_BY(mu_);
  // Snapshot messages in queue_ (not counted against max_queue_).
  size_t queued_snapshot_ ABSL_GUARDED_BY(mu_) = 0;
  sojourn::v1::StateTransition current_ ABSL_GUARDED_BY(mu_);
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool wrote_ ABSL_GUARDED_BY(mu_) = false;
  bool finishing_ ABSL_GUARDED_BY(mu_) = false;
  bool finish_called_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
};

constexpr char kHostState[] = "sojourn_statemgr_host_state";
constexpr char kHostStateHelp[] =
    "Current availability state of each host: 1 S1 idle, 2 S2 busy, 3 S3 overloaded, 4 S4 "
    "memory short, 5 S5 gone (paper 000 section 4)";
constexpr char kTransitions[] = "sojourn_statemgr_state_transitions_total";
constexpr char kTransitionsHelp[] = "Host state changes, by the state entered";
constexpr const char* kStateLabels[] = {"S1", "S2", "S3", "S4", "S5"};

}  // namespace

StateMetrics::StateMetrics(Metrics& metrics) : metrics_(metrics) {
  for (const char* to : kStateLabels) metrics_.DeclareCounter(kTransitions, kTransitionsHelp, {{"to", to}});
}

void StateMetrics::OnStateChange(const StateChange& change) {
  const int state = availability::StateIndex(change.to);
  metrics_.Set(kHostState, kHostStateHelp, {{"host", change.host}}, state);
  if (!change.snapshot && change.from.has_value()) {
    metrics_.Increment(kTransitions, kTransitionsHelp, {{"to", kStateLabels[state - 1]}});
  }
}

StateManagerService::StateManagerService(HostBook& book, UsageKeeper& usage, ThreadPool& pool,
                                         Metrics& metrics, const StateManagerServiceConfig& config)
    : book_(book),
      usage_(usage),
      pool_(pool),
      metrics_(metrics),
      config_(config),
      state_metrics_(metrics) {
  // Every host's current state now, every change from now on.
  book_.AddWatcher(&state_metrics_, "", /*snapshot=*/true);
  metrics_.DeclareCounter(kRejectedBatches, kRejectedBatchesHelp, {});
  metrics_.DeclareCounter(kPersisted, kPersistedHelp, {});
  metrics_.DeclareCounter(kDuplicates, kDuplicatesHelp, {});
  metrics_.DeclareCounter(kShadowed, kShadowedHelp, {});
  metrics_.DeclareCounter(kWatchersDropped, kWatchersDroppedHelp, {});
  metrics_.Set(kWatchers, kWatchersHelp, {}, 0);
  // Every forecaster that may answer (kAllForecasters; kUpaPaper is for
  // comparison only and never answers a PredictUsage).
  for (usage::Forecaster f : usage::kAllForecasters) {
    metrics_.DeclareCounter(kUsageAnswers, kUsageAnswersHelp,
                            {{"method", usage::ForecasterName(f)}});
  }
}

grpc::ServerReadReactor<PushSamplesRequest>* StateManagerService::PushSamples(
    grpc::CallbackServerContext* context, PushSamplesResponse* response) {
  return new PushReactor(book_, metrics_, config_, *context, response);
}

StateManagerService::~StateManagerService() { book_.RemoveWatcher(&state_metrics_); }

grpc::ServerWriteReactor<sojourn::v1::StateTransition>* StateManagerService::WatchStates(
    grpc::CallbackServerContext* context, const sojourn::v1::WatchStatesRequest* request) {
  return new WatchReactor(context, book_, metrics_, open_watches_, config_.max_watch_queue,
                          *request);
}

grpc::ServerUnaryReactor* StateManagerService::ListHosts(
    grpc::CallbackServerContext* context, const sojourn::v1::ListHostsRequest* /*request*/,
    sojourn::v1::ListHostsResponse* response) {
  std::vector<HostInfo> hosts = book_.List();
  metrics_.Set("sojourn_statemgr_hosts", "Hosts held by this state manager", {},
               static_cast<double>(hosts.size()));
  for (const HostInfo& info : hosts) FillStatus(info, response->add_hosts());
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* StateManagerService::GetStateIntervals(
    grpc::CallbackServerContext* context, const sojourn::v1::GetStateIntervalsRequest* request,
    sojourn::v1::GetStateIntervalsResponse* response) {
  if (absl::Status s = ValidateHostName(request->host()); !s.ok()) return FinishNow(context, s);
  if (absl::Status s = CheckRange(request->start_unix_seconds(), request->end_unix_seconds());
      !s.ok()) {
    return FinishNow(context, s);
  }
  int64_t step = 0;
  auto intervals = book_.Intervals(request->host(), request->start_unix_seconds(),
                                   request->end_unix_seconds(), &step, request->through_silence());
  if (!intervals.ok()) return FinishNow(context, intervals.status());
  response->set_step_seconds(step);
  for (const StateInterval& i : *intervals) {
    auto* out = response->add_intervals();
    out->set_state(ToProto(i.state));
    out->set_start_unix_seconds(i.start_unix);
    out->set_end_unix_seconds(i.end_unix);
  }
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* StateManagerService::GetWindowStats(
    grpc::CallbackServerContext* context, const sojourn::v1::GetWindowStatsRequest* request,
    sojourn::v1::GetWindowStatsResponse* response) {
  if (absl::Status s = ValidateHostName(request->host()); !s.ok()) return FinishNow(context, s);
  if (request->length_seconds() <= 0 || request->length_seconds() > kMaxWindowSeconds) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                             "length_seconds must be in (0, ", kMaxWindowSeconds, "], got ",
                             request->length_seconds())));
  }
  if (request->start_second_of_day() < 0 || request->start_second_of_day() >= 86400) {
    return FinishNow(context, absl::InvalidArgumentError("start_second_of_day must be in [0, 86400)"));
  }
  if (request->history_days() < 0) {
    return FinishNow(context, absl::InvalidArgumentError("history_days must be >= 0"));
  }
  // Compared as int64: std::abs(INT32_MIN) overflows and let it through.
  const int64_t utc_offset = request->utc_offset_seconds();
  if (utc_offset < -kMaxUtcOffsetSeconds || utc_offset > kMaxUtcOffsetSeconds) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                             "utc_offset_seconds must be within +-14 h, got ", utc_offset)));
  }
  if (request->end_unix_seconds() < 0) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                             "end_unix_seconds must be >= 0 (0 = the last sample), got ",
                             request->end_unix_seconds())));
  }
  if (!sojourn::v1::DayType_IsValid(request->day_type())) {
    return FinishNow(context, absl::InvalidArgumentError(absl::StrCat(
                             "day_type ", request->day_type(),
                             " is not a DayType (DAY_TYPE_WEEKDAY or DAY_TYPE_WEEKEND)")));
  }
  availability::WindowSpec spec;
  spec.day_type = request->day_type() == sojourn::v1::DAY_TYPE_WEEKEND
                      ? availability::DayType::kWeekend
                      : availability::DayType::kWeekday;
  spec.start_second_of_day = request->start_second_of_day();
  spec.length_seconds = request->length_seconds();
  spec.history_days = request->history_days();
  if (request->time_zone().empty()) {
    spec.clock = request->utc_offset_seconds();
  } else {
    auto zone = availability::LocalClock::Zone(request->time_zone());
    if (!zone.ok()) return FinishNow(context, zone.status());
    spec.clock = *std::move(zone);
  }
  availability::EstimatorOptions opt = request->paper_literal()
                                           ? availability::PaperEstimatorOptions()
                                           : availability::EstimatorOptions();
  if (!request->paper_literal()) opt.exact_age_first_sojourn = request->exact_age();
  opt.host_frailty = request->failure_exposure();
  opt.load_band_first_sojourn = !request->paper_literal() && request->load_band();
  auto result = book_.WindowStats(request->host(), spec, request->end_unix_seconds(), opt,
                                  request->deployed_estimates());
  if (!result.ok()) return FinishNow(context, result.status());
  *response->mutable_stats() = ToProto(result->stats);
  response->set_current_state(ToProto(result->info.state));
  response->set_state_since_unix_seconds(result->info.state_since_unix);
  response->set_last_sample_unix_seconds(result->info.last_unix);
  response->set_revocation_gap_seconds(result->info.revocation_gap_seconds);
  // The condition now, as the registrar reports it (a window in the past has
  // its own state in `info`).
  if (request->end_unix_seconds() == 0) {
    *response->mutable_condition() = ConditionProto(result->info);
  }
  for (int64_t t : result->window_starts_unix) response->add_window_start_unix_seconds(t);
  response->set_whole_history_fallback(result->whole_history_fallback);
  if (result->failure_exposure) {
    *response->mutable_failure_exposure() = ToProto(*result->failure_exposure);
  }
  if (result->band_exposure) {
    *response->mutable_band_exposure() = ToProto(*result->band_exposure);
    response->set_load_band(LoadBandToProto(result->load_band));
  }
  if (result->deployed) {
    sojourn::v1::DeployedEstimates* d = response->mutable_deployed_estimates();
    d->set_avail_time_tr(result->deployed->avail_time_tr);
    d->set_completed_up_intervals(result->deployed->completed_intervals);
    d->set_up_seconds(result->deployed->up_steps * result->stats.step_seconds);
    d->set_on_fraction(result->deployed->on_fraction);
  }
  for (const auto& [horizon, load] : result->load_forecast) {
    auto* p = response->add_load_forecast();
    p->set_horizon_seconds(horizon);
    p->set_load_ratio(load);
  }
  return FinishNow(context, absl::OkStatus());
}

grpc::ServerUnaryReactor* StateManagerService::GetSeries(
    grpc::CallbackServerContext* context, const sojourn::v1::GetSeriesRequest* request,
    sojourn::v1::GetSeriesResponse* response) {
  if (absl::Status s = ValidateHostName(request->host()); !s.ok()) return FinishNow(context, s);
  if (request->max_samples() < 0) {
    return FinishNow(context, absl::InvalidArgumentError("max_samples must be >= 0"));
  }
  if (absl::Status s = CheckRange(request->start_unix_seconds(), request->end_unix_seconds());
      !s.ok()) {
    return FinishNow(context, s);
  }
  bool truncated = false;
  const size_t max = request->max_samples() == 0 ? 100000 : request->max_samples();
  auto samples = book_.Series(request->host(), request->start_unix_seconds(),
                              request->end_unix_seconds(), max, &truncated);
  if (!samples.ok()) return FinishNow(context, samples.status());
  for (const HostSample& s : *samples) *response->add_samples() = ToProto(s);
  response->set_truncated(truncated);
  return FinishNow(context, absl::OkStatus());
}


namespace {

void FillMethod(const usage::MethodChoice& m, sojourn::v1::UsageMethod* out) {
  out->set_method(usage::ForecasterName(m.method));
  out->set_why(m.why);
  if (m.by_selector && std::isfinite(m.recent_error)) out->set_recent_error_ratio(m.recent_error);
  out->set_recent_points(m.recent_points);
  out->set_by_selector(m.by_selector);
}

absl::Status CheckHours(double hours) {
  if (!(hours > 0) || hours > 72) {
    return absl::InvalidArgumentError(absl::StrCat("hours must be in (0, 72], got ", hours));
  }
  return absl::OkStatus();
}

// MiB -> fraction of the host's memory; the request is refused when the
// capacity is unknown and memory was asked for.
absl::StatusOr<double> MemFraction(double free_mem_mb, double total_mem_mb) {
  if (!(free_mem_mb >= 0) || !std::isfinite(free_mem_mb)) {
    return absl::InvalidArgumentError("free_mem_mb must be >= 0");
  }
  if (free_mem_mb == 0) return 0.0;
  if (total_mem_mb <= 0) {
    return absl::FailedPreconditionError("the host reports no memory data; ask without memory");
  }
  return free_mem_mb / total_mem_mb;
}

absl::Status CheckCpu(double free_cpu) {
  if (!(free_cpu >= 0 && free_cpu <= 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("free_cpu_ratio must be in [0, 1], got ", free_cpu));
  }
  return absl::OkStatus();
}

}  // namespace

grpc::ServerUnaryReactor* StateManagerService::PredictUsage(
    grpc::CallbackServerContext* context, const sojourn::v1::PredictUsageRequest* request,
    sojourn::v1::PredictUsageResponse* response) {
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    RETURN_IF_ERROR(ValidateHostName(request->host()));
    ASSIGN_OR_RETURN(usage::Resource resource, usage::ParseResource(request->resource()));
    RETURN_IF_ERROR(CheckHours(request->hours()));
    ASSIGN_OR_RETURN(UsageKeeper::Model m, usage_.Get(request->host()));
    ASSIGN_OR_RETURN(usage::UsageForecast f, m.model->PredictUsage(resource, request->hours()));
    response->set_host(request->host());
    response->set_resource(usage::ResourceName(resource));
    response->set_start_unix_seconds(f.start_unix);
    response->set_step_seconds(f.step_seconds);
    for (double v : f.use) response->add_use_ratio(v);
    FillMethod(f.method, response->mutable_method());
    metrics_.Increment(kUsageAnswers, kUsageAnswersHelp,
                       {{"method", usage::ForecasterName(f.method.method)}});
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* StateManagerService::CanRun(
    grpc::CallbackServerContext* context, const sojourn::v1::CanRunRequest* request,
    sojourn::v1::CanRunResponse* response) {
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    RETURN_IF_ERROR(ValidateHostName(request->host()));
    RETURN_IF_ERROR(CheckHours(request->hours()));
    RETURN_IF_ERROR(CheckCpu(request->free_cpu_ratio()));
    ASSIGN_OR_RETURN(UsageKeeper::Model m, usage_.Get(request->host()));
    ASSIGN_OR_RETURN(double mem, MemFraction(request->free_mem_mb(), m.total_mem_mb));
    if (mem > 1) {
      response->set_can_run(false);
      response->set_reason(absl::StrFormat("mem: needs %.10g MiB free, the host has %.10g MiB in all",
                                           request->free_mem_mb(), m.total_mem_mb));
      response->set_method("capacity");
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(usage::CanRunAnswer a,
                     m.model->CanRun(request->free_cpu_ratio(), mem, request->hours()));
    response->set_can_run(a.can_run);
    response->set_reason(a.reason);
    response->set_method(a.method);
    FillMethod(a.cpu_method, response->mutable_cpu_method());
    FillMethod(a.mem_method, response->mutable_mem_method());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* StateManagerService::HowLong(
    grpc::CallbackServerContext* context, const sojourn::v1::HowLongRequest* request,
    sojourn::v1::HowLongResponse* response) {
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    RETURN_IF_ERROR(ValidateHostName(request->host()));
    RETURN_IF_ERROR(CheckCpu(request->free_cpu_ratio()));
    ASSIGN_OR_RETURN(UsageKeeper::Model m, usage_.Get(request->host()));
    ASSIGN_OR_RETURN(double mem, MemFraction(request->free_mem_mb(), m.total_mem_mb));
    if (mem > 1) {  // more than the host has at all
      response->set_hours(0);
      response->set_limited_by("mem");
      response->set_method("capacity");
      return absl::OkStatus();
    }
    ASSIGN_OR_RETURN(usage::HowLongAnswer a, m.model->HowLong(request->free_cpu_ratio(), mem));
    response->set_hours(a.hours);
    response->set_capped(a.capped);
    response->set_limited_by(a.limited_by);
    response->set_method(a.method);
    FillMethod(a.cpu_method, response->mutable_cpu_method());
    FillMethod(a.mem_method, response->mutable_mem_method());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* StateManagerService::AnalyzeUsage(
    grpc::CallbackServerContext* context, const sojourn::v1::AnalyzeUsageRequest* request,
    sojourn::v1::AnalyzeUsageResponse* response) {
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    RETURN_IF_ERROR(ValidateHostName(request->host()));
    ASSIGN_OR_RETURN(UsageKeeper::Model m, usage_.Analyze(request->host()));
    response->set_analyzed_unix_seconds(m.analyzed_unix);
    response->set_cpu_prototypes(
        static_cast<int32_t>(m.model->patterns().cpu.prototypes.size()));
    response->set_mem_prototypes(
        static_cast<int32_t>(m.model->patterns().mem.prototypes.size()));
    return absl::OkStatus();
  });
}

}  // namespace sojourn::statemgr
