#include "models/usage/patterns.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "models/usage/forecasters.h"

namespace sojourn::usage {
namespace {

// --- little-endian byte helpers for the serialized form ---
void PutU32(std::string* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void PutI64(std::string* out, int64_t v) {
  const uint64_t u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out->push_back(static_cast<char>((u >> (8 * i)) & 0xff));
}
void PutF64(std::string* out, double v) {
  uint64_t u;
  std::memcpy(&u, &v, 8);
  PutI64(out, static_cast<int64_t>(u));
}

class Reader {
 public:
  explicit Reader(absl::string_view in) : in_(in) {}
  bool U32(uint32_t* v) {
    if (in_.size() < 4) return false;
    *v = 0;
    for (int i = 0; i < 4; ++i)
      *v |= static_cast<uint32_t>(static_cast<uint8_t>(in_[i])) << (8 * i);
    in_.remove_prefix(4);
    return true;
  }
  bool I64(int64_t* v) {
    if (in_.size() < 8) return false;
    uint64_t u = 0;
    for (int i = 0; i < 8; ++i) u |= static_cast<uint64_t>(static_cast<uint8_t>(in_[i])) << (8 * i);
    in_.remove_prefix(8);
    *v = static_cast<int64_t>(u);
    return true;
  }
  bool F64(double* v) {
    int64_t i;
    if (!I64(&i)) return false;
    std::memcpy(v, &i, 8);
    return true;
  }
  bool Bytes(size_t n, absl::string_view* v) {
    if (in_.size() < n) return false;
    *v = in_.substr(0, n);
    in_.remove_prefix(n);
    return true;
  }
  bool done() const { return in_.empty(); }

 private:
  absl::string_view in_;
};

constexpr char kMagic[] = "SJUP";
// Version 2 appends residual_phi and residual_pairs; version 1 is still read.
constexpr uint32_t kVersion = 2;
constexpr char kHostMagic[] = "SJHP";
// The host envelope's layout did not change (its members carry their own version).
constexpr uint32_t kHostVersion = 1;

}  // namespace

const char* NormalizationName(Normalization n) {
  return n == Normalization::kPure ? "pure" : "variational";
}

absl::StatusOr<Normalization> ParseNormalization(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "pure" || n == "none") return Normalization::kPure;
  if (n == "variational") return Normalization::kVariational;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown normalisation '", name, "' (pure or variational)"));
}

const char* DowntimePolicyName(DowntimePolicy p) {
  return p == DowntimePolicy::kDiscard ? "discard" : "full-use";
}

absl::StatusOr<DowntimePolicy> ParseDowntimePolicy(absl::string_view name) {
  const std::string n = absl::AsciiStrToLower(name);
  if (n == "discard") return DowntimePolicy::kDiscard;
  if (n == "full-use" || n == "full_use") return DowntimePolicy::kFullUse;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown down-time policy '", name, "' (discard or full-use)"));
}

Eigen::MatrixXd BuildObjects(const UsageSeries& series, Resource r, const PatternOptions& options,
                             int64_t end_bin, std::vector<int>* day_index) {
  const std::vector<double>& v = series.of(r);
  end_bin = std::min<int64_t>(end_bin, static_cast<int64_t>(v.size()));
  // Data collection spans [first, last]; under kFullUse a missing bin inside
  // it is down-time (a desktop switched off for a weekend gives an all-down
  // object), outside it there is no use pattern to learn.
  int64_t first = -1, last = -1;
  for (int64_t b = 0; b < end_bin; ++b) {
    if (!std::isnan(v[b])) {
      if (first < 0) first = b;
      last = b;
    }
  }
  std::vector<int> days;
  for (int64_t day = 0; first >= 0 && day * kBinsPerDay + kObjectBins <= end_bin; ++day) {
    const int64_t start = day * kBinsPerDay;
    if (start + kObjectBins <= first || start > last) continue;
    bool complete = true;
    for (int i = 0; i < kObjectBins && complete; ++i) complete = !std::isnan(v[start + i]);
    if (!complete && options.downtime == DowntimePolicy::kDiscard) continue;
    days.push_back(static_cast<int>(day));
  }
  Eigen::MatrixXd objects(static_cast<Eigen::Index>(days.size()), kObjectBins);
  for (size_t row = 0; row < days.size(); ++row) {
    const int64_t start = static_cast<int64_t>(days[row]) * kBinsPerDay;
    for (int i = 0; i < kObjectBins; ++i) {
      const double x = v[start + i];
      objects(row, i) = std::isnan(x) ? 1.0 : x;
    }
    if (options.normalization == Normalization::kVariational) {
      objects.row(row).array() -= objects.row(row).mean();
    }
  }
  if (day_index != nullptr) *day_index = days;
  return objects;
}

absl::StatusOr<UsagePatterns> AnalysePatterns(const UsageSeries& series, Resource r,
                                              const PatternOptions& options, int64_t until_unix) {
  if (options.clusters < 1) {
    return absl::InvalidArgumentError("the number of clusters must be at least 1");
  }
  const int64_t end_bin = series.BinOf(until_unix);
  const Eigen::MatrixXd objects = BuildObjects(series, r, options, end_bin);
  if (objects.rows() == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("no complete 48 h ", ResourceName(r), " object before the requested time"));
  }
  const std::vector<int> labels = ClusterHierarchical(objects, options.clusters, options.linkage);
  const int k = *std::max_element(labels.begin(), labels.end()) + 1;
  UsagePatterns out;
  out.resource = r;
  out.options = options;
  out.trained_until_unix = until_unix;
  out.objects = static_cast<int>(objects.rows());
  Eigen::MatrixXd sums = Eigen::MatrixXd::Zero(k, kObjectBins);
  out.cluster_sizes.assign(k, 0);
  for (Eigen::Index row = 0; row < objects.rows(); ++row) {
    sums.row(labels[row]) += objects.row(row);
    ++out.cluster_sizes[labels[row]];
  }
  out.prototypes.resize(k);
  for (int c = 0; c < k; ++c) {
    out.prototypes[c].resize(kObjectBins);
    for (int i = 0; i < kObjectBins; ++i) out.prototypes[c][i] = sums(c, i) / out.cluster_sizes[c];
  }
  out.residual_phi =
      FitResidualPhi(series.of(r), options.downtime, out, end_bin, &out.residual_pairs,
                     options.residual_steps, &out.residual_phi_by_step);
  return out;
}

