#include "services/convert.h"

#include <cmath>

#include "absl/strings/str_cat.h"

namespace sojourn {

v1::HostSample ToProto(const HostSample& s) {
  v1::HostSample p;
  p.set_unix_seconds(s.unix_seconds);
  p.set_cpu_load_ratio(s.cpu_load);
  if (!std::isnan(s.free_mem_mb)) p.set_free_mem_mb(s.free_mem_mb);
  if (!std::isnan(s.swap_in_per_s)) p.set_swap_in_pages_per_second(s.swap_in_per_s);
  if (!std::isnan(s.swap_out_per_s)) p.set_swap_out_pages_per_second(s.swap_out_per_s);
  return p;
}

HostSample FromProto(const v1::HostSample& p) {
  HostSample s;
  s.unix_seconds = p.unix_seconds();
  s.cpu_load = p.cpu_load_ratio();
  if (p.has_free_mem_mb()) s.free_mem_mb = p.free_mem_mb();
  if (p.has_swap_in_pages_per_second()) s.swap_in_per_s = p.swap_in_pages_per_second();
  if (p.has_swap_out_pages_per_second()) s.swap_out_per_s = p.swap_out_pages_per_second();
  return s;
}

v1::HostState ToProto(availability::HostState s) {
  return static_cast<v1::HostState>(static_cast<int>(s));
}

absl::StatusOr<availability::HostState> FromProto(v1::HostState s) {
  int v = static_cast<int>(s);
  if (v < 1 || v > 5) return absl::InvalidArgumentError(absl::StrCat("invalid host state ", v));
  return static_cast<availability::HostState>(v);
}

v1::DayType ToProto(availability::DayType d) {
  return d == availability::DayType::kWeekend ? v1::DAY_TYPE_WEEKEND : v1::DAY_TYPE_WEEKDAY;
}

v1::SojournStats ToProto(const availability::SojournStats& stats) {
  v1::SojournStats p;
  p.set_step_seconds(stats.step_seconds);
  p.set_window_steps(stats.window_steps);
  p.set_windows(static_cast<int32_t>(stats.num_windows));
  p.set_total_weight(stats.total_weight);
  for (double w : stats.initial) p.add_initial_weight(w);
  auto emit = [&p](const availability::StateSojourns& s, int from, bool first, int age_class,
                   int64_t age_steps = 0) {
    for (const auto& [key, count] : s.completed) {
      v1::SojournCount* c = p.add_sojourns();
      c->set_from_state(static_cast<v1::HostState>(from));
      c->set_to_state(static_cast<v1::HostState>(key.first));
      c->set_length_steps(key.second);
      c->set_count(count);
      c->set_first_in_window(first);
      c->set_age_class(age_class);
      c->set_age_steps(age_steps);
    }
    for (const auto& [length, count] : s.censored) {
      v1::SojournCount* c = p.add_sojourns();
      c->set_from_state(static_cast<v1::HostState>(from));
      c->set_to_state(v1::HOST_STATE_UNSPECIFIED);
      c->set_length_steps(length);
      c->set_count(count);
      c->set_first_in_window(first);
      c->set_age_class(age_class);
      c->set_age_steps(age_steps);
    }
  };
  for (int i = 1; i <= 5; ++i) {
    emit(stats.ordinary[i], i, false, 0);
    emit(stats.first[i], i, true, 0);
    emit(stats.first_by_age[0][i], i, true, 1);
    emit(stats.first_by_age[1][i], i, true, 2);
    emit(stats.first_by_age[2][i], i, true, 4);
    for (const auto& [age, s] : stats.first_by_exact_age[i]) emit(s, i, true, 3, age);
    for (const auto& [step, weight] : stats.first_failure[i]) {
      auto* f = p.add_first_failures();
      f->set_initial_state(static_cast<v1::HostState>(i));
      f->set_step(step);
      f->set_weight(weight);
    }
  }
  for (double w : stats.initial_by_age[0]) p.add_initial_weight_settled(w);
  for (double w : stats.initial_by_age[1]) p.add_initial_weight_recent(w);
  for (double w : stats.initial_by_age[2]) p.add_initial_weight_long(w);
  p.set_own_up_windows(stats.own_up_windows);
  p.set_own_up_survived(stats.own_up_survived);
  if (!stats.borrowed.empty()) *p.mutable_borrowed() = ToProto(stats.borrowed[0]);
  return p;
}

absl::StatusOr<availability::SojournStats> FromProto(const v1::SojournStats& p) {
  availability::SojournStats stats;
  if (p.has_borrowed()) {
    if (p.borrowed().has_borrowed()) {
      return absl::InvalidArgumentError("borrowed statistics must not hold borrowed statistics");
    }
    absl::StatusOr<availability::SojournStats> b = FromProto(p.borrowed());
    if (!b.ok()) return absl::InvalidArgumentError(absl::StrCat("borrowed: ", b.status().message()));
    if (b->num_windows > p.windows()) {
      return absl::InvalidArgumentError("more borrowed windows than windows");
    }
    stats.borrowed.push_back(*std::move(b));
  }
  stats.step_seconds = p.step_seconds();
  stats.window_steps = p.window_steps();
  stats.num_windows = p.windows();
  stats.total_weight = p.total_weight();
  stats.own_up_windows = p.own_up_windows();
  stats.own_up_survived = p.own_up_survived();
  if (!(stats.own_up_windows >= 0) || !(stats.own_up_survived >= 0) ||
      stats.own_up_survived > stats.own_up_windows) {
    return absl::InvalidArgumentError("invalid own window counts");
  }
  if (p.initial_weight_size() > 6) return absl::InvalidArgumentError("too many initial weights");
  if (p.initial_weight_settled_size() > 6 || p.initial_weight_recent_size() > 6 ||
      p.initial_weight_long_size() > 6) {
    return absl::InvalidArgumentError("too many initial weights");
  }
  for (int i = 0; i < p.initial_weight_size(); ++i) stats.initial[i] = p.initial_weight(i);
  for (int i = 0; i < p.initial_weight_settled_size(); ++i) {
    stats.initial_by_age[0][i] = p.initial_weight_settled(i);
  }
  for (int i = 0; i < p.initial_weight_recent_size(); ++i) {
    stats.initial_by_age[1][i] = p.initial_weight_recent(i);
  }
  for (int i = 0; i < p.initial_weight_long_size(); ++i) {
    stats.initial_by_age[2][i] = p.initial_weight_long(i);
  }
  for (const v1::FirstFailure& f : p.first_failures()) {
    const int i = static_cast<int>(f.initial_state());
    if (i < 1 || i > 5 || f.step() < 1 || !(f.weight() >= 0)) {
      return absl::InvalidArgumentError("invalid first failure entry");
    }
    stats.first_failure[i][f.step()] += f.weight();
  }
  for (const v1::SojournCount& c : p.sojourns()) {
    int from = static_cast<int>(c.from_state());
    int to = static_cast<int>(c.to_state());
    if (from < 1 || from > 5 || to < 0 || to > 5 || to == from || c.length_steps() < 0 ||
        !(c.count() >= 0) || !std::isfinite(c.count())) {
      return absl::InvalidArgumentError(absl::StrCat("invalid sojourn count: from ", from, " to ",
                                                     to, " length ", c.length_steps()));
    }
    if (c.age_class() < 0 || c.age_class() > 4 || (c.age_class() > 0 && !c.first_in_window()) ||
        c.age_steps() < 0 || (c.age_class() != 3 && c.age_steps() != 0)) {
      return absl::InvalidArgumentError("invalid age class");
    }
    availability::StateSojourns& s =
        c.age_class() == 3 ? stats.first_by_exact_age[from][c.age_steps()]
        : c.age_class() == 4 ? stats.first_by_age[availability::kAgeLong][from]
        : c.age_class() > 0  ? stats.first_by_age[c.age_class() - 1][from]
        : c.first_in_window() ? stats.first[from]
                              : stats.ordinary[from];
    if (to == 0) {
      s.censored[c.length_steps()] += c.count();
    } else {
      if (c.length_steps() < 1) return absl::InvalidArgumentError("completed sojourn of length 0");
      s.completed[{to, c.length_steps()}] += c.count();
    }
  }
  return stats;
}

v1::FailureExposure ToProto(const availability::FailureExposure& e) {
  v1::FailureExposure p;
  for (int k = 0; k < 2; ++k) {
    for (int d = 0; d < 2; ++d) {
      for (int h = 0; h < 24; ++h) {
        p.add_up_steps(e.up_steps[k][d][h]);
        p.add_failures(e.failures[k][d][h]);
      }
    }
  }
  return p;
}

absl::StatusOr<availability::FailureExposure> FromProto(const v1::FailureExposure& p) {
  if (p.up_steps_size() != 96 || p.failures_size() != 96) {
    return absl::InvalidArgumentError("failure exposure needs 96 up_steps and 96 failures");
  }
  availability::FailureExposure e;
  int i = 0;
  for (int k = 0; k < 2; ++k) {
    for (int d = 0; d < 2; ++d) {
      for (int h = 0; h < 24; ++h, ++i) {
        const double up = p.up_steps(i), fail = p.failures(i);
        if (!(up >= 0) || !(fail >= 0) || fail > up || !std::isfinite(up)) {
          return absl::InvalidArgumentError("invalid failure exposure counts");
        }
        e.up_steps[k][d][h] = up;
        e.failures[k][d][h] = fail;
      }
    }
  }
  return e;
}

v1::BandExposure ToProto(const availability::BandExposure& e) {
  v1::BandExposure p;
  for (int d = 0; d < 2; ++d)
    for (int st = 0; st < 2; ++st)
      for (int b = 0; b < 2; ++b)
        for (int c = 0; c < 2; ++c) {
          p.add_observed(e.observed[d][st][b][c]);
          p.add_expected(e.expected[d][st][b][c]);
        }
  return p;
}

absl::StatusOr<availability::BandExposure> FromProto(const v1::BandExposure& p) {
  if (p.observed_size() != 16 || p.expected_size() != 16) {
    return absl::InvalidArgumentError("band exposure needs 16 observed and 16 expected values");
  }
  availability::BandExposure e;
  int i = 0;
  for (int d = 0; d < 2; ++d)
    for (int st = 0; st < 2; ++st)
      for (int b = 0; b < 2; ++b)
        for (int c = 0; c < 2; ++c, ++i) {
          const double o = p.observed(i), x = p.expected(i);
          if (!(o >= 0) || !(x >= 0) || !std::isfinite(o) || !std::isfinite(x)) {
            return absl::InvalidArgumentError("invalid band exposure counts");
          }
          e.observed[d][st][b][c] = o;
          e.expected[d][st][b][c] = x;
        }
  return e;
}

v1::LoadBand LoadBandToProto(uint8_t band) {
  switch (band) {
    case 0:
      return v1::LOAD_BAND_LOW;
    case 1:
      return v1::LOAD_BAND_HIGH;
    default:
      return v1::LOAD_BAND_UNKNOWN;
  }
}

uint8_t LoadBandFromProto(v1::LoadBand band) {
  switch (band) {
    case v1::LOAD_BAND_LOW:
      return 0;
    case v1::LOAD_BAND_HIGH:
      return 1;
    default:
      return availability::kLoadBandUnknown;
  }
}

}  // namespace sojourn
