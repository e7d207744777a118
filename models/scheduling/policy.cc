#include "models/scheduling/policy.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/text.h"

namespace sojourn::scheduling {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

const char* StateName(int s) {
  switch (s) {
    case 1: return "S1 (idle)";
    case 2: return "S2 (busy)";
    case 3: return "S3 (overloaded)";
    case 4: return "S4 (memory thrashing)";
    case 5: return "S5 (revoked)";
    default: return "unknown";
  }
}

std::string Hours(double s) { return absl::StrFormat("%.2fh", s / 3600.0); }

// Share of the host's CPU a guest gets at load L (1 - L for one core and a
// one-CPU job).
double Share(double load, int cores, double cpu_share) {
  const double c = cores > 0 ? cores : 1;
  const double need = cpu_share > 0 ? cpu_share : 1.0;
  return std::clamp(c * (1.0 - std::clamp(load, 0.0, 1.0)) / need, 0.0, 1.0);
}

}  // namespace

absl::StatusOr<Policy> ParsePolicy(absl::string_view name) {
  if (name.empty() || name == "proactive") return Policy::kProactive;
  if (name == "condor") return Policy::kCondor;
  if (name == "round_robin") return Policy::kRoundRobin;
  if (name == "omniscient") return Policy::kOmniscient;
  if (name == "tr") return Policy::kTr;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown policy '", Excerpt(name),
      "' (available: proactive, condor, round_robin, omniscient (simulation only), tr)"));
}

const char* PolicyName(Policy p) {
  switch (p) {
    case Policy::kProactive: return "proactive";
    case Policy::kCondor: return "condor";
    case Policy::kRoundRobin: return "round_robin";
    case Policy::kOmniscient: return "omniscient";
    case Policy::kTr: return "tr";
  }
  return "?";
}

const std::vector<Policy>& ExperimentPolicies() {
  static const auto* p = new std::vector<Policy>{Policy::kProactive, Policy::kCondor,
                                                 Policy::kRoundRobin, Policy::kOmniscient};
  return *p;
}

TrCurve::TrCurve(int64_t step_seconds, std::vector<double> tr)
    : step_(step_seconds), tr_(std::move(tr)) {
  for (double& v : tr_) v = std::isfinite(v) ? std::clamp(v, 0.0, 1.0) : 0.0;
  cum_.assign(tr_.size() + 1, 0.0);
  double prev = 1.0;
  for (size_t m = 0; m < tr_.size(); ++m) {
    cum_[m + 1] = cum_[m] + 0.5 * static_cast<double>(step_) * (prev + tr_[m]);
    prev = tr_[m];
  }
}

double TrCurve::At(double t) const {
  if (empty()) return 0.0;
  if (t <= 0) return 1.0;
  const double x = t / static_cast<double>(step_);
  const size_t m = static_cast<size_t>(std::floor(x));
  if (m >= tr_.size()) return tr_.back();
  const double lo = m == 0 ? 1.0 : tr_[m - 1];
  const double hi = tr_[m];
  return lo + (x - static_cast<double>(m)) * (hi - lo);
}

double TrCurve::Integral(double t) const {
  if (empty() || t <= 0) return 0.0;
  const double d = static_cast<double>(step_);
  const double x = t / d;
  const size_t m = static_cast<size_t>(std::floor(x));
  if (m >= tr_.size()) return cum_.back();
  const double frac = (x - static_cast<double>(m)) * d;
  const double lo = m == 0 ? 1.0 : tr_[m - 1];
  return cum_[m] + frac * 0.5 * (lo + At(t));
}

