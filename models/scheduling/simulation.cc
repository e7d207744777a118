#include "models/scheduling/simulation.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <tuple>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "models/availability/frailty.h"
#include "models/availability/predict.h"
#include "models/availability/window.h"

namespace sojourn::scheduling {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

using availability::HostState;

struct SimHost {
  const HostTrace* trace = nullptr;
  availability::StateSeries series;
  std::vector<float> load;  // actual load at each grid point
  // availability::StateAges of series.states: equal states right before each
  // grid point (-1: the run reaches the series start).
  std::vector<int64_t> ages;
  double cpu_mhz = 0;
};

// State of host `h` at time t (S5 outside its recorded span).
HostState StateAt(const SimHost& h, int64_t t) {
  const auto& s = h.series;
  if (s.states.empty() || t < s.start_unix) return HostState::kS5;
  const int64_t k = (t - s.start_unix) / s.step_seconds;
  if (k >= static_cast<int64_t>(s.states.size())) return HostState::kS5;
  return s.states[static_cast<size_t>(k)];
}

bool Usable(HostState s) { return s == HostState::kS1 || s == HostState::kS2; }

double ShareOf(double load) { return std::clamp(1.0 - load, 0.0, 1.0); }

struct RunResult {
  bool finished = false;
  int64_t end = 0;  // finish or failure time
};

// Runs `work` seconds of reference-speed work on host h from t0 (section 8.4:
// progress at CR (1 - L)); fails at the first grid point in S3/S4/S5.
RunResult Execute(const SimHost& h, double relative_speed, int64_t t0, double work) {
  const auto& s = h.series;
  if (s.states.empty() || t0 < s.start_unix) return RunResult{false, t0};
  const int64_t d = s.step_seconds;
  int64_t k = (t0 - s.start_unix) / d;
  double t = static_cast<double>(t0);
  const int64_t n = static_cast<int64_t>(s.states.size());
  while (true) {
    if (k >= n) return RunResult{false, s.start_unix + n * d};
    if (!Usable(s.states[k])) return RunResult{false, std::max<int64_t>(t0, s.start_unix + k * d)};
    const double interval_end = static_cast<double>(s.start_unix + (k + 1) * d);
    const double rate = relative_speed * ShareOf(h.load[k]);
    if (rate > 0) {
      const double need = work / rate;
      if (t + need <= interval_end) {
        return RunResult{true, static_cast<int64_t>(std::ceil(t + need))};
      }
      work -= rate * (interval_end - t);
    }
    t = interval_end;
    ++k;
  }
}

class Experiment {
 public:
  Experiment(const std::vector<HostTrace>& traces, const ScheduleConfig& cfg)
      : traces_(traces), cfg_(cfg) {}

  absl::StatusOr<ScheduleResult> Run();

 private:
  // One replicate with its own seed (submission times, pools, clock rates);
  // adds its counts to `out` (not finalized).
  void RunReplicate(uint64_t seed, ScheduleResult* out);

  std::shared_ptr<const TrCurve> Tr(size_t host, int64_t t, HostState init);
  // What the predictor service adds to a host's own windows for a window
  // starting at `window_start` (service_pipeline): the population prior of
  // that window over every host and the frailty model, built from the past
  // only; cached per window start.
  struct Population {
    std::shared_ptr<const availability::SojournStats> prior;  // null: none
    // Each host's hazard ratio on the window's day type (empty: no frailty).
    std::vector<double> theta;
    // Every host's first-sojourn exits by load band before the window
    // (load_band_first_sojourn; null: none).
    std::shared_ptr<const availability::BandExposure> band;
  };
  const Population& PopulationAt(int64_t window_start, const availability::WindowSpec& spec);
  // The host's age in its state at t, as the state manager reports it
  // (t - the first grid point of the current run); -1 outside the series.
  int64_t AgeSeconds(const SimHost& h, int64_t t) const;
  const LoadForecast& Load(size_t host, int64_t t);
  // Ranks the hosts at time t for a job of `work` seconds; -1 when no host is usable.
  int Choose(Policy p, double work, int64_t t, uint64_t* rr_counter);

