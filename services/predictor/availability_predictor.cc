#include "services/predictor/availability_predictor.h"

#include <algorithm>
#include <cmath>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/grpc_status.h"
#include "models/availability/predict.h"
#include "models/availability/window.h"
#include "services/convert.h"

namespace sojourn::predictor {
namespace {
constexpr int64_t kMaxWindowSeconds = 7 * 86400;
}  // namespace

AvailabilityPredictor::AvailabilityPredictor(const AvailabilityPredictorConfig& config,
                                             Clock& clock)
    : config_(config), clock_(clock) {
  if (!config_.broker_address.empty()) {
    broker_ = sojourn::v1::Broker::NewStub(
        grpc::CreateChannel(config_.broker_address, grpc::InsecureChannelCredentials()));
  }
}

absl::StatusOr<std::string> AvailabilityPredictor::StatemgrAddress(const std::string& host) {
  sojourn::v1::GetHostRequest req;
  req.set_host(host);
  sojourn::v1::RegisteredHost resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + config_.rpc_timeout));
  grpc::Status s = broker_->GetHost(&ctx, req, &resp);
  if (!s.ok()) {
    absl::Status st = FromGrpcStatus(s);
    if (absl::IsNotFound(st)) return st;
    return absl::UnavailableError(absl::StrCat("broker ", config_.broker_address,
                                               " unreachable: ", s.error_message()));
  }
  return resp.statemgr_address();
}

sojourn::v1::StateManager::Stub* AvailabilityPredictor::StatemgrStub(const std::string& address) {
  absl::MutexLock l(&mu_);
  auto& stub = statemgrs_[address];
  if (stub == nullptr) {
    stub = sojourn::v1::StateManager::NewStub(
        grpc::CreateChannel(address, grpc::InsecureChannelCredentials()));
  }
  return stub.get();
}

absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> AvailabilityPredictor::Predict(
    const sojourn::v1::PredictAvailabilityRequest& request) {
  if (request.host().empty()) return absl::InvalidArgumentError("host is required");
  if (request.window_seconds() <= 0 || request.window_seconds() > kMaxWindowSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("window_seconds must be in (0, ",
                                                   kMaxWindowSeconds, "], got ",
                                                   request.window_seconds()));
  }
  if (request.history_days() < 0 || request.curve_points() < 0 ||
      request.curve_points() > 100000) {
    return absl::InvalidArgumentError("history_days must be >= 0, curve_points in [0, 100000]");
  }
  absl::StatusOr<std::string> address = request.statemgr_address();
  if (request.statemgr_address().empty()) {
    if (config_.broker_address.empty()) {
      return absl::FailedPreconditionError(
          "no broker configured (--broker) to find the host's state manager; pass "
          "statemgr_address");
    }
    address = StatemgrAddress(request.host());
    if (!address.ok()) return address.status();
  }

  const int64_t start = request.start_unix_seconds() > 0 ? request.start_unix_seconds()
                                                         : absl::ToUnixSeconds(clock_.Now());
  const availability::DayType day_type =
      availability::DayTypeOf(start, config_.utc_offset_seconds);
  sojourn::v1::GetWindowStatsRequest stats_req;
  stats_req.set_host(request.host());
  stats_req.set_day_type(ToProto(day_type));
  stats_req.set_start_second_of_day(start -
                                    availability::LocalMidnight(start, config_.utc_offset_seconds));
  stats_req.set_length_seconds(request.window_seconds());
  stats_req.set_history_days(request.history_days() > 0 ? request.history_days()
                                                        : config_.history_days);
  stats_req.set_utc_offset_seconds(config_.utc_offset_seconds);
  stats_req.set_end_unix_seconds(request.start_unix_seconds() > 0 ? start : 0);
  sojourn::v1::GetWindowStatsResponse stats_resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + config_.rpc_timeout));
  grpc::Status gs = StatemgrStub(*address)->GetWindowStats(&ctx, stats_req, &stats_resp);
  if (!gs.ok()) {
    absl::Status st = FromGrpcStatus(gs);
    if (absl::IsNotFound(st) || absl::IsInvalidArgument(st)) return st;
    return absl::UnavailableError(absl::StrCat("state manager ", *address, " of host ",
                                               request.host(), ": ", gs.error_message()));
  }
  auto stats = FromProto(stats_resp.stats());
  if (!stats.ok()) return stats.status();
  auto init = FromProto(stats_resp.current_state());
  if (!init.ok()) return absl::FailedPreconditionError("state manager reported no current state");

  sojourn::v1::PredictAvailabilityResponse out;
  out.set_host(request.host());
  out.set_initial_state(stats_resp.current_state());
  out.set_day_type(ToProto(day_type));
  out.set_method(config_.estimator.censoring_aware ? "smp" : "smp_paper");
  const int64_t step = stats->step_seconds > 0 ? stats->step_seconds : 1;
  out.set_step_seconds(step);
  const int M = static_cast<int>(std::max<int64_t>(1, (request.window_seconds() + step - 1) / step));
  availability::TrPrediction p = availability::PredictFromStats(*stats, *init, M, config_.estimator);
  const double tr = p.tr.empty() ? 0.0 : std::clamp(p.tr.back(), 0.0, 1.0);
  out.set_tr_ratio(tr);
  out.set_mttf_seconds(p.mttf_seconds);
  out.set_history_windows(stats_resp.whole_history_fallback() ? 0 : p.windows_used);
  out.set_low_history(stats_resp.whole_history_fallback() || p.low_history ||
                      p.windows_used < config_.min_history_windows);
  const int points = std::min(request.curve_points(), M);
  for (int k = 1; k <= points; ++k) {
    // Evenly spaced, ending at the window end.
    const int m = static_cast<int>((static_cast<int64_t>(M) * k) / points);
    auto* pt = out.add_curve();
    pt->set_offset_seconds(std::min<int64_t>(m * step, request.window_seconds()));
    pt->set_tr_ratio(p.tr.empty() ? 0.0 : std::clamp(p.tr[m - 1], 0.0, 1.0));
  }
  return out;
}

}  // namespace sojourn::predictor
