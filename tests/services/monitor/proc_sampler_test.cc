#include "services/monitor/proc_sampler.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/server.h"
#include "gtest/gtest.h"
#include "services/monitor/monitor.h"
#include "services/monitor/monitor_service.h"
#include "services/monitor/sample_sender.h"
#include "tests/test_util.h"

namespace sojourn::monitor {
namespace {

using sojourn::testing::IsOk;
using sojourn::testing::TempDir;

void Write(const std::string& path, const std::string& text) {
  std::filesystem::create_directories(std::filesystem::path(path).parent_path());
  std::ofstream(path) << text;
}

// A directory laid out like /proc with controllable counters.
class FakeProc {
 public:
  void Set(uint64_t user, uint64_t idle, uint64_t guest_ticks, uint64_t swpin) {
    Write(dir_.File("stat"),
          "cpu  " + std::to_string(user) + " 0 0 " + std::to_string(idle) +
              " 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\ncpu1 1 0 0 1 0 0 0 0 0 0\n");
    Write(dir_.File("meminfo"), "MemTotal:       8388608 kB\nMemAvailable:   2097152 kB\n");
    Write(dir_.File("vmstat"), "pswpin " + std::to_string(swpin) + "\npswpout 0\n");
    // /proc/<pid>/stat: utime is field 14, stime field 15.
    Write(dir_.File("4242/stat"), "4242 (guest job) R 1 1 1 0 -1 0 0 0 0 0 " +
                                      std::to_string(guest_ticks) + " 0 0 0 20 0 1 0\n");
  }
  std::string root() const { return dir_.path(); }

