#include "services/predictor/predictor_service.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cli_util.h"
#include "common/grpc_status.h"
#include "common/reactors.h"
#include "common/status.h"
#include "common/text.h"
#include "services/job_spec.h"
#include "services/predictor/turnaround_convert.h"

namespace sojourn::predictor {
namespace {

constexpr char kScoredMetric[] = "sojourn_predictor_turnaround_scored_total";
constexpr char kScoredHelp[] =
    "Finished jobs whose last turnaround estimate (EstimateTurnaround with the job's id) was "
    "scored against what happened, by kernel and quantity (wait, run, turnaround)";
constexpr char kAbsErrorMetric[] = "sojourn_predictor_turnaround_abs_error_seconds_total";
constexpr char kAbsErrorHelp[] =
    "Sum of |observed - estimated| over the scored estimates, seconds; divided by the observed "
    "sum over the same range it is paper 002's D_v";
constexpr char kObservedMetric[] = "sojourn_predictor_turnaround_observed_seconds_total";
constexpr char kObservedHelp[] = "Sum of the observed times of the scored estimates, seconds";
constexpr char kHitsMetric[] = "sojourn_predictor_turnaround_interval_hits_total";
constexpr char kHitsHelp[] =
    "Scored estimates whose observed time fell inside the interval given with them";
constexpr const char* kQuantities[3] = {"wait", "run", "turnaround"};

void CountScored(const turnaround::ScoredEstimate& x, Metrics& metrics) {
  const MetricLabels labels = {{"kernel", turnaround::KernelName(x.kernel)},
                               {"quantity", kQuantities[x.quantity]}};
  metrics.Increment(kScoredMetric, kScoredHelp, labels);
  metrics.Increment(kAbsErrorMetric, kAbsErrorHelp, labels, std::abs(x.observed - x.predicted));
  metrics.Increment(kObservedMetric, kObservedHelp, labels, x.observed);
  if (x.kernel != turnaround::Kernel::kUserEstimate && x.observed >= x.lo && x.observed <= x.hi) {
    metrics.Increment(kHitsMetric, kHitsHelp, labels);
  }
}

}  // namespace

void PredictorService::ExportTurnaroundAccuracy(Metrics& metrics) {
  accuracy_metrics_ = &metrics;
  for (turnaround::Kernel k : {turnaround::Kernel::kHistorical, turnaround::Kernel::kSimulation,
                               turnaround::Kernel::kHybrid, turnaround::Kernel::kUserEstimate}) {
    for (int q = 0; q < 3; ++q) {
      if (k == turnaround::Kernel::kUserEstimate && q != 1) continue;
      const MetricLabels labels = {{"kernel", turnaround::KernelName(k)},
                                   {"quantity", kQuantities[q]}};
      metrics.DeclareCounter(kScoredMetric, kScoredHelp, labels);
      metrics.DeclareCounter(kAbsErrorMetric, kAbsErrorHelp, labels);
      metrics.DeclareCounter(kObservedMetric, kObservedHelp, labels);
      if (k != turnaround::Kernel::kUserEstimate) {
        metrics.DeclareCounter(kHitsMetric, kHitsHelp, labels);
      }
    }
  }
}


grpc::ServerUnaryReactor* PredictorService::PredictAvailability(
    grpc::CallbackServerContext* context, const sojourn::v1::PredictAvailabilityRequest* request,
    sojourn::v1::PredictAvailabilityResponse* response) {
  // The caller's deadline bounds the call to the state manager too.
  const absl::Time caller_deadline = absl::FromChrono(context->deadline());
  return FinishOnPool(context, pool_, [this, request, response, caller_deadline]() -> absl::Status {
    std::string address;
    ASSIGN_OR_RETURN(*response, predictor_.Predict(*request, caller_deadline, &address));
    if (scorer_ != nullptr) {
      scorer_->Offer(*request, *response, address);
    }
    return absl::OkStatus();
  });
}

template <typename Req, typename Resp, typename Call>
grpc::ServerUnaryReactor* PredictorService::Forward(grpc::CallbackServerContext* context,
                                                    const Req* request, Resp* response,
                                                    Call call) {
  const absl::Time caller_deadline = absl::FromChrono(context->deadline());
  return FinishOnPool(context, pool_,
                      [this, request, response, call, caller_deadline]() -> absl::Status {
    std::string address;
    ASSIGN_OR_RETURN(std::shared_ptr<sojourn::v1::StateManager::Stub> stub,
                     directory_.Find(request->host(), request->statemgr_address(), &address));
    Req forwarded = *request;
    forwarded.clear_statemgr_address();
    ASSIGN_OR_RETURN(const absl::Duration timeout, directory_.Admit(address, request->host()));
    const StatemgrDirectory::CallDeadline deadline =
        StatemgrDirectory::DeadlineFor(timeout, caller_deadline);
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(deadline.at));
    grpc::Status s = call(stub.get(), &ctx, forwarded, response);
    directory_.Record(address, s, StatemgrDirectory::Use::kRequest, deadline.callers);
    if (s.ok()) return absl::OkStatus();
    // As PredictAvailability: the state manager's verdicts pass through, any
    // other failure (e.g. UNIMPLEMENTED from a peer that is not a state
    // manager, which read as "the predictor lacks this RPC") is UNAVAILABLE
    // naming the state manager and the host.
    return StatemgrCallError(address, request->host(), s, deadline.callers);
  });
}

