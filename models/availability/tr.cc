#include "models/availability/tr.h"

#include <algorithm>
#include <complex>
#include <map>
#include <vector>

#include "models/availability/fft_series.h"

namespace sojourn::availability {
namespace {

using internal::Series;
using internal::Spectrum;

// Below this horizon the direct recursion is faster than the FFT pipeline
// (see bench/availability/tr_bench.cc).
constexpr int kDirectBelow = 96;

// The kernel restricted to what TR needs, as power series of length L = M+1
// (coefficient l = K(l); K(0) = 0).
struct Problem {
  std::vector<int> transient;         // states with a row, not absorbing
  std::vector<std::vector<Series>> k;  // k[a][b]: transient[a] -> transient[b]
  std::vector<Series> absorb;          // absorb[a](l) = sum_{j in S3..S5} K(l)
  bool has_first = false;              // init has a first-sojourn row
  std::vector<Series> g;               // first sojourn: init -> transient[b]
  Series g_absorb;                     // first sojourn: init -> failure
  int init_index = -1;                 // index of init in transient, or -1
};

void AddPmf(const std::vector<double>& pmf, int len, Series* s) {
  const int n = std::min<int>(pmf.size(), len - 1);
  for (int l = 1; l <= n; ++l) (*s)[l] += pmf[l - 1];
}

Problem Build(const SemiMarkovKernel& kernel, int init, int M) {
  Problem p;
  const int len = M + 1;
  for (const auto& [state, row] : kernel.rows) {
    if (!IsAbsorbingState(state) && !row.empty()) p.transient.push_back(state);
  }
  const int n = static_cast<int>(p.transient.size());
  std::map<int, int> index;
  for (int a = 0; a < n; ++a) index[p.transient[a]] = a;
  p.k.assign(n, std::vector<Series>(n, Series(len, 0.0)));
  p.absorb.assign(n, Series(len, 0.0));
  auto fill = [&](const KernelRow& row, std::vector<Series>* to_transient, Series* to_absorb) {
    for (const auto& [to, pmf] : row) {
      if (IsAbsorbingState(to)) {
        AddPmf(pmf, len, to_absorb);
      } else if (auto it = index.find(to); it != index.end()) {
        AddPmf(pmf, len, &(*to_transient)[it->second]);
      }
      // else: a state that never leaves; the host survives there.
    }
  };
  for (int a = 0; a < n; ++a) fill(kernel.rows.at(p.transient[a]), &p.k[a], &p.absorb[a]);
  if (auto it = index.find(init); it != index.end()) p.init_index = it->second;
  if (auto it = kernel.first_rows.find(init); it != kernel.first_rows.end()) {
    p.has_first = true;
    p.g.assign(n, Series(len, 0.0));
    p.g_absorb.assign(len, 0.0);
    fill(it->second, &p.g, &p.g_absorb);
  }
  return p;
}

std::vector<double> CurveFromPmf(const Series& f, int M) {
  std::vector<double> tr(M);
  double cum = 0;
  for (int m = 1; m <= M; ++m) {
    cum += f[m];
    tr[m - 1] = std::clamp(1.0 - cum, 0.0, 1.0);
  }
  return tr;
}

// f_a for every a with need[a], where f = a + K f (f_a(m) = P(first failure
// at step m | entered transient[a] at step 0)).
std::vector<Series> SolveAbsorptionPmfs(const Problem& p, int M, const std::vector<bool>& need) {
  const int len = M + 1;
  const int n = static_cast<int>(p.transient.size());
  std::vector<Series> f(n);
  if (n <= 2) {
    // (I - K)^{-1} = adj(I - K) / det(I - K); det(0) = 1 since K(0) = 0.
    Series det(len, 0.0);
    std::vector<Series> num(n, Series(len, 0.0));
    if (n == 1) {
      det[0] = 1.0;
      for (int m = 1; m < len; ++m) det[m] = -p.k[0][0][m];
      num[0] = p.absorb[0];
    } else {
      const Series &k11 = p.k[0][0], &k12 = p.k[0][1], &k21 = p.k[1][0], &k22 = p.k[1][1];
      const Series &a1 = p.absorb[0], &a2 = p.absorb[1];
      // det = 1 - K11 - K22 + (K11 K22 - K12 K21)
      // num1 = a1 + (K12 a2 - K22 a1), num2 = a2 + (K21 a1 - K11 a2)
      const int nfft = internal::GoodFftSize(2 * len - 1);
      Spectrum s11(k11.data(), len, nfft), s12(k12.data(), len, nfft);
      Spectrum s21(k21.data(), len, nfft), s22(k22.data(), len, nfft);
      Spectrum sa1(a1.data(), len, nfft), sa2(a2.data(), len, nfft);
      Spectrum pd(nfft), p1(nfft), p2(nfft);
      for (int i = 0; i < pd.bins(); ++i) {
        pd.data()[i] = s11.data()[i] * s22.data()[i] - s12.data()[i] * s21.data()[i];
        if (need[0]) p1.data()[i] = s12.data()[i] * sa2.data()[i] - s22.data()[i] * sa1.data()[i];
        if (need[1]) p2.data()[i] = s21.data()[i] * sa1.data()[i] - s11.data()[i] * sa2.data()[i];
      }
      Series prod = pd.Inverse(len);
      det[0] = 1.0;
      for (int m = 1; m < len; ++m) det[m] = -k11[m] - k22[m] + prod[m];
      if (need[0]) {
        Series q = p1.Inverse(len);
        for (int m = 0; m < len; ++m) num[0][m] = a1[m] + q[m];
      }
      if (need[1]) {
        Series q = p2.Inverse(len);
        for (int m = 0; m < len; ++m) num[1][m] = a2[m] + q[m];
      }
    }
    const Series inv = internal::InverseSeries(det, len);
    const int nfft = internal::GoodFftSize(2 * len - 1);
    Spectrum sinv(inv.data(), len, nfft);
    for (int a = 0; a < n; ++a) {
      if (!need[a]) continue;
      Spectrum s(num[a].data(), len, nfft);
      for (int i = 0; i < s.bins(); ++i) s.data()[i] *= sinv.data()[i];
      f[a] = s.Inverse(len);
    }
    return f;
  }
  // General n: Newton iteration for X = (I - K)^{-1},
  // X <- X (2I - (I - K) X) mod z^target, then f = X a.
  const int base = std::min(len, 32);
  std::vector<std::vector<Series>> x(n, std::vector<Series>(n, Series(base, 0.0)));
  for (int m = 0; m < base; ++m) {
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        double s = (m == 0 && a == b) ? 1.0 : 0.0;
        for (int l = 1; l <= m; ++l) {
          for (int c = 0; c < n; ++c) s += p.k[a][c][l] * x[c][b][m - l];
        }
        x[a][b][m] = s;
      }
    }
  }
  std::vector<int> lengths;
  for (int t = len; t > base; t = (t + 1) / 2) lengths.push_back(t);
  std::reverse(lengths.begin(), lengths.end());
  for (int target : lengths) {
    const int kk = static_cast<int>(x[0][0].size());
    const int nfft = internal::GoodFftSize(2 * kk + target - 2);
    std::vector<Spectrum> sx, sk;
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) {
        sx.emplace_back(x[a][b].data(), kk, nfft);
        sk.emplace_back(p.k[a][b].data(), target, nfft);
      }
    }
    std::vector<Spectrum> out;
    for (int i = 0; i < n * n; ++i) out.emplace_back(nfft);
    std::vector<std::complex<double>> ax(n * n), y(n * n);
    for (int i = 0; i < sx[0].bins(); ++i) {
      // y = 2I - (I - K) X at this frequency.
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          std::complex<double> s = sx[a * n + b].data()[i];
          for (int c = 0; c < n; ++c) s -= sk[a * n + c].data()[i] * sx[c * n + b].data()[i];
          y[a * n + b] = (a == b ? 2.0 : 0.0) - s;
        }
      }
      for (int a = 0; a < n; ++a) {
        for (int b = 0; b < n; ++b) {
          std::complex<double> s = 0;
          for (int c = 0; c < n; ++c) s += sx[a * n + c].data()[i] * y[c * n + b];
          out[a * n + b].data()[i] = s;
        }
      }
    }
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) x[a][b] = out[a * n + b].Inverse(target);
    }
  }
  for (int a = 0; a < n; ++a) {
    if (!need[a]) continue;
    f[a].assign(len, 0.0);
    for (int b = 0; b < n; ++b) {
      Series t = internal::Multiply(x[a][b], p.absorb[b], len);
      for (int m = 0; m < len; ++m) f[a][m] += t[m];
    }
  }
  return f;
}

