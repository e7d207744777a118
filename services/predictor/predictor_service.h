// gRPC adapter of the predictor. Predictions run on a worker pool (they make
// blocking calls to peers and crunch numbers), never on gRPC's threads.
#ifndef SOJOURN_SERVICES_PREDICTOR_PREDICTOR_SERVICE_H_
#define SOJOURN_SERVICES_PREDICTOR_PREDICTOR_SERVICE_H_

#include "common/metrics.h"
#include "common/thread_pool.h"
#include "models/turnaround/estimator.h"
#include "services/job_spec.h"
#include "services/predictor/availability_predictor.h"
#include "services/predictor/availability_scorer.h"
#include "sojourn/v1/predictor.grpc.pb.h"

namespace sojourn::predictor {

struct PredictorServiceConfig {
  // Job events and turnaround requests may carry times at most this many
  // seconds after the predictor's clock (AvailabilityPredictor::clock());
  // later ones are INVALID_ARGUMENT, so a finish time of INT64_MAX cannot
  // enter the job history and poison every later estimate. At least
  // kMaxJobClockSkewSeconds (1 h), the broker's limit for the job times it
  // takes: less, and the history would refuse events of jobs the broker
  // queued.
  int64_t max_clock_skew_seconds = kMaxJobClockSkewSeconds;
  // The directory of the RocksDB database and the MiB that must stay free
  // on its disk for a write to be taken (sojourn::CheckFreeDisk; 0 = no
  // check): RESOURCE_EXHAUSTED below it.
  std::string histdb_path;
  int64_t min_free_disk_mb = 0;
};

class PredictorService final : public sojourn::v1::Predictor::CallbackService {
 public:
  // `predictor` and `pool` must outlive the service.
  // `turnaround` may be null (then EstimateTurnaround and RecordJobEvent are
  // FAILED_PRECONDITION).
  PredictorService(AvailabilityPredictor& predictor, StatemgrDirectory& directory,
                   ThreadPool& pool, turnaround::TurnaroundEstimator* turnaround = nullptr,
                   const PredictorServiceConfig& config = {})
      : predictor_(predictor),
        directory_(directory),
        pool_(pool),
        turnaround_(turnaround),
        config_(config) {}

  grpc::ServerUnaryReactor* PredictAvailability(
      grpc::CallbackServerContext* context,
      const sojourn::v1::PredictAvailabilityRequest* request,
      sojourn::v1::PredictAvailabilityResponse* response) override;
  // Usage questions are answered by the host's state manager (its history
  // stays there). A statemgr_address that is not HOST:PORT is
  // INVALID_ARGUMENT; the state manager's INVALID_ARGUMENT / NOT_FOUND /
  // FAILED_PRECONDITION pass through, its other failures are UNAVAILABLE
  // naming it and the host, as for PredictAvailability (StatemgrCallError).
  grpc::ServerUnaryReactor* PredictUsage(grpc::CallbackServerContext* context,
                                         const sojourn::v1::PredictUsageRequest* request,
                                         sojourn::v1::PredictUsageResponse* response) override;
  grpc::ServerUnaryReactor* CanRun(grpc::CallbackServerContext* context,
                                   const sojourn::v1::CanRunRequest* request,
                                   sojourn::v1::CanRunResponse* response) override;
  grpc::ServerUnaryReactor* HowLong(grpc::CallbackServerContext* context,
                                    const sojourn::v1::HowLongRequest* request,
                                    sojourn::v1::HowLongResponse* response) override;
  grpc::ServerUnaryReactor* EstimateTurnaround(
      grpc::CallbackServerContext* context, const sojourn::v1::EstimateTurnaroundRequest* request,
      sojourn::v1::EstimateTurnaroundResponse* response) override;
  grpc::ServerUnaryReactor* RecordJobEvent(grpc::CallbackServerContext* context,
                                           const sojourn::v1::JobEvent* request,
                                           sojourn::v1::RecordJobEventResponse* response) override;
  // Pages of kDefaultJobHistoryPage records unless asked for fewer, at most
  // kMaxJobHistoryPage (100-160 bytes each: a page stays under gRPC's
  // default 4 MiB message limit).
  grpc::ServerUnaryReactor* ListJobHistory(grpc::CallbackServerContext* context,
                                           const sojourn::v1::ListJobHistoryRequest* request,
                                           sojourn::v1::ListJobHistoryResponse* response) override;
  static constexpr int32_t kDefaultJobHistoryPage = 10000;
  static constexpr int32_t kMaxJobHistoryPage = 20000;
  // At most kMaxJobHistoryPage records, all written in one batch or none.
  grpc::ServerUnaryReactor* ImportJobHistory(
      grpc::CallbackServerContext* context, const sojourn::v1::ImportJobHistoryRequest* request,
      sojourn::v1::ImportJobHistoryResponse* response) override;
  static constexpr size_t kMaxBatchIdLength = 128;

  // Scores the turnaround estimates live: when a job finishes, the estimate
  // last made for it under its id (EstimateTurnaround with job.job_id, as
  // the broker's EstimateJobTurnaround makes them; a forecast only: made
  // before the job started, for its submit time, procs and requested time)
  // against its observed wait, run and turnaround times, per kernel, in
  // counters from which PromQL gets paper 002's D_v = sum |Y - X| / sum X
  // over any range:
  //   sojourn_predictor_turnaround_scored_total{kernel, quantity}
  //   sojourn_predictor_turnaround_abs_error_seconds_total{kernel, quantity}
  //   sojourn_predictor_turnaround_observed_seconds_total{kernel, quantity}
  //   sojourn_predictor_turnaround_interval_hits_total{kernel, quantity}
  // (kernel historical, simulation, hybrid; quantity wait, run, turnaround;
  // a hit is an observed time inside the interval given). The baseline of
  // the papers beside them: kernel "user_estimate", quantity "run", the
  // job's requested time, for the same jobs (those with one), with no
  // interval_hits series. All exported at 0 from this call. `metrics` must
  // outlive the service; call before the server starts.
  void ExportTurnaroundAccuracy(Metrics& metrics);
  // Offers every PredictAvailability answer to `scorer` (AvailabilityScorer
  // keeps those it scores live). It must outlive the service; call before
  // the server starts.
  void ScoreAvailability(AvailabilityScorer* scorer) { scorer_ = scorer; }

 private:
  template <typename Req, typename Resp, typename Call>
  grpc::ServerUnaryReactor* Forward(grpc::CallbackServerContext* context, const Req* request,
                                    Resp* response, Call call);
  AvailabilityPredictor& predictor_;
  StatemgrDirectory& directory_;
  ThreadPool& pool_;
  // Latest time a turnaround request or job event may carry.
  int64_t LatestUnixSeconds() const;
  turnaround::TurnaroundEstimator* turnaround_;
  const PredictorServiceConfig config_;
  Metrics* accuracy_metrics_ = nullptr;
  AvailabilityScorer* scorer_ = nullptr;
};

}  // namespace sojourn::predictor

#endif  // SOJOURN_SERVICES_PREDICTOR_PREDICTOR_SERVICE_H_
