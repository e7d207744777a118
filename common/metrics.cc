#include "common/metrics.h"

#include <malloc.h>

#include <exception>
#include <string>
#include <utility>
#include <vector>

#include <prometheus/collectable.h>
#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/proc_stat.h"

namespace sojourn {

namespace {

// The process's own figures, read at each scrape: the process_* metrics of
// the Prometheus client guidelines (what the Go, Java and Python clients
// export; prometheus-cpp 1.0 has no such collector), and the heap as glibc
// counts it, which tells live data from freed memory the allocator keeps
// (both count in the resident memory).
class ProcessCollector final : public prometheus::Collectable {
 public:
  explicit ProcessCollector(std::string service) : service_(std::move(service)) {}

  std::vector<prometheus::MetricFamily> Collect() const override {
    std::vector<prometheus::MetricFamily> out;
    auto usage = ReadProcessUsage();
    if (usage.ok()) {
      Add(&out, "process_cpu_seconds_total", "User and system CPU time spent, in seconds.",
          prometheus::MetricType::Counter, usage->cpu_seconds);
      Add(&out, "process_start_time_seconds",
          "Start time of the process since the Unix epoch, in seconds.",
          prometheus::MetricType::Gauge, usage->start_unix_seconds);
      Add(&out, "process_resident_memory_bytes", "Resident memory size in bytes.",
          prometheus::MetricType::Gauge, usage->resident_bytes);
      Add(&out, "process_virtual_memory_bytes", "Virtual memory size in bytes.",
          prometheus::MetricType::Gauge, usage->virtual_bytes);
      Add(&out, "process_open_fds", "Number of open file descriptors.",
          prometheus::MetricType::Gauge, static_cast<double>(usage->open_fds));
      if (usage->max_fds.has_value()) {
        Add(&out, "process_max_fds", "Maximum number of open file descriptors (soft limit).",
            prometheus::MetricType::Gauge, static_cast<double>(*usage->max_fds));
      }
    }
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
    // Sums every arena; it locks each in turn, cheap at a scrape's rate.
    const struct mallinfo2 m = mallinfo2();
    Add(&out, "sojourn_process_heap_in_use_bytes",
        "Heap bytes in live allocations (glibc mallinfo2 uordblks + hblkhd).",
        prometheus::MetricType::Gauge, static_cast<double>(m.uordblks + m.hblkhd));
    Add(&out, "sojourn_process_heap_free_bytes",
        "Heap bytes freed but kept by the allocator (glibc mallinfo2 fordblks): resident, not "
        "in use.",
        prometheus::MetricType::Gauge, static_cast<double>(m.fordblks));
#endif
    return out;
  }

 private:
  void Add(std::vector<prometheus::MetricFamily>* out, const char* name, const char* help,
           prometheus::MetricType type, double value) const {
    prometheus::MetricFamily family;
    family.name = name;
    family.help = help;
    family.type = type;
    prometheus::ClientMetric metric;
    metric.label.push_back({"service", service_});
    if (type == prometheus::MetricType::Counter) {
      metric.counter.value = value;
    } else {
      metric.gauge.value = value;
    }
    family.metric.push_back(std::move(metric));
    out->push_back(std::move(family));
  }

  const std::string service_;
};

}  // namespace

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::shared_ptr<ProcessCollector> process;
  std::unique_ptr<prometheus::Exposer> exposer;
  absl::Mutex mu;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters ABSL_GUARDED_BY(mu);
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges ABSL_GUARDED_BY(mu);
  std::map<std::string, prometheus::Family<prometheus::Histogram>*> histograms ABSL_GUARDED_BY(mu);
};

Metrics::Metrics(const std::string& service) : service_(service), impl_(std::make_unique<Impl>()) {
  impl_->process = std::make_shared<ProcessCollector>(service);
}
Metrics::~Metrics() = default;

void Metrics::Increment(const std::string& name, const std::string& help,
                        const MetricLabels& labels, double by) {
  prometheus::Family<prometheus::Counter>* family;
  {
    absl::MutexLock l(&impl_->mu);
    auto& f = impl_->counters[name];
    if (f == nullptr) {
      f = &prometheus::BuildCounter().Name(name).Help(help).Labels({{"service", service_}}).Register(
          *impl_->registry);
    }
    family = f;
  }
  family->Add(labels).Increment(by);
}

void Metrics::DeclareCounter(const std::string& name, const std::string& help,
                             const MetricLabels& labels) {
  Increment(name, help, labels, 0.0);
}

void Metrics::Set(const std::string& name, const std::string& help, const MetricLabels& labels,
                  double value) {
  prometheus::Family<prometheus::Gauge>* family;
  {
    absl::MutexLock l(&impl_->mu);
    auto& f = impl_->gauges[name];
    if (f == nullptr) {
      f = &prometheus::BuildGauge().Name(name).Help(help).Labels({{"service", service_}}).Register(
          *impl_->registry);
    }
    family = f;
  }
  family->Add(labels).Set(value);
}

void Metrics::Observe(const std::string& name, const std::string& help, const MetricLabels& labels,
                      double value) {
  static const prometheus::Histogram::BucketBoundaries kBuckets = {
      0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
  prometheus::Family<prometheus::Histogram>* family;
  {
    absl::MutexLock l(&impl_->mu);
    auto& f = impl_->histograms[name];
    if (f == nullptr) {
      f = &prometheus::BuildHistogram().Name(name).Help(help).Labels({{"service", service_}}).Register(
          *impl_->registry);
    }
    family = f;
  }
  family->Add(labels, kBuckets).Observe(value);
}

absl::StatusOr<int> Metrics::StartHttp(const std::string& address) {
  try {
    impl_->exposer = std::make_unique<prometheus::Exposer>(address);
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("cannot serve /metrics on ", address, ": ", e.what()));
  }
  impl_->exposer->RegisterCollectable(impl_->registry);
  impl_->exposer->RegisterCollectable(impl_->process);
  auto ports = impl_->exposer->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError("metrics server bound no port");
  return ports.front();
}

std::string Metrics::Render() const {
  prometheus::TextSerializer serializer;
  std::vector<prometheus::MetricFamily> families = impl_->registry->Collect();
  for (auto& family : impl_->process->Collect()) families.push_back(std::move(family));
  return serializer.Serialize(families);
}

}  // namespace sojourn