 private:
  TempDir dir_;
};

// Load is the busy share of CPU time minus the guest's own CPU time.
TEST(ProcSamplerTest, ExcludesGuestCpuTime) {
  FakeProc proc;
  ProcSampler sampler(proc.root());
  proc.Set(/*user=*/1000, /*idle=*/1000, /*guest=*/100, 0);
  auto first = sampler.Sample(100, {4242});
  ASSERT_THAT(first.status(), IsOk());
  EXPECT_FALSE(first->has_value());  // the first reading only starts an interval
  // +600 busy ticks of which 300 are the guest's, +400 idle: host load 0.3.
  proc.Set(1600, 1400, 400, 60);
  auto second = sampler.Sample(106, {4242});
  ASSERT_THAT(second.status(), IsOk());
  ASSERT_TRUE(second->has_value());
  EXPECT_NEAR((*second)->cpu_load, 0.3, 1e-12);
  EXPECT_NEAR((*second)->free_mem_mb, 2048, 1e-9);
  EXPECT_NEAR((*second)->swap_in_per_s, 10, 1e-9);
  EXPECT_EQ((*second)->unix_seconds, 106);
  // Without registering the guest, its time counts as host load.
  ProcSampler plain(proc.root());
  proc.Set(1000, 1000, 100, 0);
  (void)plain.Sample(100, {});
  proc.Set(1600, 1400, 400, 0);
  EXPECT_NEAR((*plain.Sample(106, {}))->cpu_load, 0.6, 1e-12);
}

// A counter going backwards (reboot, pid reuse) restarts the interval instead
// of producing a bogus sample.
TEST(ProcSamplerTest, CounterResetRestartsInterval) {
  FakeProc proc;
  ProcSampler sampler(proc.root());
  proc.Set(5000, 5000, 500, 0);
  (void)sampler.Sample(100, {4242});
  proc.Set(100, 100, 10, 0);  // reset
  auto s = sampler.Sample(106, {4242});
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_FALSE(s->has_value());
  proc.Set(200, 200, 10, 0);
  s = sampler.Sample(112, {4242});
  ASSERT_TRUE(s->has_value());
  EXPECT_NEAR((*s)->cpu_load, 0.5, 1e-12);
}

// The real /proc of this machine reads and gives a load in [0, 1].
TEST(ProcSamplerTest, ReadsTheRealProc) {
  ProcSampler sampler;
  auto c = sampler.Read({});
  ASSERT_THAT(c.status(), IsOk());
  EXPECT_GT(c->total_ticks, 0u);
  EXPECT_GT(c->mem_total_mb, 0);
  EXPECT_GE(c->cpus, 1);
  auto attrs = sampler.Attributes();
  EXPECT_GE(attrs.cpu_cores(), 1);
  ProcCounters later = *c;
  later.total_ticks += 100;
  later.idle_ticks += 25;
  auto s = ProcSampler::Diff(*c, later, 1.0);
  ASSERT_TRUE(s.has_value());
  EXPECT_NEAR(s->cpu_load, 0.75, 1e-12);
}

// A missing /proc is an error status, not a crash.
TEST(ProcSamplerTest, MissingProcIsAnError) {
  ProcSampler sampler("/nonexistent-proc");
  EXPECT_FALSE(sampler.Read({}).ok());
}

// /proc/<pid>/stat: the state (field 3) and the start time (field 22), past a
// command with spaces and parentheses; NOT_FOUND for a pid with no entry.
TEST(ProcSamplerTest, ReadsProcessStateAndStartTime) {
  TempDir dir;
  // Fields 3..22 after the command: state ... starttime 987654.
  Write(dir.File("7/stat"),
        "7 (a (b) c) S 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 987654 1000 10\n");
  Write(dir.File("8/stat"), "8 (zombie) Z 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 55 0 0\n");
  // 21 fields: no start time (the other tests' fake guests).
  Write(dir.File("9/stat"), "9 (old) R 1 1 1 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0\n");
  ProcSampler sampler(dir.path());
  auto p = sampler.Process(7);
  ASSERT_THAT(p.status(), IsOk());
  EXPECT_EQ(p->state, 'S');
  EXPECT_FALSE(p->exited());
  ASSERT_TRUE(p->start_ticks.has_value());
  EXPECT_EQ(*p->start_ticks, 987654u);
  auto z = sampler.Process(8);
  ASSERT_THAT(z.status(), IsOk());
  EXPECT_TRUE(z->exited());
  auto old = sampler.Process(9);
  ASSERT_THAT(old.status(), IsOk());
  EXPECT_EQ(old->state, 'R');
  EXPECT_FALSE(old->start_ticks.has_value());
  EXPECT_TRUE(absl::IsNotFound(sampler.Process(10).status())) << sampler.Process(10).status();
  // This process on the real /proc: running, with a start time.
  auto self = ProcSampler().Process(getpid());
  ASSERT_THAT(self.status(), IsOk());
  EXPECT_FALSE(self->exited());
  EXPECT_TRUE(self->start_ticks.has_value());
}

// A /proc-like directory with a host at a fixed load and guest processes
// that can start, exit (no entry, or a zombie) and have their pid reused.
class GuestProc {
 public:
  GuestProc() { Host(1000, 1000); }
  void Host(uint64_t busy, uint64_t idle) {
    Write(dir_.File("stat"), absl::StrCat("cpu  ", busy, " 0 0 ", idle,
                                          " 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n"));
    Write(dir_.File("meminfo"), "MemTotal:       8388608 kB\nMemAvailable:   2097152 kB\n");
    Write(dir_.File("vmstat"), "pswpin 0\npswpout 0\n");
  }
  // Process `pid` started at `start` (clock ticks after boot) and has used
  // `ticks` of CPU time; state 'S', or 'Z' for a zombie.
  void Guest(int pid, uint64_t start, uint64_t ticks = 0, char state = 'S') {
    Write(dir_.File(absl::StrCat(pid, "/stat")),
          absl::StrCat(pid, " (sleep) ", std::string(1, state), " 1 1 1 0 -1 0 0 0 0 0 ", ticks,
                       " 0 0 0 20 0 1 0 ", start, " 1000 10\n"));
  }
  void Exit(int pid) { std::filesystem::remove_all(dir_.File(std::to_string(pid))); }
  std::string root() const { return dir_.path(); }

 private:
  TempDir dir_;
};

// The value of sojourn_monitor_guests_pruned_total{reason=`reason`} in the
// exposition text (-1 when absent).
double PrunedCount(const std::string& text, const std::string& reason) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("sojourn_monitor_guests_pruned_total{", 0) == 0 &&
        line.find("reason=\"" + reason + "\"") != std::string::npos) {
      return std::stod(line.substr(line.rfind(' ') + 1));
    }
  }
  return -1;
}