  const std::vector<HostTrace>& traces_;
  const ScheduleConfig& cfg_;
  std::vector<SimHost> hosts_;
  std::vector<size_t> pool_;  // candidates of the current submission
  double reference_mhz_ = 0;
  int64_t origin_ = 0;
  int64_t ndays_ = 0;
  int64_t trace_end_ = 0;
  // (host, local day, hour, init, age key, load band) -> curve; the age key
  // is the age class (or the exact age with exact_age_first_sojourn), -1
  // without age; the band is -1 without load_band_first_sojourn.
  std::map<std::tuple<size_t, int64_t, int, int, int64_t, int>, std::shared_ptr<const TrCurve>>
      tr_cache_;
  std::map<int64_t, Population> population_cache_;
  std::map<std::pair<size_t, int64_t>, LoadForecast> load_cache_;
  ScheduleResult result_;
};

int64_t Experiment::AgeSeconds(const SimHost& h, int64_t t) const {
  const auto& s = h.series;
  if (s.states.empty() || t < s.start_unix) return -1;
  const int64_t k = (t - s.start_unix) / s.step_seconds;
  if (k >= static_cast<int64_t>(s.states.size())) return -1;
  const int64_t a = h.ages[static_cast<size_t>(k)];
  const int64_t run_start = a >= 0 ? k - a : 0;
  return t - (s.start_unix + run_start * s.step_seconds);
}

const Experiment::Population& Experiment::PopulationAt(int64_t window_start,
                                                        const availability::WindowSpec& spec) {
  auto it = population_cache_.find(window_start);
  if (it != population_cache_.end()) return it->second;
  Population pop;
  const availability::EstimatorOptions& opt = cfg_.estimator;
  if (opt.censoring_aware && opt.prior_windows > 0) {
    // As the predictor's PopulationPrior: the same window over every host,
    // each host's statistics from its own past, summed by the library's
    // builder; hosts without a same-clock window add nothing.
    availability::PopulationPriorBuilder builder;
    for (const SimHost& h : hosts_) {
      availability::SojournStats st = availability::CollectStats(h.series, spec, window_start, opt);
      if (st.num_windows > 0) builder.Add(st);
    }
    auto pooled = std::make_shared<availability::SojournStats>(
        builder.Build(opt.level_corrected_borrowing));
    if (pooled->num_windows > 0) {
      pop.prior = std::move(pooled);
      if (opt.host_frailty) {
        // The model from every host's failure exposure before the window
        // (as the state managers report it); each host's ratio on the
        // window's day type (or over all days without frailty_by_day_type).
        availability::HostFrailtyModel frailty;
        std::vector<availability::FailureExposure> exposure;
        exposure.reserve(hosts_.size());
        for (const SimHost& h : hosts_) {
          exposure.push_back(availability::CountFailureExposure(h.series, window_start,
                                                                cfg_.utc_offset_seconds));
          frailty.Add(exposure.back());
        }
        frailty.Build();
        const int weekend = spec.day_type == availability::DayType::kWeekend;
        pop.theta.reserve(hosts_.size());
        for (const availability::FailureExposure& e : exposure) {
          pop.theta.push_back(opt.frailty_by_day_type ? frailty.Theta(e, weekend)
                                                      : frailty.Theta(e));
        }
      }
      if (opt.load_band_first_sojourn && opt.first_sojourn_kernel) {
        // As the predictor pools the state managers' exits by band.
        auto band = std::make_shared<availability::BandExposure>();
        const int64_t steps = cfg_.horizon_seconds / cfg_.step_seconds;
        for (const SimHost& h : hosts_) {
          band->Merge(availability::CountBandExposure(h.series, window_start,
                                                      cfg_.utc_offset_seconds, steps,
                                                      opt.recent_age_seconds,
                                                      opt.long_age_seconds));
        }
        pop.band = std::move(band);
      }
    }
  }
  return population_cache_[window_start] = std::move(pop);
}

std::shared_ptr<const TrCurve> Experiment::Tr(size_t host, int64_t t, HostState init) {
  const int64_t midnight = availability::LocalMidnight(t, cfg_.utc_offset_seconds);
  const int hour = static_cast<int>((t - midnight) / 3600);
  const availability::EstimatorOptions& opt = cfg_.estimator;
  const bool service = cfg_.service_pipeline && opt.censoring_aware;
  // The age the service would pass, and the key it matters by: only its
  // class, unless the first sojourn is conditioned on the exact age.
  int64_t age_seconds = service ? AgeSeconds(hosts_[host], t) : -1;
  int64_t age_key = -1;
  if (age_seconds >= 0 && opt.exact_age_first_sojourn) {
    age_key = age_seconds;
  } else if (age_seconds >= 0 && opt.recent_age_seconds > 0) {
    age_key = availability::AgeClassOf(age_seconds, opt.recent_age_seconds,
                                       opt.long_age_seconds > opt.recent_age_seconds
                                           ? opt.long_age_seconds
                                           : 0);
  }
  // The host's load band at t (the grid point's, as the state manager keeps it).
  int band = -1;
  if (service && opt.load_band_first_sojourn) {
    const auto& s = hosts_[host].series;
    const int64_t k = t >= s.start_unix ? (t - s.start_unix) / s.step_seconds : -1;
    band = k >= 0 && k < static_cast<int64_t>(s.load_band.size())
               ? s.load_band[static_cast<size_t>(k)]
               : availability::kLoadBandUnknown;
  }
  auto key = std::make_tuple(host, midnight, hour, static_cast<int>(init), age_key, band);
  auto it = tr_cache_.find(key);
  if (it != tr_cache_.end()) {
    ++result_.tr_cache_hits;
    if (cfg_.on_tr) cfg_.on_tr(host, t, init, it->second.get());
    return it->second;
  }
  ++result_.tr_computed;
  const int64_t window_start = midnight + hour * 3600;
  availability::WindowSpec spec;
  spec.day_type = availability::DayTypeOf(window_start, cfg_.utc_offset_seconds);
  spec.start_second_of_day = hour * 3600;
  spec.length_seconds = cfg_.horizon_seconds;
  spec.history_days = cfg_.history_days;
  spec.clock = cfg_.utc_offset_seconds;
  // Training windows end by the start of the decision's hour: only the past.
  availability::SojournStats stats =
      availability::CollectStats(hosts_[host].series, spec, window_start, opt);
  const availability::SojournStats* prior = nullptr;
  availability::FirstSojournRatio band_ratio;
  if (service) {
    const Population& pop = PopulationAt(window_start, spec);
    prior = pop.prior.get();
    if (!pop.theta.empty()) stats.prior_hazard_ratio = pop.theta[host];
    if (pop.band != nullptr && band >= 0) {
      band_ratio = pop.band->RatioOf(spec.day_type == availability::DayType::kWeekend, init,
                                     static_cast<uint8_t>(band));
    }
  }
  std::shared_ptr<const TrCurve> curve;
  // The service answers from the prior alone when the host has no window of
  // its own yet (its statemgr's whole-history fallback is not modelled).
  if (stats.num_windows > 0 || prior != nullptr) {
    const int M = static_cast<int>(cfg_.horizon_seconds / cfg_.step_seconds);
    availability::TrPrediction p =
        availability::PredictFromStats(stats, init, M, opt, prior, age_seconds, band_ratio);
    curve = std::make_shared<TrCurve>(cfg_.step_seconds, std::move(p.tr));
  }
  if (cfg_.on_tr) cfg_.on_tr(host, t, init, curve.get());
  tr_cache_[key] = curve;
  return curve;
}

const LoadForecast& Experiment::Load(size_t host, int64_t t) {
  auto key = std::make_pair(host, t);
  auto it = load_cache_.find(key);
  if (it != load_cache_.end()) return it->second;
  return load_cache_[key] = LoadForecast::FromSamples(hosts_[host].trace->samples, t);
}

int Experiment::Choose(Policy p, double work, int64_t t, uint64_t* rr_counter) {
  std::vector<HostInput> in;
  std::vector<size_t> index;
  for (size_t i : pool_) {
    const HostState s = StateAt(hosts_[i], t);
    if (!Usable(s)) continue;  // down hosts cannot win; skip their figures
    HostInput h;
    h.host = hosts_[i].trace->host;
    h.cpu_mhz = hosts_[i].cpu_mhz;
    h.state = static_cast<int>(s);
    if (p == Policy::kProactive || p == Policy::kTr) {
      h.tr = Tr(i, t, s);
      h.load = Load(i, t);
    }
    if (p == Policy::kOmniscient) {
      const double cr = h.cpu_mhz / reference_mhz_;
      RunResult r = Execute(hosts_[i], cr, t, work);
      h.oracle_completion_seconds = r.finished ? static_cast<double>(r.end - t) : kInf;
    }
    in.push_back(std::move(h));
    index.push_back(i);
  }
  if (in.empty()) return -1;
  Job job;
  job.task_length_seconds = work;
  RankOptions opt;
  opt.reference_mhz = reference_mhz_;
  opt.round_robin_offset = *rr_counter;
  auto ranking = RankHosts(p, job, in, opt);
  if (!ranking.ok() || ranking->usable == 0) {
    // Proactive without any TR (no training window yet): fall back to the
    // first usable host in name order, as a scheduler must place the job.
    return static_cast<int>(index.front());
  }
  if (p == Policy::kRoundRobin) ++*rr_counter;
  return static_cast<int>(index[ranking->hosts.front().input_index]);
}

void Finalize(PolicyStats* s) {
  s->failure_rate = s->scheduled > 0 ? static_cast<double>(s->failed) / s->scheduled : 0;
  s->unscheduled_rate = s->jobs > 0 ? static_cast<double>(s->unscheduled) / s->jobs : 0;
  s->avg_makespan_s = s->finished > 0 ? s->sum_makespan_s / s->finished : 0;
}

void Add(const PolicyStats& a, PolicyStats* s) {
  s->jobs += a.jobs;
  s->scheduled += a.scheduled;
  s->unscheduled += a.unscheduled;
  s->failed += a.failed;
  s->restarts += a.restarts;
  s->unfinished += a.unfinished;
  s->finished += a.finished;
  s->sum_makespan_s += a.sum_makespan_s;
}

// Rates and slowdown of every summary / by_length entry from its counts.
void FinalizeAll(ScheduleResult* r) {
  for (auto& [name, s] : r->summary) Finalize(&s);
  for (auto& [name, m] : r->by_length) {
    for (auto& [h, s] : m) Finalize(&s);
  }
  const std::string omni = PolicyName(Policy::kOmniscient);
  if (!r->summary.count(omni)) return;
  const double base = r->summary[omni].avg_makespan_s;
  for (auto& [name, s] : r->summary) {
    s.slowdown_vs_omniscient = base > 0 ? s.avg_makespan_s / base - 1.0 : 0.0;
  }
  for (auto& [name, m] : r->by_length) {
    for (auto& [h, s] : m) {
      const double b = r->by_length[omni][h].avg_makespan_s;
      s.slowdown_vs_omniscient = b > 0 ? s.avg_makespan_s / b - 1.0 : 0.0;
    }
  }
}

absl::StatusOr<ScheduleResult> Experiment::Run() {
  if (cfg_.step_seconds <= 0) return absl::InvalidArgumentError("step must be positive");
  if (cfg_.horizon_seconds < cfg_.step_seconds) {
    return absl::InvalidArgumentError("horizon must be at least one step");
  }
  if (cfg_.pool_size < 0) return absl::InvalidArgumentError("pool size must be >= 0");
  if (cfg_.submissions <= 0 || cfg_.lengths_hours.empty()) {
    return absl::InvalidArgumentError("need at least one submission and one job length");
  }
  for (double l : cfg_.lengths_hours) {
    if (!(l > 0)) return absl::InvalidArgumentError("job lengths must be positive");
  }
  if (!(cfg_.clock_min_mhz > 0) || cfg_.clock_max_mhz < cfg_.clock_min_mhz) {
    return absl::InvalidArgumentError("need 0 < clock_min_mhz <= clock_max_mhz");
  }
  if (cfg_.submit_start_hour < 0 || cfg_.submit_end_hour > 24 ||
      cfg_.submit_start_hour >= cfg_.submit_end_hour) {
    return absl::InvalidArgumentError("need 0 <= submit start hour < end hour <= 24");
  }
  if (traces_.empty()) return absl::InvalidArgumentError("the trace has no hosts");
  int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
  for (const HostTrace& t : traces_) {
    if (t.samples.empty()) continue;
    first = std::min(first, t.samples.front().unix_seconds);
    last = std::max(last, t.samples.back().unix_seconds);
  }
  if (first > last) return absl::InvalidArgumentError("the trace has no samples");
  const int64_t origin = availability::LocalMidnight(first, cfg_.utc_offset_seconds);
  const int64_t ndays = (last - origin) / 86400 + 1;
  result_.days = static_cast<int>(ndays);
  if (ndays < cfg_.warmup_days + cfg_.tail_days + 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the trace spans ", ndays, " days; need more than warmup + tail = ",
        cfg_.warmup_days + cfg_.tail_days));
  }

  origin_ = origin;
  ndays_ = ndays;
  trace_end_ = last;
  if (cfg_.replicates < 1) return absl::InvalidArgumentError("replicates must be >= 1");
  // Classification does not depend on the seed: done once for every replicate.
  hosts_.reserve(traces_.size());
  for (const HostTrace& t : traces_) {
    SimHost h;
    h.trace = &t;
    h.series = availability::ClassifyToGrid(t.samples, cfg_.classifier, cfg_.step_seconds, origin);
    h.load.assign(h.series.states.size(), 0.0f);
    size_t j = 0;
    for (size_t k = 0; k < h.series.states.size(); ++k) {
      const int64_t gt = h.series.start_unix + static_cast<int64_t>(k) * cfg_.step_seconds;
      while (j + 1 < t.samples.size() && t.samples[j + 1].unix_seconds <= gt) ++j;
      const double l = t.samples.empty() ? 0.0 : t.samples[j].cpu_load;
      h.load[k] = static_cast<float>(std::isfinite(l) ? std::clamp(l, 0.0, 1.0) : 0.0);
    }
    h.ages = availability::StateAges(h.series.states);
    hosts_.push_back(std::move(h));
  }
  result_.hosts = static_cast<int>(hosts_.size());
  // Replicate r uses seed + r; the TR and load caches are shared (they depend
  // on the trace and the decision time only, not on the seed).
  for (int r = 0; r < cfg_.replicates; ++r) {
    ScheduleResult rep;
    RunReplicate(cfg_.seed + static_cast<uint64_t>(r), &rep);
    for (const auto& [name, s] : rep.summary) Add(s, &result_.summary[name]);
    for (const auto& [name, m] : rep.by_length) {
      for (const auto& [h, s] : m) Add(s, &result_.by_length[name][h]);
    }
    result_.jobs += rep.jobs;
    FinalizeAll(&rep);
    result_.replicates.push_back(ReplicateResult{cfg_.seed + static_cast<uint64_t>(r),
                                                 std::move(rep.summary),
                                                 std::move(rep.by_length)});
  }
  FinalizeAll(&result_);
  return result_;
}

