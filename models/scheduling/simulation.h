// The trace-driven scheduling experiment of paper 000 section 8.4: single
// guest jobs submitted at random times between 6 AM and 10 PM, each with
// several task lengths, scheduled by every policy onto the hosts of a trace
// whose recorded availability (and load) decides whether they finish.
//
//  * Each host's samples are classified onto a grid (availability library,
//    ClassifyToGrid); a host outside its recorded span is revoked (S5). A job
//    runs while its host is in S1/S2, progressing at CR * share(load) per
//    second (share = 1 - L for one core); the host entering S3/S4/S5 fails it.
//  * At submission only hosts in S1/S2 are candidates. With none, the job is
//    retried once after `retry_seconds`; still none: unscheduled (the same for
//    every policy). A failed job is restarted from the beginning by the same
//    policy at the failure time (retrying every `retry_seconds` while no host
//    is usable) until it finishes; it counts as failed once.
//  * proactive ranks with TR from availability::CollectStats +
//    PredictFromStats, trained on the same-clock windows (day type, start
//    hour, `horizon_seconds` long) that end by the start of the submission's
//    hour (so only the past is used), cached per host / day / start hour /
//    initial state; the load forecast is LoadForecast::FromSamples on the
//    samples before the decision. omniscient pre-executes the job on every
//    candidate and takes the earliest true finish.
//  * Each submission's candidates are a seeded random pool of `pool_size`
//    hosts of the trace (paper 000 section 5: a 20-machine testbed), or all.
//  * Clock rates are not in the traces: each host gets a seeded draw from
//    [clock_min_mhz, clock_max_mhz]; TL is measured at their mean.
#ifndef SOJOURN_MODELS_SCHEDULING_SIMULATION_H_
#define SOJOURN_MODELS_SCHEDULING_SIMULATION_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "common/host_sample.h"
#include "models/availability/kernel.h"
#include "models/availability/state.h"
#include "models/scheduling/policy.h"

namespace sojourn::scheduling {

struct ScheduleConfig {
  availability::ClassifierConfig classifier;
  availability::EstimatorOptions estimator;
  int64_t step_seconds = 300;
  int utc_offset_seconds = 0;
  // Most recent training days of the day type (0 = all before the job).
  int history_days = 0;
  // Submission times (each gets every length): paper = 60 x 7 = 420 jobs.
  int submissions = 60;
  std::vector<double> lengths_hours = {0.5, 1, 2, 3, 4, 5, 6};
  // Submissions fall on days [warmup_days, ndays - tail_days) of the trace,
  // local time [submit_start_hour, submit_end_hour).
  int warmup_days = 7;
  int tail_days = 2;
  int submit_start_hour = 6;
  int submit_end_hour = 22;
  int64_t retry_seconds = 300;
  // Each submission sees a random subset of this many hosts (seeded; the same
  // for every policy and length; restarts stay in it), like the paper's
  // 20-machine testbed. 0 = every host of the trace.
  int pool_size = 20;
  // Length of the TR curve (MTTF and JCTF are restricted to it).
  int64_t horizon_seconds = 86400;
  // proactive's TR as the predictor service computes it for the broker
  // (services/predictor/availability_predictor.cc): with the censoring-aware
  // estimator, the shrinkage prior pooled over every host of the trace (the
  // same window, trained on the same past), host frailty on the window's day
  // type from every host's failure exposure before the window, and the
  // host's age in its state at the decision. false: the host's own windows
  // only, no prior, frailty or age (the default until session 11).
  bool service_pipeline = true;
  double clock_min_mhz = 1000;
  double clock_max_mhz = 3000;
  uint64_t seed = 1;
  // Independent replicates of the experiment, replicate r with seed + r (its
  // own submission times, pools and clock rates). The summary pools their
  // counts; each replicate's own figures are kept in ScheduleResult. One
  // paper-size run (420 jobs) sees only a handful of failures, so a single
  // replicate cannot tell two policies apart.
  int replicates = 1;
  std::vector<Policy> policies = ExperimentPolicies();
  std::function<void(double)> progress;
  // Called with every TR curve proactive uses (cache hits too): the
  // host's index in the trace, the decision time, the host's state then and
  // the curve (null: no prediction). For diagnostics and tests.
  std::function<void(size_t host, int64_t t, availability::HostState init, const TrCurve* tr)>
      on_tr;
};

struct PolicyStats {
  int64_t jobs = 0;
  int64_t scheduled = 0;
  int64_t unscheduled = 0;
  // Scheduled jobs that failed at least once.
  int64_t failed = 0;
  int64_t restarts = 0;
  // Scheduled jobs that had not finished when the trace ended (no makespan).
  int64_t unfinished = 0;
  int64_t finished = 0;
  double sum_makespan_s = 0;
  // Derived (Finalize): failed / scheduled, unscheduled / jobs, mean
  // makespan of finished jobs, avg_makespan / omniscient's - 1.
  double failure_rate = 0;
  double unscheduled_rate = 0;
  double avg_makespan_s = 0;
  double slowdown_vs_omniscient = 0;
};

struct ReplicateResult {
  uint64_t seed = 0;
  std::map<std::string, PolicyStats> summary;
  std::map<std::string, std::map<double, PolicyStats>> by_length;
};

struct ScheduleResult {
  // policy name -> stats; by_length: policy -> length (hours) -> stats. Counts
  // are pooled over the replicates (rates are of the pooled counts).
  std::map<std::string, PolicyStats> summary;
  std::map<std::string, std::map<double, PolicyStats>> by_length;
  int hosts = 0;
  int days = 0;
  int64_t jobs = 0;
  // Ranking cache (TR curves) hits and misses of proactive.
  int64_t tr_computed = 0;
  int64_t tr_cache_hits = 0;
  // Per replicate, in seed order.
  std::vector<ReplicateResult> replicates;
};

// INVALID_ARGUMENT for an unusable configuration or a trace too short for
// warmup_days + tail_days + 1 days.
absl::StatusOr<ScheduleResult> RunScheduleExperiment(const std::vector<HostTrace>& traces,
                                                     const ScheduleConfig& config);

}  // namespace sojourn::scheduling

#endif  // SOJOURN_MODELS_SCHEDULING_SIMULATION_H_