// One monitor on a GuestProc, the gateway off, its state manager unreachable
// (samples stay buffered), served over gRPC for GetStatus.
class MonitorGuestsTest : public ::testing::Test {
 protected:
  MonitorGuestsTest() : sampler_(proc_.root()), metrics_("monitor-test") {
    SenderConfig sc;
    sc.host = "guest-host";
    sc.statemgr_address = "127.0.0.1:1";
    sc.period_seconds = 6;
    sender_ = std::make_unique<SampleSender>(sc, clock_);
    monitor_ = std::make_unique<Monitor>(sampler_, *sender_, clock_, metrics_, absl::Seconds(6));
    service_ = std::make_unique<MonitorService>(*monitor_, *sender_);
  }
  void SetUp() override {
    auto server = GrpcServer::Start({}, {service_.get()}, server_metrics_);
    ASSERT_THAT(server.status(), IsOk());
    server_ = std::move(*server);
    stub_ = v1::Monitor::NewStub(
        grpc::CreateChannel(server_->address(), grpc::InsecureChannelCredentials()));
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown(absl::Seconds(1));
  }
  grpc::Status Register(int pid) {
    grpc::ClientContext ctx;
    v1::RegisterGuestRequest req;
    req.set_pid(pid);
    v1::RegisterGuestResponse resp;
    return stub_->RegisterGuest(&ctx, req, &resp);
  }
  std::set<int> StatusPids() {
    grpc::ClientContext ctx;
    v1::GetMonitorStatusResponse resp;
    grpc::Status s = stub_->GetStatus(&ctx, v1::GetMonitorStatusRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return std::set<int>(resp.guest_pids().begin(), resp.guest_pids().end());
  }
  // One sample period on: the host's counters advanced, then a sample.
  void Period(uint64_t busy, uint64_t idle) {
    clock_.Advance(absl::Seconds(6));
    proc_.Host(busy, idle);
    monitor_->Tick();
  }
  double Pruned(const std::string& reason) { return PrunedCount(metrics_.Render(), reason); }

  GuestProc proc_;
  ProcSampler sampler_;
  FakeClock clock_;
  Metrics metrics_;
  Metrics server_metrics_{"monitor-test-server"};
  std::unique_ptr<SampleSender> sender_;
  std::unique_ptr<Monitor> monitor_;
  std::unique_ptr<MonitorService> service_;
  std::unique_ptr<GrpcServer> server_;
  std::unique_ptr<v1::Monitor::Stub> stub_;
};

// The monitor's own threads are no guests: the gateway would SIGSTOP the
// monitor through one (a gRPC audit froze a --gateway monitor so). This test
// process is the monitor here; its gRPC server runs threads of its own.
TEST_F(MonitorGuestsTest, RefusesTheMonitorsOwnThreads) {
  std::vector<int> threads;
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/task")) {
    const int tid = std::stoi(e.path().filename().string());
    if (tid != getpid()) threads.push_back(tid);
  }
  ASSERT_FALSE(threads.empty());
  for (int tid : threads) {
    const grpc::Status s = Register(tid);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << tid;
    EXPECT_THAT(s.error_message(), ::testing::HasSubstr("is a thread of this monitor")) << tid;
  }
  EXPECT_EQ(Register(getpid()).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_TRUE(StatusPids().empty());
}

// The audit's case with the gateway off: 200 guests registered, then they
// exit. Before, GetStatus listed all 200 forever; now each sample drops the
// ones with no /proc entry and the zombies, and the ones whose pid names a
// process with another start time (pid reuse), and keeps the rest.
TEST_F(MonitorGuestsTest, SamplesDropExitedAndReusedGuests) {
  // Above any pid_max (2^22): never this test's own pid.
  constexpr int kFirst = 5'000'000, kGuests = 200;
  std::set<int> all;
  for (int pid = kFirst; pid < kFirst + kGuests; ++pid) {
    proc_.Guest(pid, /*start=*/5000 + pid);
    ASSERT_TRUE(Register(pid).ok()) << pid;
    all.insert(pid);
  }
  EXPECT_EQ(StatusPids(), all);
  monitor_->Tick();  // the first reading: every guest is still there
  Period(1600, 1400);
  EXPECT_EQ(StatusPids(), all);
  EXPECT_EQ(Pruned("exited"), 0);  // declared at start-up
  EXPECT_EQ(Pruned("pid_reused"), 0);
  // 150 exit (gone from /proc), 20 are zombies, 20 pids go to new processes,
  // 10 still run.
  std::set<int> running;
  for (int i = 0; i < kGuests; ++i) {
    const int pid = kFirst + i;
    if (i < 150) {
      proc_.Exit(pid);
    } else if (i < 170) {
      proc_.Guest(pid, 5000 + pid, 0, 'Z');
    } else if (i < 190) {
      proc_.Guest(pid, 900000 + pid);
    } else {
      running.insert(pid);
    }
  }
  Period(2200, 1800);
  EXPECT_EQ(StatusPids(), running);
  EXPECT_EQ(monitor_->guests(), running);
  EXPECT_EQ(Pruned("exited"), 170);
  EXPECT_EQ(Pruned("pid_reused"), 20);
  // Two periods on, nothing more goes; the rest exit, the list empties.
  Period(2800, 2200);
  EXPECT_EQ(StatusPids(), running);
  for (int pid : running) proc_.Exit(pid);
  Period(3400, 2600);
  EXPECT_TRUE(StatusPids().empty());
  EXPECT_EQ(Pruned("exited"), 180);
}

// A reused pid's CPU time is the host's load again: the new process is not
// the guest. And registering an exited or missing pid is NOT_FOUND, while
// registering a reused pid anew (the new process is a guest) keeps it.
TEST_F(MonitorGuestsTest, ReusedPidIsNotExcludedFromTheLoad) {
  // Above any pid_max (2^22): never this test's own pid.
  constexpr int kA = 5'004'242, kB = 5'004'343, kZombie = 5'004'444, kMissing = 5'004'545;
  proc_.Guest(kA, /*start=*/100, /*ticks=*/0);
  proc_.Guest(kB, /*start=*/200, /*ticks=*/0);
  ASSERT_TRUE(Register(kA).ok());
  ASSERT_TRUE(Register(kB).ok());
  monitor_->Tick();
  // +600 busy ticks of which 300 are kA's, +400 idle: load 0.3.
  proc_.Guest(kA, 100, 300);
  Period(1600, 1400);
  ASSERT_TRUE(monitor_->last_sample().has_value());
  EXPECT_NEAR(monitor_->last_sample()->cpu_load, 0.3, 1e-12);
  // kA exits and its pid goes to a process that uses 500 ticks of the
  // next 600 busy ones: all of them are the host's (before: subtracted,
  // or the interval lost to a "counter reset").
  proc_.Guest(kA, 777, 500);
  Period(2200, 1800);
  ASSERT_TRUE(monitor_->last_sample().has_value());
  EXPECT_EQ(monitor_->last_sample()->unix_seconds, absl::ToUnixSeconds(clock_.Now()));
  EXPECT_NEAR(monitor_->last_sample()->cpu_load, 0.6, 1e-12);
  EXPECT_EQ(StatusPids(), std::set<int>{kB});
  // Registered anew, the new process is the guest (its start time recorded
  // again): the next sample keeps it.
  proc_.Guest(kB, 999, 0);  // kB reused too, then registered again
  ASSERT_TRUE(Register(kB).ok());
  ASSERT_TRUE(Register(kA).ok());
  Period(2800, 2200);
  EXPECT_EQ(StatusPids(), (std::set<int>{kA, kB}));
  // A zombie or a pid with no /proc entry cannot be registered.
  proc_.Guest(kZombie, 300, 0, 'Z');
  EXPECT_EQ(Register(kZombie).error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_EQ(Register(kMissing).error_code(), grpc::StatusCode::NOT_FOUND);
  grpc::Status bad = Register(-3);
  EXPECT_EQ(bad.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(bad.error_message(), "pid must be > 0, got -3");
}

}  // namespace
}  // namespace sojourn::monitor