std::optional<double> SolveJctf(double task_length_seconds, const TrCurve& tr, double cr,
                                const LoadForecast& load, int cpu_cores, double cpu_share) {
  if (tr.empty() || !(task_length_seconds > 0) || !(cr > 0)) return std::nullopt;
  // Work done by time x if the host had not failed, weighted by survival:
  // W(x) = CR share(L(x)) integral_0^x TR (eq. 7's right-hand side).
  auto work = [&](double x) {
    return cr * Share(load.At(x), cpu_cores, cpu_share) * tr.Integral(x);
  };
  const double d = static_cast<double>(tr.step_seconds());
  const size_t M = tr.values().size();
  if (work(d * static_cast<double>(M)) < task_length_seconds) return std::nullopt;
  // W is nondecreasing unless the forecast load rises with the horizon (the
  // integral of TR >= 0 never decreases): binary search for the grid step
  // where W reaches TL, then bisection inside that step (to 1 ms). With a
  // rising load forecast this finds a crossing, not necessarily the first.
  size_t lo_m = 0, hi_m = M;  // W(lo_m d) < TL <= W(hi_m d)
  while (hi_m - lo_m > 1) {
    const size_t mid = (lo_m + hi_m) / 2;
    if (work(d * static_cast<double>(mid)) >= task_length_seconds) {
      hi_m = mid;
    } else {
      lo_m = mid;
    }
  }
  double lo = d * static_cast<double>(lo_m), hi = d * static_cast<double>(hi_m);
  while (hi - lo > 1e-3) {
    const double mid = 0.5 * (lo + hi);
    if (work(mid) >= task_length_seconds) {
      hi = mid;
    } else {
      lo = mid;
    }
  }
  return hi;
}

double MedianClockRate(const std::vector<HostInput>& hosts) {
  std::vector<double> usable, all;
  for (const HostInput& h : hosts) {
    if (!(h.cpu_mhz > 0)) continue;
    all.push_back(h.cpu_mhz);
    if (h.unusable_reason.empty()) usable.push_back(h.cpu_mhz);
  }
  std::vector<double>& v = usable.empty() ? all : usable;
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  if (v.size() % 2 == 1) return v[mid];
  const double upper = v[mid];
  return (*std::max_element(v.begin(), v.begin() + mid) + upper) / 2;
}

HostFigures ComputeFigures(const Job& job, const HostInput& h, double reference_mhz) {
  HostFigures f;
  f.relative_speed = (h.cpu_mhz > 0 && reference_mhz > 0) ? h.cpu_mhz / reference_mhz : 1.0;
  const double tl = job.task_length_seconds;
  const double cr = f.relative_speed;
  if (h.load.known()) f.predicted_load = h.load.At(tl);
  // JCT = TL / [CR (1 - L_t0(TL))] (section 8.4).
  const double speed = cr * Share(h.load.At(tl), h.cpu_cores, job.cpu_share);
  if (speed > 0) f.jct_seconds = tl / speed;
  f.oracle_completion_seconds = h.oracle_completion_seconds;
  if (h.tr == nullptr || h.tr->empty()) return f;
  const TrCurve& tr = *h.tr;
  f.tr_at_duration = tr.At(tl);
  const double mttf = tr.Mttf();  // eq. 5
  f.mttf_seconds = mttf;
  // ETL = MTTF CR (1 - L_t0(MTTF)) (eq. 6).
  f.etl_seconds = mttf * cr * Share(h.load.At(mttf), h.cpu_cores, job.cpu_share);
  f.jctf_seconds = SolveJctf(tl, tr, cr, h.load, h.cpu_cores, job.cpu_share);  // eq. 7
  return f;
}

