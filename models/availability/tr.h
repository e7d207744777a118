// Temporal reliability TR(m) of the semi-Markov availability model (paper 000
// section 6.2 eq. 3, section 7.3 eq. 4): the probability that a host starting
// in `init` at step 0 is in no failure state (S3, S4, S5) at any step 1..m.
#ifndef SOJOURN_MODELS_AVAILABILITY_TR_H_
#define SOJOURN_MODELS_AVAILABILITY_TR_H_

#include <cstdint>
#include <vector>

#include "models/availability/kernel.h"
#include "models/availability/state.h"

namespace sojourn::availability {

// TR(1..M) (result[m-1] = TR(m)) in O(n^2 M log M) for n transient states,
// via generating functions: with f_i the pmf of the absorption step after
// entering i, f = a + K_TT * f, so f(z) = (I - K_TT(z))^{-1} a(z); the
// inverse uses the adjugate and a Newton power-series inverse of the
// determinant (FFTW). The first-sojourn kernel, if present for `init`,
// replaces the kernel for the first sojourn only. Thread-safe.
// init is a state number (1..5 for HostState; other numbers for general
// models); an absorbing init gives all zeros, a state that never leaves all ones.
std::vector<double> TrCurve(const SemiMarkovKernel& k, int init, int M);
inline std::vector<double> TrCurve(const SemiMarkovKernel& k, HostState init, int M) {
  return TrCurve(k, static_cast<int>(init), M);
}

// The same by the direct O(n^2 M^2) recursion of eq. 3/4 (reference).
std::vector<double> TrCurveDirect(const SemiMarkovKernel& k, int init, int M);
inline std::vector<double> TrCurveDirect(const SemiMarkovKernel& k, HostState init, int M) {
  return TrCurveDirect(k, static_cast<int>(init), M);
}

// Mean time to failure in steps, restricted to the horizon M = tr.size():
// E[min(X, M)] = sum_{m=0}^{M-1} TR(m) with TR(0) = 1, where X is the first
// step at which the host is in a failure state. A lower bound of the MTTF;
// equal to it when TR(M) is 0. Returns 0 for an empty curve.
double MttfSteps(const std::vector<double>& tr_curve);

// What TrCurve(k, init, M) costs, estimated before running it. n is the
// number of transient states (non-absorbing states with a row). Measured
// peak memory is about 70 max(n, 2)^2 (M + 1) bytes (the n x n kernel series
// and the Newton iteration's 3 n^2 spectra of ~2M bins); the per-frequency
// matrix products take about n^3 M operations (150 states at M = 600: a
// minute).
struct TrCurveCost {
  int transient_states = 0;
  double bytes = 0;
  double work = 0;  // ~ n^3 M
};
TrCurveCost EstimateTrCurveCost(const SemiMarkovKernel& k, int M);
// Limits that callers taking models from users (the smp-tr-v1 validator)
// enforce: 8 GiB (n = 2 reaches it only beyond M = 1e7; n = 20 at M = 7.6e5)
// and 1e10 operations (several minutes).
inline constexpr double kMaxTrCurveBytes = 8.0 * (int64_t{1} << 30);
inline constexpr double kMaxTrCurveWork = 1e10;

namespace internal {
// TrCurve without the direct-recursion shortcut for small M (for tests).
std::vector<double> TrCurveFft(const SemiMarkovKernel& k, int init, int M);
}  // namespace internal

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_TR_H_
