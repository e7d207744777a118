#include "models/turnaround/metrics.h"

#include <cmath>
#include <limits>

namespace sojourn::turnaround {

namespace {
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
}

double DvPercent(const std::vector<double>& predicted, const std::vector<double>& observed) {
  if (predicted.empty() || predicted.size() != observed.size()) return kNaN;
  double err = 0, sum = 0;
  for (size_t i = 0; i < predicted.size(); ++i) {
    err += std::fabs(predicted[i] - observed[i]);
    sum += observed[i];
  }
  return sum > 0 ? 100.0 * err / sum : kNaN;
}

double AdjustedR2(const std::vector<double>& predicted, const std::vector<double>& observed) {
  const size_t n = predicted.size();
  if (n < 3 || n != observed.size()) return kNaN;
  double mx = 0, my = 0;
  for (size_t i = 0; i < n; ++i) mx += observed[i], my += predicted[i];
  mx /= n;
  my /= n;
  double sxx = 0, syy = 0, sxy = 0;
  for (size_t i = 0; i < n; ++i) {
    const double dx = observed[i] - mx, dy = predicted[i] - my;
    sxx += dx * dx;
    syy += dy * dy;
    sxy += dx * dy;
  }
  if (sxx <= 0 || syy <= 0) return kNaN;
  const double r2 = (sxy * sxy) / (sxx * syy);
  return 1.0 - (1.0 - r2) * static_cast<double>(n - 1) / static_cast<double>(n - 2);
}

double Coverage(const std::vector<double>& lo, const std::vector<double>& hi,
                const std::vector<double>& observed) {
  if (observed.empty() || lo.size() != observed.size() || hi.size() != observed.size()) return kNaN;
  size_t in = 0;
  for (size_t i = 0; i < observed.size(); ++i) in += lo[i] <= observed[i] && observed[i] <= hi[i];
  return static_cast<double>(in) / observed.size();
}

void MetricAccumulator::Add(double predicted, double lo, double hi, double observed) {
  predicted_.push_back(predicted);
  lo_.push_back(lo);
  hi_.push_back(hi);
  observed_.push_back(observed);
}

MetricSummary MetricAccumulator::Summary() const {
  MetricSummary s;
  s.n = size();
  s.dv = DvPercent(predicted_, observed_);
  s.r2_adj = AdjustedR2(predicted_, observed_);
  s.coverage = Coverage(lo_, hi_, observed_);
  return s;
}

}  // namespace sojourn::turnaround
