// Accuracy metrics of paper 002, section 6.1: D_v (equation 13), the
// adjusted coefficient of determination R_a of the linear regression of the
// predicted on the observed values (Fig. 10), and interval coverage.
#ifndef SOJOURN_MODELS_TURNAROUND_METRICS_H_
#define SOJOURN_MODELS_TURNAROUND_METRICS_H_

#include <cstdint>
#include <vector>

namespace sojourn::turnaround {

// D_v(metric) % = sum |Y_i - X_i| / sum X_i * 100 (equation 13), Y predicted,
// X observed. NaN when the vectors are empty, differ in size or sum X is 0.
double DvPercent(const std::vector<double>& predicted, const std::vector<double>& observed);

// Adjusted R^2 of the least-squares line Y = a + b X (one regressor):
// 1 - (1 - r^2)(n - 1)/(n - 2). NaN with fewer than 3 points or a constant X
// or Y.
double AdjustedR2(const std::vector<double>& predicted, const std::vector<double>& observed);

// Fraction of observed values inside [lo, hi]. NaN when empty.
double Coverage(const std::vector<double>& lo, const std::vector<double>& hi,
                const std::vector<double>& observed);

struct MetricSummary {
  double dv = 0;  // percent
  double r2_adj = 0;
  double coverage = 0;
  int64_t n = 0;
};

// Collects (predicted, interval, observed) triples of one kernel and metric.
class MetricAccumulator {
 public:
  void Add(double predicted, double lo, double hi, double observed);
  MetricSummary Summary() const;
  int64_t size() const { return static_cast<int64_t>(observed_.size()); }

 private:
  std::vector<double> predicted_, lo_, hi_, observed_;
};

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_METRICS_H_