void Experiment::RunReplicate(uint64_t seed, ScheduleResult* out) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> clock(cfg_.clock_min_mhz, cfg_.clock_max_mhz);
  double sum_mhz = 0;
  for (SimHost& h : hosts_) {
    h.cpu_mhz = clock(rng);
    sum_mhz += h.cpu_mhz;
  }
  reference_mhz_ = sum_mhz / static_cast<double>(hosts_.size());
  const int64_t origin = origin_;
  const int64_t ndays = ndays_;
  // Submission times: uniform over the eligible days and 6 AM - 10 PM.
  std::uniform_int_distribution<int64_t> day(cfg_.warmup_days, ndays - cfg_.tail_days - 1);
  std::uniform_int_distribution<int64_t> sec(cfg_.submit_start_hour * 3600,
                                             cfg_.submit_end_hour * 3600 - 1);
  std::vector<int64_t> submits;
  for (int i = 0; i < cfg_.submissions; ++i) {
    const int64_t d = day(rng);
    submits.push_back(origin + d * 86400 + sec(rng));
  }
  std::sort(submits.begin(), submits.end());
  const int64_t trace_end = trace_end_;

  std::map<Policy, uint64_t> rr;
  const size_t total = submits.size() * cfg_.policies.size();
  size_t done = 0;
  std::vector<size_t> all(hosts_.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = i;
  for (int64_t submit : submits) {
    pool_ = all;
    if (cfg_.pool_size > 0 && static_cast<size_t>(cfg_.pool_size) < all.size()) {
      std::shuffle(pool_.begin(), pool_.end(), rng);
      pool_.resize(static_cast<size_t>(cfg_.pool_size));
      std::sort(pool_.begin(), pool_.end());
    }
    for (Policy p : cfg_.policies) {
      for (double hours : cfg_.lengths_hours) {
        const double work = hours * 3600.0;
        PolicyStats& s = out->summary[PolicyName(p)];
        PolicyStats& sl = out->by_length[PolicyName(p)][hours];
        ++s.jobs;
        ++sl.jobs;
        int64_t t = submit;
        int host = Choose(p, work, t, &rr[p]);
        if (host < 0) {
          t = submit + cfg_.retry_seconds;
          host = Choose(p, work, t, &rr[p]);
        }
        if (host < 0) {
          ++s.unscheduled;
          ++sl.unscheduled;
          continue;
        }
        ++s.scheduled;
        ++sl.scheduled;
        bool failed = false;
        bool finished = false;
        while (t <= trace_end) {
          if (host < 0) {
            t += cfg_.retry_seconds;
            host = Choose(p, work, t, &rr[p]);
            continue;
          }
          const double cr = hosts_[host].cpu_mhz / reference_mhz_;
          RunResult r = Execute(hosts_[host], cr, t, work);
          if (r.finished) {
            finished = true;
            t = r.end;
            break;
          }
          if (!failed) {
            failed = true;
            ++s.failed;
            ++sl.failed;
          }
          ++s.restarts;
          ++sl.restarts;
          t = std::max(r.end, t + 1);
          host = Choose(p, work, t, &rr[p]);
        }
        if (finished) {
          ++s.finished;
          ++sl.finished;
          s.sum_makespan_s += static_cast<double>(t - submit);
          sl.sum_makespan_s += static_cast<double>(t - submit);
        } else {
          ++s.unfinished;
          ++sl.unfinished;
        }
      }
      ++done;
      if (cfg_.progress) cfg_.progress((static_cast<double>(done) / static_cast<double>(total) +
                                      static_cast<double>(seed - cfg_.seed)) /
                                     cfg_.replicates);
    }
  }
  out->jobs = static_cast<int64_t>(submits.size() * cfg_.lengths_hours.size());
}

}  // namespace

absl::StatusOr<ScheduleResult> RunScheduleExperiment(const std::vector<HostTrace>& traces,
                                                     const ScheduleConfig& config) {
  Experiment e(traces, config);
  return e.Run();
}

}  // namespace sojourn::scheduling