absl::StatusOr<Ranking> RankHosts(Policy policy, const Job& job,
                                  const std::vector<HostInput>& hosts,
                                  const RankOptions& options) {
  if (!(job.task_length_seconds > 0) || !std::isfinite(job.task_length_seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("task length must be a positive number of seconds, got ",
                     job.task_length_seconds));
  }
  if (!std::isfinite(job.cpu_share) || job.cpu_share < 0 || !std::isfinite(job.memory_mb) ||
      job.memory_mb < 0 || !std::isfinite(job.min_cpu_mhz) || job.min_cpu_mhz < 0) {
    return absl::InvalidArgumentError("cpu share, memory and minimum clock rate must be >= 0");
  }
  double reference = options.reference_mhz;
  if (!(reference > 0)) reference = MedianClockRate(hosts);
  const double cpu = job.cpu_share > 0 ? job.cpu_share : 1.0;
  const std::set<std::string> only(job.only_hosts.begin(), job.only_hosts.end());
  const bool needs_tr = policy == Policy::kProactive || policy == Policy::kTr;

  Ranking out;
  out.policy = policy;
  std::vector<RankedHost> usable, unusable;
  for (size_t i = 0; i < hosts.size(); ++i) {
    const HostInput& h = hosts[i];
    RankedHost r;
    r.input_index = i;
    r.host = h.host;
    r.figures = ComputeFigures(job, h, reference);
    std::string why;
    if (!h.unusable_reason.empty()) {
      why = h.unusable_reason;
    } else if (!only.empty() && only.count(h.host) == 0) {
      why = "not among the job's allowed hosts";
    } else if (h.cpu_cores > 0 && cpu > h.cpu_cores) {
      why = absl::StrFormat("needs %.2f CPUs, host has %d", cpu, h.cpu_cores);
    } else if (h.total_mem_mb > 0 && job.memory_mb > h.total_mem_mb) {
      why = absl::StrFormat("needs %.0f MiB of memory, host has %.0f MiB", job.memory_mb,
                            h.total_mem_mb);
    } else if (job.min_cpu_mhz > 0 && h.cpu_mhz <= 0) {
      why = absl::StrFormat("clock rate unknown, job needs >= %.0f MHz", job.min_cpu_mhz);
    } else if (job.min_cpu_mhz > 0 && h.cpu_mhz < job.min_cpu_mhz) {
      why = absl::StrFormat("clock %.0f MHz below the job's %.0f MHz", h.cpu_mhz, job.min_cpu_mhz);
    } else if (h.state >= 3) {
      why = absl::StrCat("host is in ", StateName(h.state), " now");
    } else if (needs_tr && (h.tr == nullptr || h.tr->empty())) {
      why = "no TR prediction for the host";
    } else if (policy == Policy::kOmniscient && !h.oracle_completion_seconds) {
      why = "no knowledge of the future (omniscient is for simulation only)";
    } else if (!r.figures.jct_seconds && policy != Policy::kOmniscient) {
      why = "predicted load leaves the job no CPU";
    }
    if (!why.empty()) {
      r.reason = std::move(why);
      unusable.push_back(std::move(r));
    } else {
      r.eligible = true;
      usable.push_back(std::move(r));
    }
  }

  auto by_name = [](const RankedHost& a, const RankedHost& b) { return a.host < b.host; };
  auto opt = [](const std::optional<double>& v, double def) { return v ? *v : def; };
  switch (policy) {
    case Policy::kProactive: {
      // Section 8.4: if JCT > MTTF on every host, largest ETL; else smallest JCTF.
      bool all_exceed = !usable.empty();
      for (const RankedHost& r : usable) {
        if (!(opt(r.figures.jct_seconds, kInf) > opt(r.figures.mttf_seconds, 0))) {
          all_exceed = false;
        }
      }
      out.rule = usable.empty() ? "" : (all_exceed ? "etl" : "jctf");
      if (all_exceed) {
        std::stable_sort(usable.begin(), usable.end(), [&](const RankedHost& a, const RankedHost& b) {
          const double ea = opt(a.figures.etl_seconds, 0), eb = opt(b.figures.etl_seconds, 0);
          if (ea != eb) return ea > eb;
          return by_name(a, b);
        });
      } else {
        std::stable_sort(usable.begin(), usable.end(), [&](const RankedHost& a, const RankedHost& b) {
          const double ja = opt(a.figures.jctf_seconds, kInf), jb = opt(b.figures.jctf_seconds, kInf);
          if (ja != jb) return ja < jb;
          const double ea = opt(a.figures.etl_seconds, 0), eb = opt(b.figures.etl_seconds, 0);
          if (ea != eb) return ea > eb;
          return by_name(a, b);
        });
      }
      for (RankedHost& r : usable) {
        r.rule = out.rule;
        const HostFigures& f = r.figures;
        if (all_exceed) {
          r.reason = absl::StrFormat(
              "ETL %s (every host's JCT exceeds its MTTF: largest ETL first; JCT %s, MTTF %s)",
              Hours(opt(f.etl_seconds, 0)), Hours(opt(f.jct_seconds, kInf)),
              Hours(opt(f.mttf_seconds, 0)));
        } else if (f.jctf_seconds) {
          r.reason = absl::StrFormat("JCTF %s (smallest JCTF first; JCT %s, MTTF %s, TR %.3f)",
                                     Hours(*f.jctf_seconds), Hours(opt(f.jct_seconds, kInf)),
                                     Hours(opt(f.mttf_seconds, 0)), opt(f.tr_at_duration, 0));
        } else {
          r.reason = absl::StrFormat(
              "JCTF beyond the %s prediction horizon (ordered by ETL %s after hosts with a JCTF)",
              Hours(hosts[r.input_index].tr->horizon_seconds()), Hours(opt(f.etl_seconds, 0)));
        }
      }
      break;
    }
    case Policy::kCondor:
      // Matchmaking, then the job's rank expression: clock rate (section 8.4).
      out.rule = "clock_rate";
      std::stable_sort(usable.begin(), usable.end(), [&](const RankedHost& a, const RankedHost& b) {
        const double ca = hosts[a.input_index].cpu_mhz, cb = hosts[b.input_index].cpu_mhz;
        if (ca != cb) return ca > cb;
        return by_name(a, b);
      });
      for (RankedHost& r : usable) {
        r.rule = out.rule;
        const double mhz = hosts[r.input_index].cpu_mhz;
        r.reason = mhz > 0 ? absl::StrFormat("matches; clock %.0f MHz (highest first)", mhz)
                           : "matches; clock rate unknown (ranked after known rates)";
      }
      break;
    case Policy::kRoundRobin: {
      out.rule = "round_robin";
      std::stable_sort(usable.begin(), usable.end(), by_name);
      if (!usable.empty()) {
        const size_t k = options.round_robin_offset % usable.size();
        std::rotate(usable.begin(), usable.begin() + static_cast<std::ptrdiff_t>(k), usable.end());
      }
      for (RankedHost& r : usable) {
        r.rule = out.rule;
        r.reason = "next in turn";
      }
      break;
    }
    case Policy::kOmniscient:
      out.rule = "oracle";
      std::stable_sort(usable.begin(), usable.end(), [&](const RankedHost& a, const RankedHost& b) {
        const double oa = opt(a.figures.oracle_completion_seconds, kInf);
        const double ob = opt(b.figures.oracle_completion_seconds, kInf);
        if (oa != ob) return oa < ob;
        return by_name(a, b);
      });
      for (RankedHost& r : usable) {
        r.rule = out.rule;
        const double o = opt(r.figures.oracle_completion_seconds, kInf);
        r.reason = std::isfinite(o) ? absl::StrFormat("truly finishes after %s", Hours(o))
                                    : "would never finish (known future)";
      }
      break;
    case Policy::kTr:
      out.rule = "tr";
      std::stable_sort(usable.begin(), usable.end(), [&](const RankedHost& a, const RankedHost& b) {
        const double ta = opt(a.figures.tr_at_duration, 0), tb = opt(b.figures.tr_at_duration, 0);
        if (ta != tb) return ta > tb;
        const double ma = opt(a.figures.mttf_seconds, 0), mb = opt(b.figures.mttf_seconds, 0);
        if (ma != mb) return ma > mb;
        return by_name(a, b);
      });
      for (RankedHost& r : usable) {
        r.rule = out.rule;
        r.reason = absl::StrFormat("TR over %s = %.3f", Hours(job.task_length_seconds),
                                   opt(r.figures.tr_at_duration, 0));
      }
      break;
  }
  if (usable.empty()) out.rule.clear();  // no rule placed anything
  int rank = 0;
  out.usable = static_cast<int>(usable.size());
  out.hosts.reserve(hosts.size());
  for (RankedHost& r : usable) {
    r.rank = ++rank;
    out.hosts.push_back(std::move(r));
  }
  for (RankedHost& r : unusable) out.hosts.push_back(std::move(r));
  return out;
}

}  // namespace sojourn::scheduling
