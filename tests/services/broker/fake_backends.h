// In-process fakes of the broker's backends, for tests and the RankHosts
// benchmark: a TrSource / Predictor service whose host "NAME" fails linearly,
// TR(t) = max(0, 1 - t / life), with `life` from a table (or derived from the
// name), and a LoadSource / StateManager::GetSeries with a constant load.
#ifndef SOJOURN_TESTS_SERVICES_BROKER_FAKE_BACKENDS_H_
#define SOJOURN_TESTS_SERVICES_BROKER_FAKE_BACKENDS_H_

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "services/broker/ranker.h"
#include "sojourn/v1/predictor.grpc.pb.h"
#include "sojourn/v1/statemgr.grpc.pb.h"

namespace sojourn::broker::testing {

struct FakeHost {
  double life_seconds = 36000;  // TR reaches 0 here
  sojourn::v1::HostState state = sojourn::v1::HOST_STATE_S1_IDLE;
  double load = 0;
  // The prediction's valid_until_unix_seconds (0 = none).
  int64_t valid_until = 0;
  // The prediction's condition (none when unset).
  std::optional<sojourn::v1::HostCondition> condition;
};

// Thread-safe table of fake hosts; unknown hosts get `fallback(name)` or
// UNAVAILABLE when there is none.
class FakeHosts {
 public:
  void Set(const std::string& host, FakeHost h) {
    absl::MutexLock l(&mu_);
    hosts_[host] = h;
  }
  std::function<bool(const std::string&, FakeHost*)> fallback;
  // When true, Predict also answers the host's load forecast (as the real
  // predictor does with the state manager's), so the ranker needs no
  // GetSeries call.
  bool load_with_prediction = false;
  // Called at the start of every Predict (on the caller's thread), e.g. to
  // hold a prediction until the test has moved the clock.
  std::function<void(const std::string& host)> on_predict;

  bool Find(const std::string& host, FakeHost* out) const {
    {
      absl::MutexLock l(&mu_);
      auto it = hosts_.find(host);
      if (it != hosts_.end()) {
        *out = it->second;
        return true;
      }
    }
    return fallback && fallback(host, out);
  }

  // The predictor's answer: curve points evenly spaced over the window.
  absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& req) {
    predict_calls.fetch_add(1);
    if (on_predict) on_predict(req.host());
    FakeHost h;
    if (!Find(req.host(), &h)) return absl::UnavailableError("statemgr down");
    sojourn::v1::PredictAvailabilityResponse r;
    r.set_host(req.host());
    r.set_initial_state(h.state);
    r.set_step_seconds(300);
    r.set_history_windows(7);
    r.set_method("fake-linear");
    r.set_valid_until_unix_seconds(h.valid_until);
    if (h.condition) *r.mutable_condition() = *h.condition;
    auto tr = [&](double t) { return std::max(0.0, 1.0 - t / h.life_seconds); };
    const int n = std::max(1, req.curve_points());
    for (int k = 1; k <= n; ++k) {
      const int64_t off = req.window_seconds() * k / n;
      auto* p = r.add_curve();
      p->set_offset_seconds(off);
      p->set_tr_ratio(tr(static_cast<double>(off)));
    }
    r.set_tr_ratio(tr(static_cast<double>(req.window_seconds())));
    if (load_with_prediction) {
      // What LoadForecast::FromSamples gives for 4 h of a constant load.
      for (int64_t horizon : {300, 900, 1800, 3600, 7200, 14400}) {
        auto* lp = r.add_load_forecast();
        lp->set_horizon_seconds(horizon);
        lp->set_load_ratio(h.load);
      }
    }
    return r;
  }

  std::vector<HostSample> Samples(const std::string& host, int64_t start) {
    series_calls.fetch_add(1);
    FakeHost h;
    std::vector<HostSample> out;
    if (!Find(host, &h)) return out;
    for (int64_t t = std::max<int64_t>(start, kNow - 4 * 3600); t <= kNow; t += 300) {
      HostSample s;
      s.unix_seconds = t - t % 300;
      s.cpu_load = h.load;
      out.push_back(s);
    }
    return out;
  }

  static constexpr int64_t kNow = 1'700'000'000;
  std::atomic<int> predict_calls{0};
  std::atomic<int> series_calls{0};

 private:
  mutable absl::Mutex mu_;
  std::map<std::string, FakeHost> hosts_;
};

class FakeTrSource final : public TrSource {
 public:
  explicit FakeTrSource(FakeHosts& hosts) : hosts_(hosts) {}
  absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request) override {
    {
      absl::MutexLock l(&mu_);
      requests.push_back(request);
    }
    return hosts_.Predict(request);
  }
  absl::Mutex mu_;
  std::vector<sojourn::v1::PredictAvailabilityRequest> requests;

 private:
  FakeHosts& hosts_;
};

class FakeLoadSource final : public LoadSource {
 public:
  explicit FakeLoadSource(FakeHosts& hosts) : hosts_(hosts) {}
  absl::StatusOr<std::vector<HostSample>> RecentSamples(const sojourn::v1::RegisteredHost& host,
                                                        int64_t start_unix) override {
    return hosts_.Samples(host.host(), start_unix);
  }

 private:
  FakeHosts& hosts_;
};

// gRPC Predictor backed by FakeHosts.
class FakePredictorService final : public sojourn::v1::Predictor::CallbackService {
 public:
  explicit FakePredictorService(FakeHosts& hosts) : hosts_(hosts) {}
  grpc::ServerUnaryReactor* PredictAvailability(
      grpc::CallbackServerContext* ctx, const sojourn::v1::PredictAvailabilityRequest* req,
      sojourn::v1::PredictAvailabilityResponse* resp) override {
    auto* reactor = ctx->DefaultReactor();
    auto r = hosts_.Predict(*req);
    if (r.ok()) {
      *resp = std::move(*r);
      reactor->Finish(grpc::Status::OK);
    } else {
      reactor->Finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, std::string(r.status().message())));
    }
    return reactor;
  }

 private:
  FakeHosts& hosts_;
};

// gRPC StateManager answering GetSeries from FakeHosts.
class FakeStatemgrService final : public sojourn::v1::StateManager::CallbackService {
 public:
  explicit FakeStatemgrService(FakeHosts& hosts) : hosts_(hosts) {}
  grpc::ServerUnaryReactor* GetSeries(grpc::CallbackServerContext* ctx,
                                      const sojourn::v1::GetSeriesRequest* req,
                                      sojourn::v1::GetSeriesResponse* resp) override {
    for (const HostSample& s : hosts_.Samples(req->host(), req->start_unix_seconds())) {
      auto* p = resp->add_samples();
      p->set_unix_seconds(s.unix_seconds);
      p->set_cpu_load_ratio(s.cpu_load);
    }
    auto* reactor = ctx->DefaultReactor();
    reactor->Finish(grpc::Status::OK);
    return reactor;
  }

 private:
  FakeHosts& hosts_;
};

}  // namespace sojourn::broker::testing

#endif  // SOJOURN_TESTS_SERVICES_BROKER_FAKE_BACKENDS_H_
