#include "models/availability/fft_series.h"

#include <fftw3.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <new>
#include <utility>

#include "absl/synchronization/mutex.h"

namespace sojourn::availability::internal {
namespace {

struct Plans {
  fftw_plan forward;
  fftw_plan inverse;
};

// FFTW's planner is not thread-safe; plans are cached forever per size.
// FFTW_ESTIMATE: FFTW_MEASURE is ~2x faster at 2^21 but takes ~40 s to plan.
Plans GetPlans(int n) {
  static absl::Mutex mu(absl::kConstInit);
  static auto* cache = new std::map<int, Plans>();
  absl::MutexLock lock(&mu);
  auto it = cache->find(n);
  if (it != cache->end()) return it->second;
  double* in = fftw_alloc_real(n);
  fftw_complex* out = fftw_alloc_complex(n / 2 + 1);
  Plans p;
  p.forward = fftw_plan_dft_r2c_1d(n, in, out, FFTW_ESTIMATE);
  p.inverse = fftw_plan_dft_c2r_1d(n, out, in, FFTW_ESTIMATE);
  fftw_free(in);
  fftw_free(out);
  cache->emplace(n, p);
  return p;
}

// Per-thread cache of fftw_malloc'd buffers: allocating and first-touching
// fresh 10 MB buffers for every transform cost a third of the time at
// M = 604800 (page faults). Keeps at most kPoolBytes per thread.
constexpr size_t kPoolBytes = size_t{128} << 20;

class BufferPool {
 public:
  ~BufferPool() {
    for (const auto& [bytes, p] : free_) fftw_free(p);
  }
  static BufferPool& Get() {
    thread_local BufferPool pool;
    return pool;
  }
  // Returns a buffer of at least `bytes`; *capacity receives its size.
  void* Take(size_t bytes, size_t* capacity) {
    size_t best = free_.size();
    for (size_t i = 0; i < free_.size(); ++i) {
      if (free_[i].first >= bytes && free_[i].first <= 2 * bytes &&
          (best == free_.size() || free_[i].first < free_[best].first)) {
        best = i;
      }
    }
    if (best < free_.size()) {
      auto [cap, p] = free_[best];
      free_.erase(free_.begin() + best);
      held_ -= cap;
      *capacity = cap;
      return p;
    }
    *capacity = bytes;
    // fftw_malloc returns null when memory runs out; the callers would
    // memset or transform through it.
    void* p = fftw_malloc(bytes);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void Give(void* p, size_t capacity) {
    while (!free_.empty() && held_ + capacity > kPoolBytes) {
      held_ -= free_.front().first;
      fftw_free(free_.front().second);
      free_.erase(free_.begin());
    }
    if (capacity > kPoolBytes) {
      fftw_free(p);
      return;
    }
    free_.emplace_back(capacity, p);
    held_ += capacity;
  }

 private:
  std::vector<std::pair<size_t, void*>> free_;
  size_t held_ = 0;
};

// Buffer of n/2+1 complex bins (also used as n reals) from the thread's pool.
class PooledBuffer {
 public:
  explicit PooledBuffer(int n)
      : p_(BufferPool::Get().Take(sizeof(fftw_complex) * (n / 2 + 1), &capacity_)) {}
  ~PooledBuffer() { BufferPool::Get().Give(p_, capacity_); }
  PooledBuffer(const PooledBuffer&) = delete;
  PooledBuffer& operator=(const PooledBuffer&) = delete;
  double* real() { return static_cast<double*>(p_); }