std::vector<double> TrCurveFftImpl(const SemiMarkovKernel& kernel, int init, int M) {
  if (M <= 0) return {};
  if (IsAbsorbingState(init)) return std::vector<double>(M, 0.0);
  const Problem p = Build(kernel, init, M);
  const int n = static_cast<int>(p.transient.size());
  const int len = M + 1;
  if (!p.has_first) {
    if (p.init_index < 0) return std::vector<double>(M, 1.0);  // never leaves
    std::vector<bool> need(n, false);
    need[p.init_index] = true;
    return CurveFromPmf(SolveAbsorptionPmfs(p, M, need)[p.init_index], M);
  }
  // First sojourn with its own kernel G: f_first = g_absorb + sum_b G_b f_b.
  std::vector<bool> need(n, false);
  for (int b = 0; b < n; ++b) {
    need[b] = std::any_of(p.g[b].begin(), p.g[b].end(), [](double v) { return v != 0; });
  }
  Series first = p.g_absorb;
  if (std::any_of(need.begin(), need.end(), [](bool v) { return v; })) {
    const std::vector<Series> f = SolveAbsorptionPmfs(p, M, need);
    const int nfft = internal::GoodFftSize(2 * len - 1);
    Spectrum acc(nfft);
    for (int b = 0; b < n; ++b) {
      if (!need[b]) continue;
      Spectrum sg(p.g[b].data(), len, nfft), sf(f[b].data(), len, nfft);
      for (int i = 0; i < acc.bins(); ++i) acc.data()[i] += sg.data()[i] * sf.data()[i];
    }
    const Series conv = acc.Inverse(len);
    for (int m = 0; m < len; ++m) first[m] += conv[m];
  }
  return CurveFromPmf(first, M);
}

}  // namespace

