#include "services/broker/ranker.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <iterator>

#include <google/protobuf/repeated_ptr_field.h>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/hash.h"
#include "common/text.h"

namespace sojourn::broker {
namespace {

constexpr int64_t kMaxSeconds = 7 * 86400;
constexpr char kRefreshesMetric[] = "sojourn_broker_prediction_refreshes_total";
constexpr char kRefreshesHelp[] =
    "Cached predictions the broker fetched again in the background near the end of their time "
    "in the cache (--cache_refresh_threads), by outcome: ok, error (the entry lives to its "
    "expiry), skipped (replaced or expired while queued)";
// Payload marking PredictorUnreachableError statuses.
constexpr char kUnreachablePayload[] = "type.sojourn.dev/predictor-unreachable";

}  // namespace

absl::Status PredictorUnreachableError(absl::string_view address, absl::string_view detail) {
  absl::Status s = absl::UnavailableError(
      absl::StrCat("predictor ", address, " unreachable", detail.empty() ? "" : ": ", detail));
  s.SetPayload(kUnreachablePayload, absl::Cord(address));
  return s;
}

bool IsPredictorUnreachable(const absl::Status& status) {
  return !status.ok() && status.GetPayload(kUnreachablePayload).has_value();
}

// ---------------------------------------------------------------- cache

namespace {

// Whether a cached entry that expires at `expires` is too old at `now`:
// past its expiry or, for a host whose newest sample is `last_sample_unix` as
// registered now (0 = unknown), past its prediction's
// valid_until_unix_seconds moved on by the samples registered since (silent
// past its revocation gap, the host is S5 now, whatever the TTL says; a host
// still sampling is not). Without the move, an entry of a host sampled every
// 6 s (revocation gap 60 s) lasted 60 s whatever --cache_ttl_seconds said.
bool Stale(const HostPrediction& e, absl::Time expires, absl::Time now,
           int64_t last_sample_unix = 0) {
  if (now > expires) return true;
  int64_t valid_until = e.response.valid_until_unix_seconds();
  if (valid_until <= 0) return false;
  const int64_t fetched_last = e.response.last_sample_unix_seconds();
  if (fetched_last > 0 && last_sample_unix > fetched_last && valid_until >= fetched_last) {
    valid_until = last_sample_unix + (valid_until - fetched_last);
  }
  return absl::ToUnixSeconds(now) > valid_until;
}

// FNV-1a (64 bits) of the host name and the horizon, finished with
// MurmurHash3's fmix64 so that names differing in one character (host-1,
// host-2) spread over the top bits: stable across runs and builds
// (absl::Hash is seeded per process), so a key's refresh phase is too.
uint64_t KeyHash(const std::string& host, int64_t horizon_seconds) {
  char horizon[8];  // little-endian
  for (int i = 0; i < 8; ++i) {
    horizon[i] = static_cast<char>(static_cast<uint64_t>(horizon_seconds) >> (8 * i));
  }
  uint64_t h = Fnv1a64(absl::string_view(horizon, 8), Fnv1a64(host));
  h ^= h >> 33;
  h *= 0xff51afd7ed558ccdull;
  h ^= h >> 33;
  h *= 0xc4ceb9fe1a85ec53ull;
  h ^= h >> 33;
  return h;
}

bool SameCondition(const HistoryVersion& a, const HistoryVersion& b) {
  return a.has_condition && b.has_condition && a.state == b.state &&
         a.state_since_unix == b.state_since_unix && a.load_band == b.load_band &&
         a.step_seconds == b.step_seconds;
}

}  // namespace

void HistoryVersion::SetCondition(const sojourn::v1::HostCondition& c) {
  has_condition = true;
  state = static_cast<int>(c.state());
  state_since_unix = c.state_since_unix_seconds();
  load_band = c.load_band();
  step_seconds = c.step_seconds();
}

HistoryVersion HistoryVersion::Of(const sojourn::v1::RegisteredHost& host) {
  HistoryVersion v;
  v.last_sample_unix = host.last_sample_unix_seconds();
  if (host.has_condition()) v.SetCondition(host.condition());
  return v;
}

HistoryVersion HistoryVersion::OfFetch(const sojourn::v1::RegisteredHost& host,
                                       const sojourn::v1::PredictAvailabilityResponse& r) {
  HistoryVersion v = Of(host);
  // The registration may be up to a period behind the state manager: the
  // prediction's own condition is what it was computed from.
  if (r.has_condition()) v.SetCondition(r.condition());
  return v;
}

bool HistoryVersion::Keeps(const HistoryVersion& cached) const {
  if (has_condition) return SameCondition(*this, cached);
  // No condition: a newer sample is new history (0 = nothing reported).
  return last_sample_unix <= 0 || last_sample_unix == cached.last_sample_unix;
}

absl::Time PredictionCache::ExpiryOf(const std::string& host, int64_t horizon_seconds,
                                     absl::Time fetched) const {
  if (ttl_ <= absl::ZeroDuration()) return fetched;
  if (ttl_ == absl::InfiniteDuration()) return absl::InfiniteFuture();
  if (!spread_refreshes_) return fetched + ttl_;
  // The phase, uniform in [0, ttl) from the top 53 bits of the hash.
  const absl::Duration phase =
      absl::Trunc(ttl_ * (static_cast<double>(KeyHash(host, horizon_seconds) >> 11) * 0x1.0p-53),
                  absl::Nanoseconds(1));
  absl::Duration into = (fetched - absl::UnixEpoch() - phase) % ttl_;  // (-ttl, ttl)
  if (into < absl::ZeroDuration()) into += ttl_;
  return fetched + (ttl_ - into);  // the next refresh time, in (fetched, fetched + ttl]
}

PredictionCache::Found PredictionCache::Find(const std::string& host, int64_t horizon_seconds,
                                             const HistoryVersion& version) const {
  const absl::Time now = clock_.Now();
  absl::MutexLock l(&mu_);
  auto it = entries_.find({host, horizon_seconds});
  if (it == entries_.end()) return {};
  const HostPrediction& e = *it->second.entry;
  if (Stale(e, it->second.expires, now, version.last_sample_unix)) return {};
  if (!version.Keeps(e.version)) return {};  // the host's condition or history changed
  return {it->second.entry, now >= it->second.refresh_from};
}

void PredictionCache::Put(const std::string& host, int64_t horizon_seconds,
                          std::shared_ptr<const HostPrediction> entry, bool refreshed) {
  const absl::Time now = clock_.Now();
  const absl::Time fetched = entry->fetched;
  const absl::Time expires =
      refreshed && ttl_ > absl::ZeroDuration() && ttl_ != absl::InfiniteDuration()
          ? fetched + ttl_
          : ExpiryOf(host, horizon_seconds, fetched);
  const absl::Time refresh_from =
      ttl_ == absl::InfiniteDuration()
          ? absl::InfiniteFuture()
          : std::max(expires - ttl_ / 6, fetched + (expires - fetched) / 2);
  absl::MutexLock l(&mu_);
  Slot& slot = entries_[{host, horizon_seconds}];
  // An entry asked for earlier than the one cached (a refresh that waited
  // in the queue while a ranking fetched the host) does not replace it.
  if (slot.entry == nullptr || slot.entry->fetched <= fetched) {
    slot = Slot{std::move(entry), expires, refresh_from};
  }
  if (now - last_sweep_ < ttl_) return;
  last_sweep_ = now;
  for (auto it = entries_.begin(); it != entries_.end();) {
    // Past the expiry only: an entry past its valid_until may still serve a
    // host whose newer samples Get is told of.
    it = now > it->second.expires ? entries_.erase(it) : std::next(it);
  }
}

bool PredictionCache::Holds(const std::string& host, int64_t horizon_seconds,
                            const HostPrediction* entry) const {
  const absl::Time now = clock_.Now();
  absl::MutexLock l(&mu_);
  auto it = entries_.find({host, horizon_seconds});
  return it != entries_.end() && it->second.entry.get() == entry && now <= it->second.expires;
}

void PredictionCache::KeepUntilExpiry(const std::string& host, int64_t horizon_seconds,
                                      const HostPrediction* entry) {
  absl::MutexLock l(&mu_);
  auto it = entries_.find({host, horizon_seconds});
  if (it != entries_.end() && it->second.entry.get() == entry) {
    it->second.refresh_from = absl::InfiniteFuture();
  }
}

void PredictionCache::Clear() {
  absl::MutexLock l(&mu_);
  entries_.clear();
}

size_t PredictionCache::size() const {
  absl::MutexLock l(&mu_);
  return entries_.size();
}

// ---------------------------------------------------------------- ranker

scheduling::TrCurve CurveFromResponse(const sojourn::v1::PredictAvailabilityResponse& r) {
  const int n = r.curve_size();
  if (n == 0) return {};
  const int64_t end = r.curve(n - 1).offset_seconds();
  if (end <= 0) return {};
  // Regular grid of n points ending at the window end; the predictor's points
  // are evenly spaced in steps, so this is exact when n divides the step count
  // and a linear interpolation otherwise.
  const double step = static_cast<double>(end) / n;
  const int64_t istep = std::max<int64_t>(1, std::llround(step));
  std::vector<double> tr(n);
  int j = 0;
  for (int k = 1; k <= n; ++k) {
    const double t = static_cast<double>(istep) * k;
    while (j < n && r.curve(j).offset_seconds() < t) ++j;
    if (j >= n) {
      tr[k - 1] = r.curve(n - 1).tr_ratio();
      continue;
    }
    const double t1 = static_cast<double>(r.curve(j).offset_seconds());
    const double v1 = r.curve(j).tr_ratio();
    const double t0 = j == 0 ? 0.0 : static_cast<double>(r.curve(j - 1).offset_seconds());
    const double v0 = j == 0 ? 1.0 : r.curve(j - 1).tr_ratio();
    tr[k - 1] = t1 > t0 ? v0 + (t - t0) / (t1 - t0) * (v1 - v0) : v1;
  }
  return scheduling::TrCurve(istep, std::move(tr));
}

Ranker::Ranker(TrSource& tr_source, LoadSource* load_source, Clock& clock,
               const RankerConfig& config)
    : tr_source_(tr_source),
      load_source_(load_source),
      clock_(clock),
      config_(config),
      cache_(clock, config.cache_ttl, config.spread_cache_refreshes) {
  if (config_.fanout_threads > 0) fanout_ = std::make_unique<ThreadPool>(config_.fanout_threads);
  if (config_.refresh_threads > 0 && config_.cache_ttl > absl::ZeroDuration()) {
    refresh_ = std::make_unique<ThreadPool>(config_.refresh_threads);
  }
}

Ranker::~Ranker() {
  // The pool (the last member) is joined first: the refreshes running finish,
  // those queued return at once.
  StopRefreshes();
}

void Ranker::ExportMetrics(Metrics& metrics) {
  metrics_ = &metrics;
  for (const char* outcome : {"ok", "error", "skipped"}) {
    metrics.DeclareCounter(kRefreshesMetric, kRefreshesHelp, {{"outcome", outcome}});
  }
}

void Ranker::StopRefreshes() { stopping_.store(true); }

bool Ranker::RefreshAhead(const sojourn::v1::RegisteredHost& host, int64_t horizon,
                          std::shared_ptr<const HostPrediction> cached) {
  {
    absl::MutexLock l(&refresh_mu_);
    if (!refreshing_.insert({host.host(), horizon}).second) return false;
  }
  refresh_->Schedule([this, host, horizon, cached = std::move(cached)] {
    const char* outcome = "skipped";
    // Not when stopping, nor when the entry was replaced (a ranking fetched
    // the host) or has expired while the refresh waited in the queue.
    if (!stopping_.load() && cache_.Holds(host.host(), horizon, cached.get())) {
      auto p = Fetch(host, horizon);
      if (p.ok()) {
        outcome = "ok";
        cache_.Put(host.host(), horizon, *p, /*refreshed=*/true);
      } else {
        // Not tried again by each later ranking: the entry lives to its
        // expiry, and the ranking after that fetches it and reports the error.
        outcome = "error";
        cache_.KeepUntilExpiry(host.host(), horizon, cached.get());
      }
    }
    if (metrics_ != nullptr) {
      metrics_->Increment(kRefreshesMetric, kRefreshesHelp, {{"outcome", outcome}});
    }
    absl::MutexLock l(&refresh_mu_);
    if (std::string_view(outcome) != "skipped") ++refreshes_;
    refreshing_.erase({host.host(), horizon});
  });
  return true;
}

void Ranker::WaitForRefreshes() {
  absl::MutexLock l(&refresh_mu_);
  refresh_mu_.Await(absl::Condition(
      +[](std::set<std::pair<std::string, int64_t>>* keys) { return keys->empty(); },
      &refreshing_));
}

int64_t Ranker::HorizonFor(int64_t duration_seconds) const {
  const int64_t want = std::max(config_.horizon_seconds, 2 * duration_seconds);
  const int64_t days = (want + 86399) / 86400;
  return std::min(days * 86400, kMaxSeconds);
}

absl::StatusOr<std::shared_ptr<const HostPrediction>> Ranker::Fetch(
    const sojourn::v1::RegisteredHost& host, int64_t horizon) {
  sojourn::v1::PredictAvailabilityRequest req;
  req.set_host(host.host());
  req.set_window_seconds(horizon);
  req.set_statemgr_address(host.statemgr_address());
  req.set_curve_points(static_cast<int>(
      std::max<int64_t>(1, horizon / std::max<int64_t>(1, config_.curve_resolution_seconds))));
  // Stamped before the call: the TTL bounds the age of what the predictor
  // read, however long it took to answer.
  const absl::Time asked = clock_.Now();
  auto p = tr_source_.Predict(req);
  if (!p.ok()) return p.status();
  auto e = std::make_shared<HostPrediction>();
  e->tr = std::make_shared<scheduling::TrCurve>(CurveFromResponse(*p));
  e->response = std::move(*p);
  // Without the curve (it is in e->tr). clear_curve() would keep the cleared
  // points allocated for reuse (protobuf's RepeatedPtrField): 2,016 points
  // of about 48 bytes for a 7-day curve in every cached entry, about 470 MB
  // at 1,000 hosts and 7 horizons. Swapped into a temporary, they are freed.
  google::protobuf::RepeatedPtrField<sojourn::v1::TrPoint>().Swap(e->response.mutable_curve());
  e->version = HistoryVersion::OfFetch(host, e->response);
  e->fetched = asked;
  if (e->response.load_forecast_size() > 0) {
    // The state manager's forecast came with the prediction: no second call.
    scheduling::LoadForecast load;
    for (const auto& p : e->response.load_forecast()) load.Add(p.horizon_seconds(), p.load_ratio());
    e->load = load;
  } else if (load_source_ != nullptr && config_.load_history_seconds > 0) {
    int64_t last = e->response.last_sample_unix_seconds();
    if (last <= 0) last = host.last_sample_unix_seconds();
    if (last <= 0) last = absl::ToUnixSeconds(clock_.Now());
    auto samples = load_source_->RecentSamples(host, last - config_.load_history_seconds);
    if (samples.ok() && !samples->empty()) {
      // L_t0(t) from the samples up to the newest (section 8.4, footnote 1).
      e->load = scheduling::LoadForecast::FromSamples(*samples, samples->back().unix_seconds);
    }
  }
  return std::shared_ptr<const HostPrediction>(std::move(e));
}

absl::StatusOr<sojourn::v1::RankHostsResponse> Ranker::Rank(
    const sojourn::v1::RankHostsRequest& request,
    const std::vector<sojourn::v1::RegisteredHost>& hosts, const std::function<bool()>& stop) {
  const sojourn::v1::JobRequirements& job = request.job();
  if (job.duration_seconds() <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("job duration_seconds must be > 0, got ", job.duration_seconds()));
  }
  if (job.duration_seconds() > kMaxSeconds) {
    return absl::InvalidArgumentError("job duration_seconds must be at most 7 days");
  }
  // At most what a registered host can have (ValidateHostAttributes: 1e6
  // cores, 1e12 MB, 1e6 MHz): cpu_share_ratio 1e308 ranked hosts of unknown
  // size first with an infinite completion time.
  if (!(job.cpu_share_ratio() >= 0 && job.cpu_share_ratio() <= 1e6) ||
      !(job.memory_mb() >= 0 && job.memory_mb() <= 1e12) ||
      !(job.min_cpu_mhz() >= 0 && job.min_cpu_mhz() <= 1e6)) {
    // Every digit: StrCat's 6 would print 1000001 as 1e+06, "at most 1e6".
    std::string got;
    for (double v : {job.cpu_share_ratio(), job.memory_mb(), job.min_cpu_mhz()}) {
      if (!got.empty()) got += ", ";
      AppendShortest(&got, v);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "cpu_share_ratio, memory_mb and min_cpu_mhz must be finite, >= 0 and at most 1e6, 1e12 "
        "and 1e6; got ",
        got));
  }
  auto policy = scheduling::ParsePolicy(request.policy());
  if (!policy.ok()) return policy.status();
  if (*policy == scheduling::Policy::kOmniscient) {
    return absl::InvalidArgumentError(
        "policy 'omniscient' needs the future and exists in simulation only (sojourn-eval "
        "schedule)");
  }
  scheduling::Job sj;
  sj.task_length_seconds = static_cast<double>(job.duration_seconds());
  sj.cpu_share = job.cpu_share_ratio() > 0 ? job.cpu_share_ratio() : 1.0;
  sj.memory_mb = job.memory_mb();
  sj.min_cpu_mhz = job.min_cpu_mhz();
  sj.only_hosts.assign(job.only_hosts().begin(), job.only_hosts().end());
  const int64_t horizon = HorizonFor(job.duration_seconds());

  // Which hosts need a prediction: live ones the job may use (the rest are
  // explained without).
  const size_t n = hosts.size();
  const absl::flat_hash_set<std::string> only(job.only_hosts().begin(), job.only_hosts().end());
  std::vector<bool> asked(n, false);
  std::vector<std::shared_ptr<const HostPrediction>> pred(n);
  std::vector<absl::Status> errors(n);
  std::vector<size_t> misses;
  int cached = 0, refreshing = 0;
  for (size_t i = 0; i < n; ++i) {
    if (!hosts[i].live() || (!only.empty() && !only.contains(hosts[i].host()))) continue;
    asked[i] = true;
    PredictionCache::Found found =
        cache_.Find(hosts[i].host(), horizon, HistoryVersion::Of(hosts[i]));
    pred[i] = std::move(found.entry);
    if (pred[i] != nullptr) {
      ++cached;
      if (found.refresh_due && refresh_ != nullptr && RefreshAhead(hosts[i], horizon, pred[i])) {
        ++refreshing;
      }
    } else {
      misses.push_back(i);
    }
  }
  std::atomic<bool> stopped{false};
  auto fetch_one = [&](size_t i) {
    if (stopped.load(std::memory_order_relaxed) || (stop && stop())) {
      stopped.store(true, std::memory_order_relaxed);
      return;
    }
    auto p = Fetch(hosts[i], horizon);
    if (p.ok()) {
      pred[i] = *p;
      cache_.Put(hosts[i].host(), horizon, *p);
    } else {
      errors[i] = p.status();
    }
  };
  if (fanout_ == nullptr || misses.size() <= 1) {
    for (size_t i : misses) fetch_one(i);
  } else {
    absl::BlockingCounter done(static_cast<int>(misses.size()));
    for (size_t i : misses) {
      fanout_->Schedule([&, i] {
        fetch_one(i);
        done.DecrementCount();
      });
    }
    done.Wait();
  }
  if (stopped.load()) {
    return absl::DeadlineExceededError(
        "the ranking was abandoned (call cancelled or past its deadline) while fetching "
        "predictions");
  }

  // An outage is not "no host fits": when the policy needs predictions and
  // the predictor could not be reached for any live host, say so.
  if (*policy == scheduling::Policy::kProactive || *policy == scheduling::Policy::kTr) {
    bool any_live = false, any_prediction = false;
    const absl::Status* unreachable = nullptr;
    bool all_unreachable = true;
    for (size_t i = 0; i < n; ++i) {
      if (!asked[i]) continue;
      any_live = true;
      if (pred[i] != nullptr) {
        any_prediction = true;
      } else if (IsPredictorUnreachable(errors[i])) {
        if (unreachable == nullptr) unreachable = &errors[i];
      } else {
        all_unreachable = false;
      }
    }
    if (any_live && !any_prediction && all_unreachable && unreachable != nullptr) {
      return absl::UnavailableError(absl::StrCat(
          unreachable->message(), "; the ", scheduling::PolicyName(*policy),
          " policy cannot rank hosts without it"));
    }
  }

  std::vector<scheduling::HostInput> in(n);
  for (size_t i = 0; i < n; ++i) {
    const sojourn::v1::RegisteredHost& h = hosts[i];
    scheduling::HostInput& x = in[i];
    x.host = h.host();
    x.cpu_mhz = h.attributes().cpu_mhz();
    x.cpu_cores = h.attributes().cpu_cores();
    x.total_mem_mb = h.attributes().total_mem_mb();
    if (!h.live()) {
      x.unusable_reason = "heartbeat expired: the host's state manager stopped reporting";
      continue;
    }
    if (!asked[i]) continue;  // not among the job's only_hosts: RankHosts says so
    if (pred[i] == nullptr) {
      // Failure-oblivious policies still match the host on its heartbeat;
      // the proactive one needs the prediction.
      if (*policy == scheduling::Policy::kProactive || *policy == scheduling::Policy::kTr) {
        x.unusable_reason = absl::StrCat("no prediction: ", errors[i].message());
      }
      continue;
    }
    x.state = static_cast<int>(pred[i]->response.initial_state());
    x.tr = pred[i]->tr;
    x.load = pred[i]->load;
  }
  scheduling::RankOptions opt;
  opt.round_robin_offset = *policy == scheduling::Policy::kRoundRobin ? round_robin_++ : 0;
  auto ranking = scheduling::RankHosts(*policy, sj, in, opt);
  if (!ranking.ok()) return ranking.status();

  sojourn::v1::RankHostsResponse out;
  out.set_policy(scheduling::PolicyName(*policy));
  out.set_rule(ranking->rule);
  out.set_horizon_seconds(horizon);
  out.set_predictions_fetched(static_cast<int>(misses.size()));
  out.set_predictions_cached(cached);
  out.set_predictions_refreshing(refreshing);
  for (scheduling::RankedHost& r : ranking->hosts) {
    const size_t i = r.input_index;
    sojourn::v1::HostRank* hr = out.add_hosts();
    hr->set_host(r.host);
    hr->set_rank(r.rank);
    hr->set_eligible(r.eligible);
    hr->set_rule(r.rule);
    *hr->mutable_attributes() = hosts[i].attributes();
    hr->set_relative_speed_ratio(r.figures.relative_speed);
    const HostPrediction* p = pred[i].get();
    std::string reason = std::move(r.reason);
    if (p != nullptr) {
      hr->set_current_state(p->response.initial_state());
      hr->set_history_windows(p->response.history_windows());
      hr->set_low_history(p->response.low_history());
      const scheduling::HostFigures& f = r.figures;
      if (f.tr_at_duration) hr->set_tr_ratio(*f.tr_at_duration);
      if (f.mttf_seconds) hr->set_mttf_seconds(*f.mttf_seconds);
      if (f.jct_seconds) hr->set_jct_seconds(*f.jct_seconds);
      if (f.jctf_seconds) hr->set_jctf_seconds(*f.jctf_seconds);
      if (f.etl_seconds) hr->set_etl_seconds(*f.etl_seconds);
      if (f.predicted_load) hr->set_predicted_load_ratio(*f.predicted_load);
      if (r.eligible && p->response.low_history()) absl::StrAppend(&reason, " (low history)");
    } else if (r.eligible) {
      absl::StrAppend(&reason, " (state unknown: no prediction)");
    }
    hr->set_reason(std::move(reason));
  }
  return out;
}

absl::StatusOr<sojourn::v1::RankHostsResponse> RankHosts(
    const sojourn::v1::RankHostsRequest& request,
    const std::vector<sojourn::v1::RegisteredHost>& hosts, TrSource& tr_source) {
  RankerConfig cfg;
  cfg.fanout_threads = 0;
  cfg.cache_ttl = absl::ZeroDuration();
  Ranker ranker(tr_source, nullptr, Clock::Real(), cfg);
  return ranker.Rank(request, hosts);
}

}  // namespace sojourn::broker
