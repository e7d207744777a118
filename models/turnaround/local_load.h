// Local (workstation owner) load model of paper 002, section 6.1.1: a fixed
// share of the nodes has a local user; each session has one of the Table 2
// profiles (Shell 15 %, Xwin 62 %, Internet 23 %, with their CPU load mean and
// standard deviation) and lasts a two-stage hyper-exponential time (means 60
// and 120 minutes, weights 0.4 and 0.6). When a session ends a new one starts
// on a node without a local user, so the loaded share stays constant.
// Seeded: the same seed gives the same sessions.
#ifndef SOJOURN_MODELS_TURNAROUND_LOCAL_LOAD_H_
#define SOJOURN_MODELS_TURNAROUND_LOCAL_LOAD_H_

#include <cstdint>
#include <queue>
#include <random>
#include <string>
#include <vector>

namespace sojourn::turnaround {

struct LocalProfile {
  std::string name;
  double share;     // of the sessions
  double cpu_mean;  // CPU load, fraction of the node
  double cpu_sd;
  double mem_mean_pct;
  double mem_sd_pct;
};

// Table 2 of the paper.
const std::vector<LocalProfile>& Table2Profiles();

struct LocalLoadConfig {
  // Share of nodes with a local user at any time. Default 0.75 (the paper).
  double loaded_fraction = 0.75;
  // Two-stage hyper-exponential session length.
  double mean1_s = 3600, mean2_s = 7200;
  double weight1 = 0.4;
  uint64_t seed = 1;
};

// Not thread-safe.
class LocalLoadModel {
 public:
  LocalLoadModel(int num_nodes, const LocalLoadConfig& config, double start_time);

  double cpu(int n) const { return cpu_[n]; }
  int tasks(int n) const { return cpu_[n] > 0 ? 1 : 0; }
  // Time of the next session end (infinity when there is no local load).
  double next_event() const;
  // Ends the next session and starts its replacement; returns the node(s)
  // whose load changed.
  std::vector<int> Step();
  // Draws one session length (exposed for tests).
  double DrawSession();

 private:
  // `node` must be idle (no local user); it gets one.
  void StartSession(int node, double now);
  // The idle nodes (cpu_ <= 0) as a Fenwick tree over 0/1 flags, so that a
  // session end picks "the k-th idle node in ascending order" in O(log N)
  // rather than by listing all N nodes: the same node for the same draw
  // (the list was the simulation's main cost, quadratic in the nodes over a
  // run; session 22).
  void SetIdle(int node, bool idle);
  int KthIdle(size_t k) const;  // 0-based, k < idle_count_

  LocalLoadConfig config_;
  std::mt19937_64 rng_;
  std::vector<double> cpu_;
  std::vector<int> idle_tree_;  // 1-based Fenwick tree, size N + 1
  size_t idle_count_ = 0;
  size_t idle_top_bit_ = 0;  // largest power of two <= N (0 when N = 0)
  using Event = std::pair<double, int>;  // end time, node
  std::priority_queue<Event, std::vector<Event>, std::greater<Event>> ends_;
};

}  // namespace sojourn::turnaround

#endif  // SOJOURN_MODELS_TURNAROUND_LOCAL_LOAD_H_
