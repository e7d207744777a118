#include "services/predictor/availability_predictor.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/grpc_status.h"
#include "common/status.h"
#include "common/text.h"
#include "models/availability/predict.h"
#include "models/availability/window.h"
#include "services/convert.h"

namespace sojourn::predictor {
namespace {
constexpr int64_t kMaxWindowSeconds = 7 * 86400;
constexpr int64_t kMaxStartAheadSeconds = 366 * 86400;
}  // namespace

AvailabilityPredictor::AvailabilityPredictor(const AvailabilityPredictorConfig& config,
                                             StatemgrDirectory& directory, Clock& clock)
    : config_(config), directory_(directory), clock_(clock) {}

AvailabilityPredictor::Population AvailabilityPredictor::PopulationPrior(
    const sojourn::v1::GetWindowStatsRequest& host_request) {
  if (config_.population_prior_ttl <= absl::ZeroDuration() ||
      config_.estimator.prior_windows <= 0) {
    return {};
  }
  // The window of the request, for every host, starting at the start of its
  // minute: requests of the same minute share one prior.
  sojourn::v1::GetWindowStatsRequest request = host_request;
  request.clear_host();
  // What one host's answer carries besides the statistics is not pooled (and
  // must not split the prior's key).
  request.clear_deployed_estimates();
  request.set_start_second_of_day(request.start_second_of_day() -
                                  request.start_second_of_day() % kPriorStartQuantumSeconds);
  const std::string key = request.SerializeAsString();
  {
    // One build per key at a time: the requests of a ranking arrive together
    // (the broker fans them out), and each build asks every state manager.
    absl::MutexLock l(&prior_mu_);
    for (;;) {
      auto it = priors_.find(key);
      if (it != priors_.end() && clock_.Now() - it->second.built < config_.population_prior_ttl) {
        return it->second.population;
      }
      if (building_.insert(key).second) break;
      prior_built_.Wait(&prior_mu_);
    }
  }
  std::optional<Population> built = BuildPopulation(request);
  absl::MutexLock l(&prior_mu_);
  building_.erase(key);
  prior_built_.SignalAll();
  if (!built.has_value()) return {};
  // Entries past their TTL go, so keys that are not asked again (one per
  // minute of "now") do not pile up.
  const absl::Time now = clock_.Now();
  for (auto it = priors_.begin(); it != priors_.end();) {
    it = now - it->second.built >= config_.population_prior_ttl ? priors_.erase(it) : std::next(it);
  }
  while (!priors_.empty() && priors_.size() >= std::max<size_t>(1, config_.max_cached_priors) &&
         priors_.find(key) == priors_.end()) {
    priors_.erase(std::min_element(
        priors_.begin(), priors_.end(),
        [](const auto& a, const auto& b) { return a.second.built < b.second.built; }));
  }
  priors_[key] = PriorEntry{*built, now};
  return *built;
}

std::optional<AvailabilityPredictor::Population> AvailabilityPredictor::BuildPopulation(
    const sojourn::v1::GetWindowStatsRequest& request) {
  // Pool the same window over every host the broker knows (live or not: the
  // prior is about history).
  auto hosts = directory_.ListHosts();
  if (!hosts.ok() || hosts->empty()) return std::nullopt;
  // Every host's statistics, asked all at once (gRPC's callback API: no
  // thread per call), then pooled in the broker's host order. A build takes
  // about the slowest answer, kPriorCallTimeout at most: with 16 blocking
  // calls at a time, 100 hung state managers among 1,000 hosts made it
  // 100 / 16 x 3 s, and the first ranking after a start took 22 s.
  struct Call {
    grpc::ClientContext ctx;
    sojourn::v1::GetWindowStatsRequest req;
    sojourn::v1::GetWindowStatsResponse resp;
    std::shared_ptr<sojourn::v1::StateManager::Stub> stub;  // keeps its channel
    std::string address;
  };
  std::vector<std::optional<sojourn::v1::GetWindowStatsResponse>> answers(hosts->size());
  std::vector<std::unique_ptr<Call>> calls(hosts->size());
  absl::Mutex mu;
  size_t pending = 0;
  for (size_t i = 0; i < hosts->size(); ++i) {
    const auto& [host, address] = (*hosts)[i];
    // A state manager that let a call run into its deadline is left out
    // while in its backoff (a machine that accepts connections and never
    // answers stalled every build, and the requests waiting on it, for
    // the whole timeout); the others get kPriorCallTimeout at most. Too
    // slow for that, it is left out of the prior only (Use::kPrior).
    auto timeout = directory_.Admit(address, host, StatemgrDirectory::Use::kPrior);
    if (!timeout.ok()) continue;
    auto stub = directory_.Find(host, address);
    if (!stub.ok()) continue;
    auto call = std::make_unique<Call>();
    call->req = request;
    call->req.set_host(host);
    call->stub = *std::move(stub);
    call->address = address;
    call->ctx.set_deadline(absl::ToChronoTime(absl::Now() + std::min(*timeout, kPriorCallTimeout)));
    Call* c = call.get();
    calls[i] = std::move(call);
    {
      absl::MutexLock l(&mu);
      ++pending;
    }
    c->stub->async()->GetWindowStats(
        &c->ctx, &c->req, &c->resp, [this, c, i, &answers, &mu, &pending](grpc::Status status) {
          directory_.Record(c->address, status, StatemgrDirectory::Use::kPrior);
          absl::MutexLock l(&mu);
          if (status.ok()) answers[i] = std::move(c->resp);
          --pending;
        });
  }
  {
    absl::MutexLock l(&mu);
    mu.Await(absl::Condition(
        +[](size_t* left) { return *left == 0; }, &pending));
  }
  // The library's builder (as sojourn-eval pools the trace's hosts): the sum
  // of the hosts' statistics and its empirical-Bayes strength.
  availability::PopulationPriorBuilder builder;
  // Host frailty (as sojourn-eval): every host's failure exposure, including
  // hosts without a same-clock window yet.
  auto frailty = request.failure_exposure() ? std::make_shared<availability::HostFrailtyModel>()
                                            : nullptr;
  auto band = request.load_band() ? std::make_shared<availability::BandExposure>() : nullptr;
  int answered = 0;
  for (const auto& resp : answers) {
    if (!resp.has_value()) continue;
    ++answered;
    if (frailty != nullptr && resp->has_failure_exposure()) {
      auto exposure = FromProto(resp->failure_exposure());
      if (exposure.ok()) frailty->Add(*exposure);
    }
    if (band != nullptr && resp->has_band_exposure()) {
      auto e = FromProto(resp->band_exposure());
      if (e.ok()) band->Merge(*e);
    }
    if (resp->whole_history_fallback()) continue;
    auto stats = FromProto(resp->stats());
    if (stats.ok()) builder.Add(*stats);
  }
  auto pooled = std::make_shared<availability::SojournStats>(
      builder.Build(config_.estimator.level_corrected_borrowing));
  // Nobody answered (state managers down, in backoff, or refusing the
  // request): not kept, asked again. Answers without a window: kept.
  if (answered == 0) return std::nullopt;
  if (pooled->num_windows == 0) return Population{};
  if (frailty != nullptr) frailty->Build();
  return Population{pooled, frailty, band};
}

size_t AvailabilityPredictor::cached_priors() const {
  absl::MutexLock l(&prior_mu_);
  return priors_.size();
}

absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> AvailabilityPredictor::Predict(
    const sojourn::v1::PredictAvailabilityRequest& request, absl::Time caller_deadline,
    std::string* statemgr_address) {
  if (absl::Status s = ValidateLookupName(request.host()); !s.ok()) return s;
  if (request.window_seconds() <= 0 || request.window_seconds() > kMaxWindowSeconds) {
    return absl::InvalidArgumentError(absl::StrCat("window_seconds must be in (0, ",
                                                   kMaxWindowSeconds, "], got ",
                                                   request.window_seconds()));
  }
  // At most 100 years, as the sojourn CLI's --history-days.
  if (request.history_days() < 0 || request.history_days() > 36500) {
    return absl::InvalidArgumentError(absl::StrCat(
        "history_days must be in [0, 36500] (0 = the default), got ", request.history_days()));
  }
  if (request.curve_points() < 0 || request.curve_points() > 100000) {
    return absl::InvalidArgumentError(
        absl::StrCat("curve_points must be in [0, 100000], got ", request.curve_points()));
  }
  // 0 = now; a negative start used to be answered as "now". A start in the
  // past asks about a window of the history (a backtest); one more than a
  // year ahead is a clock or unit error (start + window overflowed int64).
  const int64_t latest_start = absl::ToUnixSeconds(clock_.Now()) + kMaxStartAheadSeconds;
  if (request.start_unix_seconds() < 0 || request.start_unix_seconds() > latest_start) {
    return absl::InvalidArgumentError(absl::StrCat(
        "start_unix_seconds must be in [0, ", latest_start,
        "] (0 = now; at most a year after the predictor's clock), got ",
        request.start_unix_seconds()));
  }
  std::string address;
  auto stub = directory_.Find(request.host(), request.statemgr_address(), &address);
  if (!stub.ok()) return stub.status();
  if (statemgr_address != nullptr) *statemgr_address = address;

  const int64_t start = request.start_unix_seconds() > 0 ? request.start_unix_seconds()
                                                         : absl::ToUnixSeconds(clock_.Now());
  const availability::DayType day_type = availability::DayTypeOf(start, config_.clock);
  sojourn::v1::GetWindowStatsRequest stats_req;
  stats_req.set_host(request.host());
  stats_req.set_day_type(ToProto(day_type));
  stats_req.set_start_second_of_day(availability::LocalSecondOfDay(start, config_.clock));
  stats_req.set_length_seconds(request.window_seconds());
  stats_req.set_history_days(request.history_days() > 0 ? request.history_days()
                                                        : config_.history_days);
  // With a zone, its offset at the window start too: a state manager older
  // than time_zone (field 13) ignores the zone and cuts today's windows on it
  // (not UTC) while the lab's hosts are upgraded.
  stats_req.set_utc_offset_seconds(config_.clock.OffsetAt(start));
  stats_req.set_time_zone(config_.clock.zone_name());
  stats_req.set_end_unix_seconds(request.start_unix_seconds() > 0 ? start : 0);
  stats_req.set_paper_literal(!config_.estimator.censoring_aware);
  stats_req.set_exact_age(config_.estimator.censoring_aware &&
                          config_.estimator.exact_age_first_sojourn);
  stats_req.set_failure_exposure(config_.estimator.censoring_aware &&
                                 config_.estimator.host_frailty);
  stats_req.set_load_band(config_.estimator.censoring_aware &&
                          config_.estimator.load_band_first_sojourn);
  stats_req.set_deployed_estimates(request.deployed_estimates());
  sojourn::v1::GetWindowStatsResponse stats_resp;
  ASSIGN_OR_RETURN(const absl::Duration timeout, directory_.Admit(address, request.host()));
  const StatemgrDirectory::CallDeadline deadline =
      StatemgrDirectory::DeadlineFor(timeout, caller_deadline);
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(deadline.at));
  grpc::Status gs = (*stub)->GetWindowStats(&ctx, stats_req, &stats_resp);
  directory_.Record(address, gs, StatemgrDirectory::Use::kRequest, deadline.callers);
  if (!gs.ok()) return StatemgrCallError(address, request.host(), gs, deadline.callers);
  auto stats = FromProto(stats_resp.stats());
  if (!stats.ok()) return stats.status();
  std::optional<availability::FailureExposure> exposure;
  if (stats_resp.has_failure_exposure()) {
    auto e = FromProto(stats_resp.failure_exposure());
    if (!e.ok()) return e.status();
    exposure = *e;
  }
  auto init = FromProto(stats_resp.current_state());
  if (!init.ok()) return absl::FailedPreconditionError("state manager reported no current state");

