// Metrics for Prometheus. Services record through this header only; the
// prometheus-cpp types stay in metrics.cc.
//
//   Metrics metrics("statemgr");
//   metrics.Increment("sojourn_statemgr_samples_persisted_total", "Samples written", {});
//   metrics.Set("sojourn_statemgr_hosts", "Hosts held", {}, 3);
//
// A Metrics is safe for concurrent use. Every gRPC method served through
// ServeGrpc() is counted (sojourn_grpc_requests_total{service,method,code})
// and timed (sojourn_grpc_request_duration_seconds histogram) automatically.
// Every Metrics also exports the process's own figures, read at each scrape
// (common/proc_stat.h): process_cpu_seconds_total, process_start_time_seconds,
// process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds, and the heap in use and kept free by
// glibc's allocator (sojourn_process_heap_in_use_bytes,
// sojourn_process_heap_free_bytes).
#ifndef SOJOURN_COMMON_METRICS_H_
#define SOJOURN_COMMON_METRICS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace sojourn {

using MetricLabels = std::map<std::string, std::string>;

class Metrics {
 public:
  // `service` becomes the constant label service="..." on every series.
  explicit Metrics(const std::string& service);
  ~Metrics();
  Metrics(const Metrics&) = delete;
  Metrics& operator=(const Metrics&) = delete;

  void Increment(const std::string& name, const std::string& help, const MetricLabels& labels,
                 double by = 1.0);
  // Exports the counter series name{labels} at 0 (a no-op when it exists).
  // A counter created by its first event is absent until then, so
  // Prometheus' rate()/increase() miss that first increment and dashboards
  // say "No data": declare at start-up every counter (and label value known
  // up front) whose events may be rare.
  void DeclareCounter(const std::string& name, const std::string& help,
                      const MetricLabels& labels);
  void Set(const std::string& name, const std::string& help, const MetricLabels& labels,
           double value);
  // Observes a value into a histogram with the default latency buckets (seconds).
  void Observe(const std::string& name, const std::string& help, const MetricLabels& labels,
               double value);

  // Serves /metrics over HTTP on `address` ("127.0.0.1:0" picks a free port).
  // Returns the bound port.
  absl::StatusOr<int> StartHttp(const std::string& address);

  // The current exposition text (what /metrics returns).
  std::string Render() const;

  const std::string& service() const { return service_; }

 private:
  struct Impl;
  std::string service_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace sojourn

#endif  // SOJOURN_COMMON_METRICS_H_
