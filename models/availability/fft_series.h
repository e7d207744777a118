// Truncated power-series arithmetic with FFTW (internal to the TR solver).
// Thread-safe: plans are created once per size under a mutex and executed
// with the new-array interface (fftw_execute_dft_r2c), which FFTW documents
// as safe to call concurrently. All buffers come from fftw_malloc, so they
// have the alignment the plans were made with.
#ifndef SOJOURN_MODELS_AVAILABILITY_FFT_SERIES_H_
#define SOJOURN_MODELS_AVAILABILITY_FFT_SERIES_H_

#include <complex>
#include <cstddef>
#include <memory>
#include <vector>

namespace sojourn::availability::internal {

using Series = std::vector<double>;  // s[m] = coefficient of z^m

// Smallest even n >= need of the form 2^a 3^b 5^c (fast FFTW sizes).
int GoodFftSize(int need);

// The half spectrum (n/2 + 1 bins) of a real sequence zero-padded to n.
class Spectrum {
 public:
  Spectrum(const double* x, int len, int n);  // forward transform
  explicit Spectrum(int n);                   // all zeros
  int n() const { return n_; }
  int bins() const { return n_ / 2 + 1; }
  std::complex<double>* data() { return data_.get(); }
  const std::complex<double>* data() const { return data_.get(); }
  // Inverse transform (scaled by 1/n), first `keep` coefficients. Destroys
  // the spectrum's contents (FFTW's c2r overwrites its input).
  Series Inverse(int keep);

 private:
  struct Free {
    size_t capacity;
    void operator()(std::complex<double>* p) const;
  };
  static std::complex<double>* Allocate(int n, size_t* capacity);
  int n_;
  size_t capacity_ = 0;
  std::unique_ptr<std::complex<double>[], Free> data_;
};

// (a * b) mod z^len.
Series Multiply(const Series& a, const Series& b, int len);
// 1 / d mod z^len, d[0] != 0 (Newton iteration g <- 2g - d g^2).
Series InverseSeries(const Series& d, int len);

}  // namespace sojourn::availability::internal

#endif  // SOJOURN_MODELS_AVAILABILITY_FFT_SERIES_H_