  sojourn::v1::PredictAvailabilityResponse out;
  out.set_host(request.host());
  out.set_initial_state(stats_resp.current_state());
  out.set_day_type(ToProto(day_type));
  out.set_method(config_.estimator.censoring_aware ? "smp" : "smp_paper");
  const int64_t step = stats->step_seconds > 0 ? stats->step_seconds : 1;
  out.set_step_seconds(step);
  out.set_last_sample_unix_seconds(stats_resp.last_sample_unix_seconds());
  if (request.start_unix_seconds() <= 0 && !availability::IsFailure(*init) &&
      stats_resp.last_sample_unix_seconds() > 0 && stats_resp.revocation_gap_seconds() > 0) {
    // A host that falls silent is S5 after its revocation gap: the answer,
    // from an up state, holds until then at the latest (the broker's cache).
    out.set_valid_until_unix_seconds(stats_resp.last_sample_unix_seconds() +
                                     stats_resp.revocation_gap_seconds());
  }
  *out.mutable_load_forecast() = stats_resp.load_forecast();
  if (request.start_unix_seconds() <= 0 && stats_resp.has_condition()) {
    *out.mutable_condition() = stats_resp.condition();
  }
  if (request.deployed_estimates() && stats_resp.has_deployed_estimates()) {
    *out.mutable_deployed_estimates() = stats_resp.deployed_estimates();
  }
  const int M = static_cast<int>(std::max<int64_t>(1, (request.window_seconds() + step - 1) / step));
  // Issue 7: shrink towards the population of hosts, and condition the first
  // sojourn on how long the host has been in its state (as sojourn-eval does).
  std::shared_ptr<const availability::SojournStats> prior;
  int64_t age_seconds = -1;
  availability::FirstSojournRatio band_ratio;
  availability::SojournStats host_stats = *std::move(stats);
  if (config_.estimator.censoring_aware) {
    // Also for a host without a same-clock window yet (whole-history fallback):
    // its few minutes or hours of history must not outweigh what the other
    // hosts show at this clock time, or a host that just joined ranks first
    // with TR 1. (The pool itself skips such hosts.)
    Population population = PopulationPrior(stats_req);
    prior = population.stats;
    // Host frailty: the prior's failure hazards at this host's level.
    if (population.frailty != nullptr && exposure.has_value()) {
      host_stats.prior_hazard_ratio =
          config_.estimator.frailty_by_day_type
              ? population.frailty->Theta(*exposure, day_type == availability::DayType::kWeekend)
              : population.frailty->Theta(*exposure);
    }
    if (stats_resp.state_since_unix_seconds() > 0 && start >= stats_resp.state_since_unix_seconds()) {
      age_seconds = start - stats_resp.state_since_unix_seconds();
    }
    // Load band: the first sojourn's exit ratios at the host's band, from
    // the population's exits by band (as sojourn-eval pools its hosts).
    if (population.band != nullptr && stats_resp.has_band_exposure()) {
      band_ratio = population.band->RatioOf(day_type == availability::DayType::kWeekend,
                                            *init, LoadBandFromProto(stats_resp.load_band()));
    }
  }
  availability::TrPrediction p = availability::PredictFromStats(
      host_stats, *init, M, config_.estimator, prior.get(), age_seconds, band_ratio);
  const double tr = p.tr.empty() ? 0.0 : std::clamp(p.tr.back(), 0.0, 1.0);
  out.set_tr_ratio(tr);
  // The integral of TR over the window: the curve's last step may end after
  // the window (a window that is no multiple of the host's grid step, or
  // shorter than one step), and only its part inside the window counts, or
  // the MTTF of a 1 h window on a host sampled daily was 24 h.
  double mttf = p.mttf_seconds;
  if (const int64_t overshoot = int64_t{M} * step - request.window_seconds(); overshoot > 0) {
    const double tr_last_step_start =
        M >= 2 && p.tr.size() >= static_cast<size_t>(M - 1) ? p.tr[M - 2] : 1.0;
    mttf -= tr_last_step_start * static_cast<double>(overshoot);
  }
  out.set_mttf_seconds(std::clamp(mttf, 0.0, static_cast<double>(request.window_seconds())));
  out.set_history_windows(stats_resp.whole_history_fallback() ? 0 : p.windows_used);
  if (!stats_resp.whole_history_fallback()) {
    // Counts of whole windows (the statemgr ships them as doubles).
    out.set_past_up_windows(static_cast<int32_t>(std::lround(host_stats.own_up_windows)));
    out.set_past_up_windows_survived(
        static_cast<int32_t>(std::lround(host_stats.own_up_survived)));
  }
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