grpc::ServerUnaryReactor* PredictorService::PredictUsage(
    grpc::CallbackServerContext* context, const sojourn::v1::PredictUsageRequest* request,
    sojourn::v1::PredictUsageResponse* response) {
  return Forward(context, request, response,
                 [](sojourn::v1::StateManager::Stub* stub, grpc::ClientContext* ctx,
                    const sojourn::v1::PredictUsageRequest& req,
                    sojourn::v1::PredictUsageResponse* resp) {
                   return stub->PredictUsage(ctx, req, resp);
                 });
}

grpc::ServerUnaryReactor* PredictorService::CanRun(grpc::CallbackServerContext* context,
                                                   const sojourn::v1::CanRunRequest* request,
                                                   sojourn::v1::CanRunResponse* response) {
  return Forward(context, request, response,
                 [](sojourn::v1::StateManager::Stub* stub, grpc::ClientContext* ctx,
                    const sojourn::v1::CanRunRequest& req, sojourn::v1::CanRunResponse* resp) {
                   return stub->CanRun(ctx, req, resp);
                 });
}

grpc::ServerUnaryReactor* PredictorService::HowLong(grpc::CallbackServerContext* context,
                                                    const sojourn::v1::HowLongRequest* request,
                                                    sojourn::v1::HowLongResponse* response) {
  return Forward(context, request, response,
                 [](sojourn::v1::StateManager::Stub* stub, grpc::ClientContext* ctx,
                    const sojourn::v1::HowLongRequest& req, sojourn::v1::HowLongResponse* resp) {
                   return stub->HowLong(ctx, req, resp);
                 });
}

int64_t PredictorService::LatestUnixSeconds() const {
  const int64_t now = absl::ToUnixSeconds(predictor_.clock().Now());
  return now > INT64_MAX - config_.max_clock_skew_seconds ? INT64_MAX
                                                          : now + config_.max_clock_skew_seconds;
}

grpc::ServerUnaryReactor* PredictorService::EstimateTurnaround(
    grpc::CallbackServerContext* context, const sojourn::v1::EstimateTurnaroundRequest* request,
    sojourn::v1::EstimateTurnaroundResponse* response) {
  // `context` stays valid until the work finishes the call.
  return FinishOnPool(context, pool_, [this, context, request, response]() -> absl::Status {
    if (turnaround_ == nullptr) return absl::FailedPreconditionError("no job history configured");
    const int64_t latest = LatestUnixSeconds();
    ASSIGN_OR_RETURN(turnaround::JobSpec job, FromProto(request->job(), latest));
    if (job.submit_time <= 0) {
      return absl::InvalidArgumentError(absl::StrCat("job ", job.job_id,
                                                     ": submit_unix_seconds must be > 0"));
    }
    // now_unix_seconds > 0 and consistent running jobs, as for RecordJobEvent.
    ASSIGN_OR_RETURN(turnaround::ClusterSnapshot snapshot, FromProto(request->snapshot(), latest));
    turnaround::EstimateRequest er{job, std::move(snapshot)};
    // Stop simulating once the client is gone or its deadline has passed.
    er.cancelled = [context] { return context->IsCancelled(); };
    ASSIGN_OR_RETURN(turnaround::TurnaroundResult r, turnaround_->Estimate(er));
    *response->add_estimates() = ToProto("historical", r.historical);
    *response->add_estimates() = ToProto("simulation", r.simulation);
    *response->add_estimates() = ToProto("hybrid", r.hybrid);
    return absl::OkStatus();
  });
}

namespace {

int64_t EventJobId(const sojourn::v1::JobEvent& e) {
  switch (e.event_case()) {
    case sojourn::v1::JobEvent::kSubmitted: return e.submitted().job().job_id();
    case sojourn::v1::JobEvent::kStarted: return e.started().job_id();
    case sojourn::v1::JobEvent::kFinished: return e.finished().job_id();
    case sojourn::v1::JobEvent::kCancelled: return e.cancelled().job_id();
    default: return 0;
  }
}

}  // namespace

