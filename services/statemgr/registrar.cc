#include "services/statemgr/registrar.h"

#include <algorithm>

#include <grpcpp/grpcpp.h>

#include "common/logging.h"
#include "services/convert.h"

namespace sojourn::statemgr {

sojourn::v1::HostCondition ConditionProto(const HostInfo& info) {
  sojourn::v1::HostCondition c;
  c.set_state(ToProto(info.state));
  c.set_state_since_unix_seconds(std::max<int64_t>(0, info.state_since_unix));
  c.set_load_band(info.load_band == availability::kLoadBandUnknown ? -1 : info.load_band);
  c.set_step_seconds(std::max<int64_t>(0, info.step_seconds));
  return c;
}

Registrar::Registrar(const RegistrarConfig& config, HostBook& book, Clock& clock)
    : config_(config), book_(book), clock_(clock) {
  // Reconnect attempts at least every period: gRPC's default backoff grows to
  // 120 s, so after a broker was down a couple of minutes its hosts came
  // back up to two minutes after it, past the window in which it answers
  // StartJob of an unknown host UNAVAILABLE (one heartbeat TTL, 60 s).
  grpc::ChannelArguments args;
  const int period_ms = static_cast<int>(
      std::clamp<int64_t>(absl::ToInt64Milliseconds(config_.period), 1000, 120'000));
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, period_ms);
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, std::min(period_ms, 1000));
  stub_ = sojourn::v1::Broker::NewStub(grpc::CreateCustomChannel(
      config_.broker_address, OrInsecure(config_.credentials), args));
}

Registrar::~Registrar() { Stop(); }

void Registrar::Start() { thread_ = std::thread([this] { Run(); }); }

void Registrar::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int Registrar::RegisterAll() {
  int ok = 0;
  for (const HostInfo& info : book_.List()) {
    // A host known only from a sender's hello (no sample yet) is not offered
    // to the broker: nothing could be predicted for it.
    if (info.samples == 0) continue;
    sojourn::v1::RegisterHostRequest req;
    req.set_host(info.host);
    req.set_statemgr_address(config_.advertise_address);
    req.set_last_sample_unix_seconds(info.last_unix);
    if (info.last_cpu_load >= 0) req.set_cpu_load_ratio(std::min(1.0, info.last_cpu_load));
    *req.mutable_attributes() = info.meta.attributes;
    // What the broker keys its cached predictions on (common.proto HostCondition).
    *req.mutable_condition() = ConditionProto(info);
    sojourn::v1::RegisterHostResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
    grpc::Status s = stub_->RegisterHost(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::UNAVAILABLE ||
        s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
      if (!broker_down_) {
        broker_down_ = true;
        ++warnings_;
        SOJOURN_LOG(WARNING, "broker %s cannot be reached (%s): registrations wait until it answers",
                    config_.broker_address, s.error_message());
      }
      return ok;
    }
    if (broker_down_) {
      SOJOURN_LOG(INFO, "broker %s answers again", config_.broker_address);
      broker_down_ = false;
    }
    if (s.ok()) {
      ++ok;
      refused_.erase(info.host);
    } else {
      // Once until the refusal changes.
      std::string& last = refused_[info.host];
      if (last != s.error_message()) {
        last = s.error_message();
        ++warnings_;
        SOJOURN_LOG(WARNING, "registering %s with broker %s: %s", info.host,
                    config_.broker_address, s.error_message());
      }
    }
  }
  return ok;
}

int Registrar::warnings() const { return warnings_.load(); }

void Registrar::Run() {
  absl::MutexLock l(&mu_);
  while (!stopping_) {
    mu_.Unlock();
    RegisterAll();
    mu_.Lock();
    clock_.SleepUntil(clock_.Now() + config_.period, &mu_, &stopping_);
  }
}

}  // namespace sojourn::statemgr
