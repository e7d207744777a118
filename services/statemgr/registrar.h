// Keeps the state manager's hosts registered with the broker: every period it
// sends RegisterHost (which is also the heartbeat) for each host it holds, so
// the broker learns where to find their statistics.
#ifndef SOJOURN_SERVICES_STATEMGR_REGISTRAR_H_
#define SOJOURN_SERVICES_STATEMGR_REGISTRAR_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "services/statemgr/host_book.h"
#include "sojourn/v1/broker.grpc.pb.h"

namespace sojourn::statemgr {

struct RegistrarConfig {
  std::string broker_address;
  // Address under which the broker and predictor reach this state manager.
  std::string advertise_address;
  absl::Duration period = absl::Seconds(10);
};

// Runs one background thread; Stop() (or the destructor) joins it.
class Registrar {
 public:
  Registrar(const RegistrarConfig& config, HostBook& book, Clock& clock);
  ~Registrar();
  void Start();
  void Stop();
  // Registers every host once, now (also used by tests). Returns how many
  // registrations the broker accepted.
  int RegisterAll();

 private:
  void Run();
  RegistrarConfig config_;
  HostBook& book_;
  Clock& clock_;
  std::unique_ptr<sojourn::v1::Broker::Stub> stub_;
  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace sojourn::statemgr

#endif  // SOJOURN_SERVICES_STATEMGR_REGISTRAR_H_
