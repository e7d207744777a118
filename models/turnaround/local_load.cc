#include "models/turnaround/local_load.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace sojourn::turnaround {

const std::vector<LocalProfile>& Table2Profiles() {
  static const auto* profiles = new std::vector<LocalProfile>{
      {"shell", 0.15, 0.40, 0.2, 20, 15},
      {"xwin", 0.62, 0.15, 0.1, 35, 55},
      {"internet", 0.23, 0.20, 0.1, 60, 75},
  };
  return *profiles;
}

LocalLoadModel::LocalLoadModel(int num_nodes, const LocalLoadConfig& config, double start_time)
    : config_(config), rng_(config.seed), cpu_(static_cast<size_t>(std::max(0, num_nodes)), 0.0) {
  // Every node starts idle: the tree of all-ones flags, built in O(N).
  const size_t n = cpu_.size();
  idle_tree_.assign(n + 1, 0);
  for (size_t i = 1; i <= n; ++i) {
    idle_tree_[i] += 1;
    const size_t parent = i + (i & (~i + 1));
    if (parent <= n) idle_tree_[parent] += idle_tree_[i];
  }
  idle_count_ = n;
  for (size_t bit = 1; bit <= n; bit <<= 1) idle_top_bit_ = bit;
  const int loaded = static_cast<int>(
      std::lround(std::clamp(config_.loaded_fraction, 0.0, 1.0) * cpu_.size()));
  std::vector<int> order(cpu_.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = static_cast<int>(i);
  std::shuffle(order.begin(), order.end(), rng_);
  for (int i = 0; i < loaded; ++i) StartSession(order[i], start_time);
}

void LocalLoadModel::SetIdle(int node, bool idle) {
  const int delta = idle ? 1 : -1;
  idle_count_ += delta;
  for (size_t i = static_cast<size_t>(node) + 1; i < idle_tree_.size(); i += i & (~i + 1)) {
    idle_tree_[i] += delta;
  }
}

int LocalLoadModel::KthIdle(size_t k) const {
  // Descend the tree: the longest prefix holding at most k idle nodes; the
  // node after it is the (k + 1)-th idle one.
  size_t pos = 0;
  for (size_t bit = idle_top_bit_; bit > 0; bit >>= 1) {
    const size_t next = pos + bit;
    if (next < idle_tree_.size() && static_cast<size_t>(idle_tree_[next]) <= k) {
      pos = next;
      k -= static_cast<size_t>(idle_tree_[next]);
    }
  }
  return static_cast<int>(pos);
}

double LocalLoadModel::DrawSession() {
  std::uniform_real_distribution<double> u(0, 1);
  const double mean = u(rng_) < config_.weight1 ? config_.mean1_s : config_.mean2_s;
  std::exponential_distribution<double> e(1.0 / mean);
  return e(rng_);
}

void LocalLoadModel::StartSession(int node, double now) {
  std::uniform_real_distribution<double> u(0, 1);
  double pick = u(rng_);
  const LocalProfile* profile = &Table2Profiles().back();
  for (const LocalProfile& p : Table2Profiles()) {
    if (pick < p.share) {
      profile = &p;
      break;
    }
    pick -= p.share;
  }
  std::normal_distribution<double> load(profile->cpu_mean, profile->cpu_sd);
  cpu_[node] = std::clamp(load(rng_), 0.01, 1.0);
  SetIdle(node, false);
  ends_.emplace(now + DrawSession(), node);
}

double LocalLoadModel::next_event() const {
  return ends_.empty() ? std::numeric_limits<double>::infinity() : ends_.top().first;
}

std::vector<int> LocalLoadModel::Step() {
  if (ends_.empty()) return {};
  const auto [when, node] = ends_.top();
  ends_.pop();
  cpu_[node] = 0;
  SetIdle(node, true);
  // The next local user sits at a node without one (possibly the same),
  // uniformly: the k-th idle node in ascending order.
  std::uniform_int_distribution<size_t> pick(0, idle_count_ - 1);
  const int next = KthIdle(pick(rng_));
  StartSession(next, when);
  if (next == node) return {node};
  return {node, next};
}

}  // namespace sojourn::turnaround