namespace internal {
std::vector<double> TrCurveFft(const SemiMarkovKernel& k, int init, int M) {
  return TrCurveFftImpl(k, init, M);
}
}  // namespace internal

std::vector<double> TrCurve(const SemiMarkovKernel& k, int init, int M) {
  if (M < kDirectBelow) return TrCurveDirect(k, init, M);
  return TrCurveFftImpl(k, init, M);
}

std::vector<double> TrCurveDirect(const SemiMarkovKernel& kernel, int init, int M) {
  if (M <= 0) return {};
  if (IsAbsorbingState(init)) return std::vector<double>(M, 0.0);
  const Problem p = Build(kernel, init, M);
  const int n = static_cast<int>(p.transient.size());
  // Paper eq. 3/4 in cumulative form: F_a(m) = P(in S3..S5 by step m | entered
  // transient[a] at 0) = sum_{l=1..m} [A_a(l) + sum_b K_ab(l) F_b(m - l)],
  // F_b(0) = 0; TR(m) = 1 - F_init(m).
  std::vector<std::vector<double>> F(n, std::vector<double>(M + 1, 0.0));
  std::vector<std::vector<double>> cum_absorb(n, std::vector<double>(M + 1, 0.0));
  for (int a = 0; a < n; ++a) {
    for (int m = 1; m <= M; ++m) cum_absorb[a][m] = cum_absorb[a][m - 1] + p.absorb[a][m];
  }
  for (int m = 1; m <= M; ++m) {
    for (int a = 0; a < n; ++a) {
      double s = cum_absorb[a][m];
      for (int b = 0; b < n; ++b) {
        const double* kab = p.k[a][b].data();
        const double* fb = F[b].data();
        for (int l = 1; l < m; ++l) s += kab[l] * fb[m - l];
      }
      F[a][m] = s;
    }
  }
  std::vector<double> tr(M);
  if (!p.has_first) {
    if (p.init_index < 0) return std::vector<double>(M, 1.0);
    for (int m = 1; m <= M; ++m) tr[m - 1] = std::clamp(1.0 - F[p.init_index][m], 0.0, 1.0);
    return tr;
  }
  double cum = 0;
  for (int m = 1; m <= M; ++m) {
    cum += p.g_absorb[m];
    double s = cum;
    for (int b = 0; b < n; ++b) {
      for (int l = 1; l < m; ++l) s += p.g[b][l] * F[b][m - l];
    }
    tr[m - 1] = std::clamp(1.0 - s, 0.0, 1.0);
  }
  return tr;
}

TrCurveCost EstimateTrCurveCost(const SemiMarkovKernel& kernel, int M) {
  TrCurveCost c;
  for (const auto& [state, row] : kernel.rows) {
    if (!IsAbsorbingState(state) && !row.empty()) ++c.transient_states;
  }
  const double n = std::max(c.transient_states, 2);
  c.bytes = 70.0 * n * n * (static_cast<double>(M) + 1);
  c.work = n * n * n * static_cast<double>(M);
  return c;
}

double MttfSteps(const std::vector<double>& tr_curve) {
  if (tr_curve.empty()) return 0;
  double s = 1.0;  // TR(0)
  for (size_t m = 0; m + 1 < tr_curve.size(); ++m) s += tr_curve[m];
  return s;
}

}  // namespace sojourn::availability