grpc::ServerUnaryReactor* PredictorService::RecordJobEvent(
    grpc::CallbackServerContext* context, const sojourn::v1::JobEvent* request,
    sojourn::v1::RecordJobEventResponse* response) {
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    if (turnaround_ == nullptr) return absl::FailedPreconditionError("no job history configured");
    RETURN_IF_ERROR(
        CheckFreeDisk(config_.histdb_path, config_.min_free_disk_mb, "--histdb_path"));
    // What is stored here feeds every later estimate: times beyond the clock
    // or non-finite CPU seconds would poison them (a turnaround of 9.2e18 s).
    const int64_t latest = LatestUnixSeconds();
    auto check_time = [latest](int64_t job_id, const char* field, int64_t t) {
      if (t > 0 && t <= latest) return absl::OkStatus();
      return absl::InvalidArgumentError(absl::StrCat("job ", job_id, ": ", field, " ", t,
                                                     " must be in (0, ", latest,
                                                     "] (the predictor's clock + skew)"));
    };
    // The history keys on the id: with 0 (a client that forgot the field)
    // all such jobs would be one. The broker's queue refuses it too.
    if (request->event_case() != sojourn::v1::JobEvent::EVENT_NOT_SET) {
      RETURN_IF_ERROR(CheckRecordedJobId(EventJobId(*request)));
    }
    switch (request->event_case()) {
      case sojourn::v1::JobEvent::kSubmitted: {
        ASSIGN_OR_RETURN(turnaround::JobSpec job, FromProto(request->submitted().job(), latest));
        RETURN_IF_ERROR(check_time(job.job_id, "submit_unix_seconds", job.submit_time));
        ASSIGN_OR_RETURN(turnaround::ClusterSnapshot s,
                         FromProto(request->submitted().snapshot(), latest));
        // The queue at submit, without the job: as for an estimate.
        RETURN_IF_ERROR(turnaround::CheckSelfInSnapshot("submitted", job.job_id, s));
        RETURN_IF_ERROR(turnaround_->OnSubmitted(job, s));
        break;
      }
      case sojourn::v1::JobEvent::kStarted: {
        const auto& e = request->started();
        // An unknown job is NOT_FOUND before anything else is judged.
        ASSIGN_OR_RETURN(const turnaround::JobRecord pending,
                         turnaround_->db().GetPending(e.job_id()));
        RETURN_IF_ERROR(check_time(e.job_id(), "start_unix_seconds", e.start_unix_seconds()));
        if (e.nodes().empty()) {
          return absl::InvalidArgumentError(
              absl::StrCat("job ", e.job_id(), ": started on no node (nodes is empty)"));
        }
        ASSIGN_OR_RETURN(turnaround::ClusterSnapshot s, FromProto(e.snapshot(), latest));
        std::vector<char> seen(static_cast<size_t>(e.snapshot().nodes_size()), 0);
        for (int32_t n : e.nodes()) {
          if (n < 0 || n >= e.snapshot().nodes_size()) {
            return absl::InvalidArgumentError(
                absl::StrCat("job ", e.job_id(), ": started on node ", n,
                             ", outside the snapshot's ", e.snapshot().nodes_size(), " nodes"));
          }
          if (seen[n]++ > 0) {
            return absl::InvalidArgumentError(absl::StrCat(
                "job ", e.job_id(), ": nodes lists node ", n, " twice (one task per node)"));
          }
        }
        if (e.nodes_size() != pending.spec.procs) {
          return absl::InvalidArgumentError(absl::StrCat(
              "job ", e.job_id(), ": nodes lists ", e.nodes_size(), " nodes for the ",
              pending.spec.procs, " procs it was submitted with (one node per task)"));
        }
        // The snapshot may hold the job as running (the broker's does), but
        // then as this event starts it, and never as waiting.
        turnaround::RunningJob as_started;
        as_started.start_time = e.start_unix_seconds();
        as_started.nodes.assign(e.nodes().begin(), e.nodes().end());
        RETURN_IF_ERROR(turnaround::CheckSelfInSnapshot("started", e.job_id(), s, &as_started));
        RETURN_IF_ERROR(
            turnaround_->OnStarted(e.job_id(), e.start_unix_seconds(), as_started.nodes, s));
        break;
      }
      case sojourn::v1::JobEvent::kFinished: {
        const auto& e = request->finished();
        RETURN_IF_ERROR(turnaround_->db().GetPending(e.job_id()).status());
        RETURN_IF_ERROR(check_time(e.job_id(), "finish_unix_seconds", e.finish_unix_seconds()));
        const double cpu = e.cpu_seconds_per_task();
        if (!(cpu == -1 || (std::isfinite(cpu) && cpu >= 0))) {
          return absl::InvalidArgumentError(absl::StrCat(
              "job ", e.job_id(), ": cpu_seconds_per_task must be finite and >= 0 (-1 = unknown), got ",
              cpu));
        }
        std::vector<turnaround::ScoredEstimate> scored;
        RETURN_IF_ERROR(turnaround_->OnFinished(e.job_id(), e.finish_unix_seconds(), cpu,
                                                accuracy_metrics_ != nullptr ? &scored : nullptr));
        for (const turnaround::ScoredEstimate& x : scored) CountScored(x, *accuracy_metrics_);
        break;
      }
      case sojourn::v1::JobEvent::kCancelled:
        RETURN_IF_ERROR(turnaround_->OnCancelled(request->cancelled().job_id()));
        break;
      default:
        return absl::InvalidArgumentError("empty job event");
    }
    response->set_history_records(turnaround_->db().size());
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PredictorService::ListJobHistory(
    grpc::CallbackServerContext* context, const sojourn::v1::ListJobHistoryRequest* request,
    sojourn::v1::ListJobHistoryResponse* response) {
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    if (turnaround_ == nullptr) return absl::FailedPreconditionError("no job history configured");
    const int32_t size = request->page_size();
    if (size < 0 || size > kMaxJobHistoryPage) {
      return absl::InvalidArgumentError(absl::StrCat("page_size ", size, " must be in [0, ",
                                                     kMaxJobHistoryPage,
                                                     "] (0 = ", kDefaultJobHistoryPage, ")"));
    }
    // The whole history's count first: a record put during the page is then
    // never missing from the count.
    response->set_history_records(turnaround_->db().size());
    ASSIGN_OR_RETURN(
        turnaround::HistoryPage page,
        turnaround_->db().Scan(request->page_token(), size == 0 ? kDefaultJobHistoryPage : size));
    for (const turnaround::JobRecord& r : page.records) {
      if (r.spec.submit_time < request->submitted_since_unix_seconds()) continue;
      *response->add_records() = ToProto(r);
    }
    response->set_next_page_token(std::move(page.next_cursor));
    return absl::OkStatus();
  });
}

