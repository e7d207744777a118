#include "common/metrics.h"

#include <exception>
#include <utility>

#include <prometheus/counter.h>
#include <prometheus/exposer.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"

namespace sojourn {

struct Metrics::Impl {
  std::shared_ptr<prometheus::Registry> registry = std::make_shared<prometheus::Registry>();
  std::unique_ptr<prometheus::Exposer> exposer;
  absl::Mutex mu;
  std::map<std::string, prometheus::Family<prometheus::Counter>*> counters ABSL_GUARDED_BY(mu);
  std::map<std::string, prometheus::Family<prometheus::Gauge>*> gauges ABSL_GUARDED_BY(mu);
  std::map<std::string, prometheus::Family<prometheus::Histogram>*> histograms ABSL_GUARDED_BY(mu);
};

Metrics::Metrics(const std::string& service) : service_(service), impl_(std::make_unique<Impl>()) {}
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
  auto ports = impl_->exposer->GetListeningPorts();
  if (ports.empty()) return absl::UnavailableError("metrics server bound no port");
  return ports.front();
}

std::string Metrics::Render() const {
  prometheus::TextSerializer serializer;
  return serializer.Serialize(impl_->registry->Collect());
}

}  // namespace sojourn