 private:
  size_t capacity_ = 0;
  void* p_;
};

struct RealBuffer {
  explicit RealBuffer(int n) : buf(n), p(buf.real()) {}
  PooledBuffer buf;
  double* p;
};

constexpr int kNaiveLimit = 48;

Series NaiveMultiply(const Series& a, const Series& b, int len) {
  Series out(len, 0.0);
  const int la = std::min<int>(a.size(), len);
  for (int i = 0; i < la; ++i) {
    if (a[i] == 0) continue;
    const int lb = std::min<int>(b.size(), len - i);
    for (int j = 0; j < lb; ++j) out[i + j] += a[i] * b[j];
  }
  return out;
}

}  // namespace

int GoodFftSize(int need) {
  if (need < 2) need = 2;
  int best = 1;
  while (best < need) best *= 2;
  for (long long p5 = 1; p5 < best; p5 *= 5) {
    for (long long p35 = p5; p35 < best; p35 *= 3) {
      long long v = p35 * 2;
      while (v < need) v *= 2;
      if (v < best) best = static_cast<int>(v);
    }
  }
  return best;
}

void Spectrum::Free::operator()(std::complex<double>* p) const {
  BufferPool::Get().Give(p, capacity);
}

std::complex<double>* Spectrum::Allocate(int n, size_t* capacity) {
  return static_cast<std::complex<double>*>(
      BufferPool::Get().Take(sizeof(fftw_complex) * (n / 2 + 1), capacity));
}

Spectrum::Spectrum(int n) : n_(n), data_(Allocate(n, &capacity_), Free{0}) {
  data_.get_deleter().capacity = capacity_;
  std::memset(static_cast<void*>(data_.get()), 0, sizeof(fftw_complex) * bins());
}

Spectrum::Spectrum(const double* x, int len, int n)
    : n_(n), data_(Allocate(n, &capacity_), Free{0}) {
  data_.get_deleter().capacity = capacity_;
  RealBuffer in(n);
  len = std::min(len, n);
  std::memcpy(in.p, x, sizeof(double) * len);
  std::memset(in.p + len, 0, sizeof(double) * (n - len));
  fftw_execute_dft_r2c(GetPlans(n).forward, in.p,
                       reinterpret_cast<fftw_complex*>(data_.get()));
}

Series Spectrum::Inverse(int keep) {
  RealBuffer out(n_);
  fftw_execute_dft_c2r(GetPlans(n_).inverse, reinterpret_cast<fftw_complex*>(data_.get()),
                       out.p);
  keep = std::min(keep, n_);
  Series s(keep);
  const double scale = 1.0 / n_;
  for (int i = 0; i < keep; ++i) s[i] = out.p[i] * scale;
  return s;
}

Series Multiply(const Series& a, const Series& b, int len) {
  const int la = std::min<int>(a.size(), len);
  const int lb = std::min<int>(b.size(), len);
  if (la == 0 || lb == 0) return Series(len, 0.0);
  if (std::min(la, lb) <= kNaiveLimit) return NaiveMultiply(a, b, len);
  const int n = GoodFftSize(la + lb - 1);
  Spectrum sa(a.data(), la, n);
  Spectrum sb(b.data(), lb, n);
  for (int i = 0; i < sa.bins(); ++i) sa.data()[i] *= sb.data()[i];
  Series out = sa.Inverse(len);
  out.resize(len, 0.0);
  return out;
}

Series InverseSeries(const Series& d, int len) {
  Series g;
  const int base = std::min(len, kNaiveLimit);
  g.assign(base, 0.0);
  const double inv0 = 1.0 / d[0];
  const int ld = static_cast<int>(d.size());
  for (int m = 0; m < base; ++m) {
    double s = m == 0 ? 1.0 : 0.0;
    for (int i = 1; i <= m && i < ld; ++i) s -= d[i] * g[m - i];
    g[m] = s * inv0;
  }
  if (base == len) return g;
  std::vector<int> lengths;
  for (int x = len; x > base; x = (x + 1) / 2) lengths.push_back(x);
  std::reverse(lengths.begin(), lengths.end());
  for (int target : lengths) {
    const int k = static_cast<int>(g.size());
    // g_new = 2g - d g^2 mod z^target; the full product has degree
    // 2(k-1) + (target-1), so this size has no wrap-around.
    const int n = GoodFftSize(2 * k + target - 2);
    Spectrum sg(g.data(), k, n);
    Spectrum sd(d.data(), std::min(ld, target), n);
    for (int i = 0; i < sg.bins(); ++i) {
      const std::complex<double> gi = sg.data()[i];
      sg.data()[i] = gi * (2.0 - sd.data()[i] * gi);
    }
    g = sg.Inverse(target);
  }
  return g;
}

}  // namespace sojourn::availability::internal