grpc::ServerUnaryReactor* PredictorService::ImportJobHistory(
    grpc::CallbackServerContext* context, const sojourn::v1::ImportJobHistoryRequest* request,
    sojourn::v1::ImportJobHistoryResponse* response) {
  return FinishOnPool(context, pool_, [this, request, response]() -> absl::Status {
    if (turnaround_ == nullptr) return absl::FailedPreconditionError("no job history configured");
    RETURN_IF_ERROR(CheckFreeDisk(config_.histdb_path, config_.min_free_disk_mb, "--histdb_path"));
    const std::string& id = request->batch_id();
    if (id.empty() || id.size() > kMaxBatchIdLength ||
        !std::all_of(id.begin(), id.end(), [](char c) { return c > ' ' && c < 127; })) {
      return absl::InvalidArgumentError(
          absl::StrCat("batch_id must be 1 to ", kMaxBatchIdLength,
                       " printable ASCII characters without spaces, got '", Excerpt(id), "'"));
    }
    // An empty batch would use up its id: the records sent later under it
    // would be taken as already imported.
    if (request->records_size() == 0 || request->records_size() > kMaxJobHistoryPage) {
      return absl::InvalidArgumentError(absl::StrCat("a batch holds 1 to ", kMaxJobHistoryPage,
                                                     " records, got ", request->records_size()));
    }
    const int64_t latest = LatestUnixSeconds();
    std::vector<turnaround::JobRecord> records;
    records.reserve(request->records_size());
    for (int i = 0; i < request->records_size(); ++i) {
      absl::StatusOr<turnaround::JobRecord> r = FromProto(request->records(i), latest);
      if (!r.ok()) {
        return absl::InvalidArgumentError(absl::StrCat("records[", i, "]: ", r.status().message()));
      }
      records.push_back(*std::move(r));
    }
    ASSIGN_OR_RETURN(const bool written, turnaround_->db().PutBatch(records, id));
    response->set_imported(written ? request->records_size() : 0);
    response->set_already_imported(!written);
    response->set_history_records(turnaround_->db().size());
    return absl::OkStatus();
  });
}

}  // namespace sojourn::predictor
