// Synthetic 5-minute use series for the usage tests.
#ifndef SOJOURN_TESTS_MODELS_USAGE_SYNTHETIC_H_
#define SOJOURN_TESTS_MODELS_USAGE_SYNTHETIC_H_

#include <functional>
#include <vector>

#include "models/usage/series.h"

namespace sojourn::usage::testing {

inline constexpr int64_t kOrigin = 1372636800;  // 2013-07-01 00:00 UTC, a Monday

// A series of `days` days whose bin b has cpu = f(day, bin of day) and
// mem = g(day, bin of day).
inline UsageSeries MakeSeries(int days, const std::function<double(int, int)>& cpu,
                              const std::function<double(int, int)>& mem) {
  UsageSeries s;
  s.origin_unix = kOrigin;
  for (int d = 0; d < days; ++d) {
    for (int b = 0; b < kBinsPerDay; ++b) {
      s.cpu.push_back(cpu(d, b));
      s.mem.push_back(mem(d, b));
    }
  }
  return s;
}

// Office-hours profile: `busy` from 9:00 to 17:00 on weekdays, `idle` otherwise.
inline double Office(int day, int bin, double busy = 0.9, double idle = 0.05) {
  const bool weekday = day % 7 < 5;
  const bool office = bin >= 9 * kBinsPerHour && bin < 17 * kBinsPerHour;
  return weekday && office ? busy : idle;
}

// The same every day: `busy` from 9:00 to 17:00, `idle` otherwise.
inline double Daily(int bin, double busy = 0.9, double idle = 0.05) {
  return bin >= 9 * kBinsPerHour && bin < 17 * kBinsPerHour ? busy : idle;
}

}  // namespace sojourn::usage::testing

#endif  // SOJOURN_TESTS_MODELS_USAGE_SYNTHETIC_H_
