#include "services/predictor/availability_scorer.h"

#include <algorithm>
#include <tuple>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::predictor {
namespace {

constexpr char kScored[] = "sojourn_predictor_availability_scored_total";
constexpr char kScoredHelp[] =
    "Availability predictions (TR of a window from now, from an up state) whose window has "
    "passed and was scored against the states the host's state manager saw in it, by method "
    "(smp, or smp_paper with --paper_estimator; window_frequency, the host's own past windows "
    "like it, on the same windows)";
constexpr char kBrier[] = "sojourn_predictor_availability_brier_sum_total";
constexpr char kBrierHelp[] =
    "Sum of (predicted TR - outcome)^2 over the scored windows (outcome 1 = the host stayed "
    "usable); divided by sojourn_predictor_availability_scored_total it is the Brier score";
constexpr char kPredicted[] = "sojourn_predictor_availability_predicted_sum_total";
constexpr char kPredictedHelp[] =
    "Sum of the predicted TR over the scored windows: against "
    "sojourn_predictor_availability_survived_total, the calibration of the method";
constexpr char kSurvived[] = "sojourn_predictor_availability_survived_total";
constexpr char kSurvivedHelp[] = "Scored windows in which the host stayed usable (no S3, S4 or S5)";
constexpr char kUnresolved[] = "sojourn_predictor_availability_unresolved_total";
constexpr char kUnresolvedHelp[] =
    "Availability answers not scored: reason full (not kept: too many windows pending), "
    "unknown_host (the state manager no longer knows the host), no_states (its states do not "
    "cover the window, e.g. history cut by retention) or unreachable (the state manager did not "
    "answer for a day after the window)";
constexpr char kPending[] = "sojourn_predictor_availability_pending";
constexpr char kPendingHelp[] = "Availability predictions waiting for their window to pass";

constexpr const char* kReasons[] = {"full", "unknown_host", "no_states", "unreachable"};

bool IsFailureState(sojourn::v1::HostState s) {
  return s == sojourn::v1::HOST_STATE_S3_OVERLOADED ||
         s == sojourn::v1::HOST_STATE_S4_MEMORY_THRASHING ||
         s == sojourn::v1::HOST_STATE_S5_REVOKED;
}

}  // namespace

std::optional<bool> WindowSurvived(const sojourn::v1::GetStateIntervalsResponse& states,
                                   int64_t start, int64_t end) {
  const int64_t step = std::max<int64_t>(1, states.step_seconds());
  if (states.intervals_size() == 0 || states.intervals(0).start_unix_seconds() > start + step) {
    return std::nullopt;
  }
  for (const sojourn::v1::StateInterval& i : states.intervals()) {
    if (i.start_unix_seconds() < end && IsFailureState(i.state())) return false;
  }
  if (states.intervals(states.intervals_size() - 1).end_unix_seconds() < end) return std::nullopt;
  return true;
}

AvailabilityScorer::AvailabilityScorer(StatemgrDirectory& directory, Clock& clock, Metrics& metrics,
                                       const AvailabilityScorerConfig& config)
    : directory_(directory), clock_(clock), metrics_(metrics), config_(config) {
  for (const std::string& method : {config_.method, std::string("window_frequency")}) {
    const MetricLabels labels = {{"method", method}};
    metrics_.DeclareCounter(kScored, kScoredHelp, labels);
    metrics_.DeclareCounter(kBrier, kBrierHelp, labels);
    metrics_.DeclareCounter(kPredicted, kPredictedHelp, labels);
  }
  metrics_.DeclareCounter(kSurvived, kSurvivedHelp, {});
  for (const char* reason : kReasons) {
    metrics_.DeclareCounter(kUnresolved, kUnresolvedHelp, {{"reason", reason}});
  }
  metrics_.Set(kPending, kPendingHelp, {}, 0);
}

void AvailabilityScorer::Offer(const sojourn::v1::PredictAvailabilityRequest& request,
                               const sojourn::v1::PredictAvailabilityResponse& response,
                               const std::string& statemgr_address) {
  if (request.start_unix_seconds() != 0 || response.valid_until_unix_seconds() <= 0 ||
      response.past_up_windows() <= 0 || response.last_sample_unix_seconds() <= 0) {
    return;
  }
  Pending p;
  p.statemgr_address = statemgr_address;
  // The model's M steps from the grid point of the newest sample: the grid
  // points in (start, start + M step], a window shorter than a step or not
  // on the grid included (its first point is the one after the start).
  const int64_t step = std::max<int64_t>(1, response.step_seconds());
  p.start = response.last_sample_unix_seconds();
  p.end = p.start + (request.window_seconds() + step - 1) / step * step;
  p.revocation_gap = response.valid_until_unix_seconds() - response.last_sample_unix_seconds();
  p.tr = response.tr_ratio();
  p.window_frequency = static_cast<double>(response.past_up_windows_survived()) /
                       static_cast<double>(response.past_up_windows());
  absl::MutexLock l(&mu_);
  Key key{request.host(), request.window_seconds()};
  if (pending_.contains(key)) return;
  if (pending_.size() >= config_.max_pending) {
    metrics_.Increment(kUnresolved, kUnresolvedHelp, {{"reason", "full"}});
    return;
  }
  pending_.emplace(std::move(key), std::move(p));
  metrics_.Set(kPending, kPendingHelp, {}, static_cast<double>(pending_.size()));
}

