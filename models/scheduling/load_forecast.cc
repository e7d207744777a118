#include "models/scheduling/load_forecast.h"

#include <algorithm>
#include <cmath>

namespace sojourn::scheduling {

std::optional<double> OneStepAhead(const std::vector<double>& blocks) {
  const size_t n = blocks.size();
  if (n == 0) return std::nullopt;
  double mu = 0;
  for (double b : blocks) mu += b;
  mu /= static_cast<double>(n);
  if (n < 3) return mu;
  double var = 0, cov = 0;
  for (size_t i = 0; i < n; ++i) var += (blocks[i] - mu) * (blocks[i] - mu);
  for (size_t i = 1; i < n; ++i) cov += (blocks[i] - mu) * (blocks[i - 1] - mu);
  const double phi = var > 1e-15 ? std::clamp(cov / var, 0.0, 1.0) : 0.0;
  return mu + phi * (blocks[n - 1] - mu);
}

std::optional<double> AggregatedLoadForecast(const std::vector<HostSample>& samples, int64_t t0,
                                             int64_t horizon_seconds, int max_blocks) {
  if (horizon_seconds <= 0 || max_blocks <= 0 || samples.empty()) return std::nullopt;
  // Block k (k = 0 newest) covers (t0 - (k+1) h, t0 - k h].
  std::vector<double> sum(max_blocks, 0.0), count(max_blocks, 0.0);
  const int64_t earliest = t0 - static_cast<int64_t>(max_blocks) * horizon_seconds;
  // Samples are time-sorted: find the last one at or before t0 and walk back.
  auto end = std::upper_bound(samples.begin(), samples.end(), t0,
                              [](int64_t t, const HostSample& s) { return t < s.unix_seconds; });
  for (auto it = end; it != samples.begin();) {
    --it;
    if (it->unix_seconds <= earliest) break;
    const int k = static_cast<int>((t0 - it->unix_seconds) / horizon_seconds);
    if (k < 0 || k >= max_blocks || !std::isfinite(it->cpu_load)) continue;
    sum[k] += it->cpu_load;
    count[k] += 1;
  }
  std::vector<double> blocks;  // oldest first; empty blocks (outages) skipped
  for (int k = max_blocks - 1; k >= 0; --k) {
    if (count[k] > 0) blocks.push_back(sum[k] / count[k]);
  }
  auto f = OneStepAhead(blocks);
  if (!f) return std::nullopt;
  return std::clamp(*f, 0.0, 1.0);
}

LoadForecast LoadForecast::Constant(double load) {
  LoadForecast f;
  f.Add(1, load);
  return f;
}

const std::vector<int64_t>& LoadForecast::DefaultHorizons() {
  static const auto* h = new std::vector<int64_t>{900,       1800,      3600,      7200, 14400,
                                                  8 * 3600, 16 * 3600, 24 * 3600, 48 * 3600};
  return *h;
}

LoadForecast LoadForecast::FromSamples(const std::vector<HostSample>& samples, int64_t t0,
                                       const std::vector<int64_t>& horizons, int max_blocks) {
  LoadForecast f;
  for (int64_t h : horizons) {
    auto l = AggregatedLoadForecast(samples, t0, h, max_blocks);
    if (l) f.Add(h, *l);
  }
  return f;
}

void LoadForecast::Add(int64_t horizon_seconds, double load) {
  auto it = std::lower_bound(
      points_.begin(), points_.end(), horizon_seconds,
      [](const std::pair<int64_t, double>& p, int64_t h) { return p.first < h; });
  const double v = std::clamp(std::isfinite(load) ? load : 0.0, 0.0, 1.0);
  if (it != points_.end() && it->first == horizon_seconds) {
    it->second = v;
  } else {
    points_.insert(it, {horizon_seconds, v});
  }
}

double LoadForecast::At(double t) const {
  if (points_.empty()) return 0.0;
  if (t <= static_cast<double>(points_.front().first)) return points_.front().second;
  if (t >= static_cast<double>(points_.back().first)) return points_.back().second;
  auto hi = std::lower_bound(
      points_.begin(), points_.end(), t,
      [](const std::pair<int64_t, double>& p, double x) { return static_cast<double>(p.first) < x; });
  auto lo = hi - 1;
  const double w = (t - lo->first) / static_cast<double>(hi->first - lo->first);
  return lo->second + w * (hi->second - lo->second);
}

}  // namespace sojourn::scheduling
