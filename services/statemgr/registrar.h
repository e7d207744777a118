// Keeps the state manager's hosts registered with the broker: every period it
// sends RegisterHost (which is also the heartbeat) for each host it holds, so
// the broker learns where to find their statistics.
#ifndef SOJOURN_SERVICES_STATEMGR_REGISTRAR_H_
#define SOJOURN_SERVICES_STATEMGR_REGISTRAR_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <unordered_map>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/tls.h"
#include "services/statemgr/host_book.h"
#include "sojourn/v1/broker.grpc.pb.h"

namespace sojourn::statemgr {

// The host's condition (common.proto HostCondition) from its HostInfo: what
// the registrar reports to the broker and GetWindowStats to the predictor.
sojourn::v1::HostCondition ConditionProto(const HostInfo& info);

struct RegistrarConfig {
  std::string broker_address;
  // Address under which the broker and predictor reach this state manager.
  std::string advertise_address;
  absl::Duration period = absl::Seconds(10);
  // TLS to the broker (common/tls.h); null = plaintext.
  std::shared_ptr<grpc::ChannelCredentials> credentials;
};

// Runs one background thread; Stop() (or the destructor) joins it.
class Registrar {
 public:
  Registrar(const RegistrarConfig& config, HostBook& book, Clock& clock);
  ~Registrar();
  void Start();
  void Stop();
  // Registers every host once, now (also used by tests). Returns how many
  // registrations the broker accepted. A broker that cannot be reached
  // (UNAVAILABLE, DEADLINE_EXCEEDED) ends the round at the first host: the
  // others would wait the same 3 s each. That is logged once until the
  // broker answers again, and a host's refusal once until it changes (a
  // state manager of 1,000 hosts logged 6,000 lines a minute while its
  // broker was down).
  int RegisterAll();
  // Warnings logged so far (for tests).
  int warnings() const;

 private:
  void Run();
  RegistrarConfig config_;
  HostBook& book_;
  Clock& clock_;
  std::unique_ptr<sojourn::v1::Broker::Stub> stub_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  // RegisterAll runs on one thread at a time (Run's, or a test's).
  bool broker_down_ = false;                               // since its last answer
  std::unordered_map<std::string, std::string> refused_;  // host -> its last refusal's message
  std::atomic<int> warnings_{0};
  std::thread thread_;
};

}  // namespace sojourn::statemgr

#endif  // SOJOURN_SERVICES_STATEMGR_REGISTRAR_H_