std::string UsagePatterns::Serialize() const {
  std::string out(kMagic, 4);
  PutU32(&out, kVersion);
  PutU32(&out, static_cast<uint32_t>(resource));
  PutU32(&out, static_cast<uint32_t>(options.clusters));
  PutU32(&out, static_cast<uint32_t>(options.linkage));
  PutU32(&out, static_cast<uint32_t>(options.normalization));
  PutU32(&out, static_cast<uint32_t>(options.downtime));
  PutI64(&out, trained_until_unix);
  PutU32(&out, static_cast<uint32_t>(objects));
  PutU32(&out, static_cast<uint32_t>(prototypes.size()));
  for (size_t c = 0; c < prototypes.size(); ++c) {
    PutU32(&out, static_cast<uint32_t>(c < cluster_sizes.size() ? cluster_sizes[c] : 0));
    PutU32(&out, static_cast<uint32_t>(prototypes[c].size()));
    for (double x : prototypes[c]) PutF64(&out, x);
  }
  PutF64(&out, residual_phi);
  PutU32(&out, static_cast<uint32_t>(residual_pairs));
  PutU32(&out, static_cast<uint32_t>(residual_phi_by_step.size()));
  for (double x : residual_phi_by_step) PutF64(&out, x);
  return out;
}

absl::StatusOr<UsagePatterns> UsagePatterns::Parse(absl::string_view bytes) {
  Reader in(bytes);
  absl::string_view magic;
  uint32_t version, resource, clusters, linkage, normalization, downtime, objects, k;
  UsagePatterns p;
  const auto bad = [](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat("bad usage patterns: ", why));
  };
  if (!in.Bytes(4, &magic) || magic != absl::string_view(kMagic, 4)) return bad("wrong magic");
  if (!in.U32(&version) || version < 1 || version > kVersion) return bad("unsupported version");
  if (!in.U32(&resource) || !in.U32(&clusters) || !in.U32(&linkage) || !in.U32(&normalization) ||
      !in.U32(&downtime) || !in.I64(&p.trained_until_unix) || !in.U32(&objects) || !in.U32(&k)) {
    return bad("truncated header");
  }
  if (resource > 1 || linkage > 3 || normalization > 1 || downtime > 1 || k > 1000) {
    return bad("field out of range");
  }
  p.resource = static_cast<Resource>(resource);
  p.options.clusters = static_cast<int>(clusters);
  p.options.linkage = static_cast<Linkage>(linkage);
  p.options.normalization = static_cast<Normalization>(normalization);
  p.options.downtime = static_cast<DowntimePolicy>(downtime);
  p.objects = static_cast<int>(objects);
  p.prototypes.resize(k);
  p.cluster_sizes.resize(k);
  for (uint32_t c = 0; c < k; ++c) {
    uint32_t size, n;
    if (!in.U32(&size) || !in.U32(&n)) return bad("truncated prototype");
    if (n != kObjectBins) return bad("prototype is not 48 h of 5-minute bins");
    p.cluster_sizes[c] = static_cast<int>(size);
    p.prototypes[c].resize(n);
    for (uint32_t i = 0; i < n; ++i) {
      if (!in.F64(&p.prototypes[c][i])) return bad("truncated prototype");
    }
  }
  if (version >= 2) {
    uint32_t pairs;
    if (!in.F64(&p.residual_phi) || !in.U32(&pairs)) return bad("truncated residual fields");
    if (!(p.residual_phi >= 0 && p.residual_phi < 1)) return bad("residual_phi out of range");
    p.residual_pairs = static_cast<int>(pairs);
    uint32_t steps;
    if (!in.U32(&steps) || steps > 100000) return bad("truncated residual fields");
    p.residual_phi_by_step.resize(steps);
    for (double& x : p.residual_phi_by_step) {
      if (!in.F64(&x)) return bad("truncated residual fields");
      if (!(x >= 0 && x < 1)) return bad("residual_phi out of range");
    }
  }
  if (!in.done()) return bad("trailing bytes");
  return p;
}