absl::StatusOr<sojourn::v1::GetStateIntervalsResponse> AvailabilityScorer::States(
    const std::string& host, const Pending& p) {
  std::string address;
  auto stub = directory_.Find(host, p.statemgr_address, &address);
  if (!stub.ok()) return stub.status();
  sojourn::v1::GetStateIntervalsRequest req;
  req.set_host(host);
  req.set_start_unix_seconds(p.start + 1);
  req.set_end_unix_seconds(p.end + 1);
  req.set_through_silence(true);
  sojourn::v1::GetStateIntervalsResponse resp;
  // A state manager that let calls run into their deadline is not asked
  // during its backoff (the next pass tries again), as for the answers.
  ASSIGN_OR_RETURN(const absl::Duration timeout, directory_.Admit(address, host));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  grpc::Status s = (*stub)->GetStateIntervals(&ctx, req, &resp);
  directory_.Record(address, s);
  if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
    return absl::NotFoundError(absl::StrCat("state manager ", address, ": ", s.error_message()));
  }
  if (!s.ok()) {
    return absl::UnavailableError(absl::StrCat("state manager ", address, ": ", s.error_message()));
  }
  return resp;
}

void AvailabilityScorer::Count(const Pending& p, bool survived) {
  const double y = survived ? 1 : 0;
  const std::pair<std::string, double> methods[] = {{config_.method, p.tr},
                                                    {"window_frequency", p.window_frequency}};
  for (const auto& [method, predicted] : methods) {
    const MetricLabels labels = {{"method", method}};
    metrics_.Increment(kScored, kScoredHelp, labels);
    metrics_.Increment(kBrier, kBrierHelp, labels, (predicted - y) * (predicted - y));
    metrics_.Increment(kPredicted, kPredictedHelp, labels, predicted);
  }
  if (survived) metrics_.Increment(kSurvived, kSurvivedHelp, {});
}

void AvailabilityScorer::Unresolved(const char* reason) {
  metrics_.Increment(kUnresolved, kUnresolvedHelp, {{"reason", reason}});
}

int AvailabilityScorer::ScoreDue(const std::function<bool()>& stop) {
  const int64_t now = absl::ToUnixSeconds(clock_.Now());
  const int64_t settle = absl::ToInt64Seconds(config_.settle);
  std::vector<std::pair<Key, Pending>> due;
  {
    absl::MutexLock l(&mu_);
    for (const auto& [key, p] : pending_) {
      if (p.end + p.revocation_gap + settle <= now) due.emplace_back(key, p);
    }
  }
  std::sort(due.begin(), due.end(), [](const auto& a, const auto& b) {
    return std::tie(a.second.end, a.first) < std::tie(b.second.end, b.first);
  });
  if (due.size() > static_cast<size_t>(std::max(0, config_.max_calls_per_pass))) {
    due.resize(static_cast<size_t>(std::max(0, config_.max_calls_per_pass)));
  }
  int scored = 0;
  std::vector<Key> done;
  for (const auto& [key, p] : due) {
    if (stop && stop()) break;
    absl::StatusOr<sojourn::v1::GetStateIntervalsResponse> states = States(key.first, p);
    if (absl::IsNotFound(states.status())) {
      Unresolved("unknown_host");
    } else if (!states.ok()) {
      if (now < p.end + absl::ToInt64Seconds(config_.give_up_after)) continue;  // next pass
      SOJOURN_LOG(WARNING, "availability scoring: gave up on host %s's window ending %d: %s",
                  key.first, p.end, states.status().message());
      Unresolved("unreachable");
    } else if (std::optional<bool> survived = WindowSurvived(*states, p.start + 1, p.end + 1);
               !survived.has_value()) {
      Unresolved("no_states");
    } else {
      Count(p, *survived);
      ++scored;
    }
    done.push_back(key);
  }
  absl::MutexLock l(&mu_);
  for (const Key& key : done) pending_.erase(key);
  metrics_.Set(kPending, kPendingHelp, {}, static_cast<double>(pending_.size()));
  return scored;
}

size_t AvailabilityScorer::pending() const {
  absl::MutexLock l(&mu_);
  return pending_.size();
}

}  // namespace sojourn::predictor