std::string HostPatterns::Serialize() const {
  std::string out(kHostMagic, 4);
  PutU32(&out, kHostVersion);
  for (const UsagePatterns* p : {&cpu, &mem, &cpu_backtest, &mem_backtest}) {
    const std::string s = p->empty() ? std::string() : p->Serialize();
    PutU32(&out, static_cast<uint32_t>(s.size()));
    out += s;
  }
  return out;
}

absl::StatusOr<HostPatterns> HostPatterns::Parse(absl::string_view bytes) {
  Reader in(bytes);
  absl::string_view magic;
  uint32_t version;
  if (!in.Bytes(4, &magic) || magic != absl::string_view(kHostMagic, 4) || !in.U32(&version) ||
      version != kHostVersion) {
    return absl::InvalidArgumentError("bad host patterns: wrong magic or version");
  }
  HostPatterns h;
  for (UsagePatterns* p : {&h.cpu, &h.mem, &h.cpu_backtest, &h.mem_backtest}) {
    uint32_t n;
    absl::string_view s;
    if (!in.U32(&n) || !in.Bytes(n, &s)) {
      return absl::InvalidArgumentError("bad host patterns: truncated");
    }
    if (n == 0) continue;
    auto parsed = UsagePatterns::Parse(s);
    if (!parsed.ok()) return parsed.status();
    *p = std::move(*parsed);
  }
  if (!in.done()) return absl::InvalidArgumentError("bad host patterns: trailing bytes");
  return h;
}

HostPatterns AnalyseHost(const UsageSeries& series, const PatternOptions& options, int64_t now_unix,
                         int backtest_days) {
  HostPatterns h;
  for (Resource r : {Resource::kCpu, Resource::kMemory}) {
    auto current = AnalysePatterns(series, r, options, now_unix);
    if (current.ok()) (r == Resource::kCpu ? h.cpu : h.mem) = std::move(*current);
    auto back = AnalysePatterns(series, r, options, now_unix - int64_t{backtest_days} * 86400);
    if (back.ok()) (r == Resource::kCpu ? h.cpu_backtest : h.mem_backtest) = std::move(*back);
  }
  return h;
}

}  // namespace sojourn::usage
