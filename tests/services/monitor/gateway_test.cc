// The guest gateway on real processes: each test forks children that wait
// for signals, lets the gateway act on them, and reads the result from the
// kernel (waitpid for stops, continues and deaths; getpriority for nice).
// waitpid is the synchronisation: no sleeps.
#include "services/monitor/gateway.h"

#include <signal.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/metrics.h"
#include "gtest/gtest.h"
#include "services/monitor/monitor.h"
#include "services/monitor/proc_sampler.h"
#include "services/monitor/sample_sender.h"
#include "tests/test_util.h"

namespace sojourn::monitor {
namespace {

// A child that only waits for signals (default dispositions: SIGSTOP stops
// it, SIGCONT continues it, SIGTERM kills it). The constructor returns once
// the child has set itself up; the child dies with the test process.
class Child {
 public:
  explicit Child(bool ignore_term = false) {
    int ready[2];
    if (pipe(ready) != 0) return;
    pid_ = fork();
    if (pid_ == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (ignore_term) signal(SIGTERM, SIG_IGN);
      (void)!write(ready[1], "r", 1);
      for (;;) pause();
    }
    char c;
    close(ready[1]);
    (void)!read(ready[0], &c, 1);
    close(ready[0]);
  }
  ~Child() {
    if (pid_ > 0 && !reaped_) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  int pid() const { return pid_; }
  // Waits for the next stop / continue / death of the child and says which.
  std::string Next() {
    int status = 0;
    if (waitpid(pid_, &status, WUNTRACED | WCONTINUED) != pid_) return "waitpid failed";
    if (WIFSTOPPED(status)) return "stopped";
    if (WIFCONTINUED(status)) return "continued";
    reaped_ = true;
    if (WIFSIGNALED(status)) return std::string("killed by ") + strsignal(WTERMSIG(status));
    return "exited";
  }
  // How the child died, past a "continued" report (a stopped child that is
  // sent SIGTERM and SIGCONT may or may not be reported as continued first).
  std::string Death() {
    std::string e = Next();
    while (e == "continued") e = Next();
    return e;
  }
  int Nice() const {
    errno = 0;
    return getpriority(PRIO_PROCESS, static_cast<id_t>(pid_));
  }

 private:
  pid_t pid_ = -1;
  bool reaped_ = false;
};

HostSample At(int64_t t, double load, double free_mem_mb = 4096) {
  HostSample s;
  s.unix_seconds = t;
  s.cpu_load = load;
  s.free_mem_mb = free_mem_mb;
  return s;
}

std::vector<std::string> Names(const std::vector<GatewayAction>& actions) {
  std::vector<std::string> out;
  for (const GatewayAction& a : actions) {
    EXPECT_TRUE(a.status.ok()) << a.action << " " << a.pid << ": " << a.status;
    out.push_back(a.action);
  }
  return out;
}

using V = std::vector<std::string>;

// Child::Next waits for the kernel to report a stop, continue or death; if
// the gateway wrongly does nothing, SIGALRM ends the test (a failure, not a
// hang). Not a synchronisation: every wait has an event to wait for.
class GatewayTest : public ::testing::Test {
 protected:
  void SetUp() override { alarm(60); }
  void TearDown() override { alarm(0); }
};

// The value of sojourn_monitor_gateway_actions_total{action=...} in the
// Prometheus text; "" when the series is missing.
std::string ActionCount(const std::string& text, const std::string& action) {
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("sojourn_monitor_gateway_actions_total{", 0) == 0 &&
        line.find("action=\"" + action + "\"") != std::string::npos) {
      return line.substr(line.rfind(' ') + 1);
    }
  }
  return "";
}

// S1 -> S2 renices; a spike suspends; the load dropping resumes; S1 gives the
// priority back; a spike longer than the grace period (S3) terminates.
TEST_F(GatewayTest, WalksTheStatesOfSectionFour) {
  availability::ClassifierConfig cfg;  // th1 0.2, th2 0.6, grace 60 s
  cfg.revocation_gap_seconds = 600;
  Gateway g(cfg);
  Child c;
  const std::set<int> guests = {c.pid()};
  const int nice0 = c.Nice();
  ASSERT_LT(nice0, 19);

  EXPECT_EQ(Names(g.Apply(At(100, 0.1), guests)), V{});
  EXPECT_EQ(g.mode(), GuestMode::kNormal);
  EXPECT_EQ(Names(g.Apply(At(106, 0.4), guests)), V{"renice"});
  EXPECT_EQ(g.state(), availability::HostState::kS2);
  EXPECT_EQ(c.Nice(), 19);
  EXPECT_EQ(Names(g.Apply(At(112, 0.45), guests)), V{});  // already reniced

  // A transient spike: still S2, the guest is stopped.
  EXPECT_EQ(Names(g.Apply(At(118, 0.9), guests)), V{"suspend"});
  EXPECT_EQ(g.state(), availability::HostState::kS2);
  EXPECT_EQ(g.mode(), GuestMode::kSuspended);
  EXPECT_EQ(c.Next(), "stopped");
  EXPECT_EQ(Names(g.Apply(At(124, 0.9), guests)), V{});

  // Back below th1: continued, and (as root) its priority back.
  const std::vector<GatewayAction> back = g.Apply(At(130, 0.1), guests);
  ASSERT_EQ(back.size(), 2u);
  EXPECT_EQ(back[0].action, "resume");
  EXPECT_EQ(back[1].action, "restore");
  EXPECT_EQ(c.Next(), "continued");
  if (geteuid() == 0) {
    EXPECT_TRUE(back[1].status.ok()) << back[1].status;
    EXPECT_EQ(c.Nice(), nice0);
  } else {
    EXPECT_TRUE(absl::IsPermissionDenied(back[1].status)) << back[1].status;
  }

  // Above th2 from 136 on: suspended, then terminated once the run of high
  // load (from the sample before it, 130) exceeds 60 s.
  EXPECT_EQ(Names(g.Apply(At(136, 0.95), guests)), V{"suspend"});
  EXPECT_EQ(c.Next(), "stopped");
  for (int64_t t = 142; t <= 190; t += 6) {
    EXPECT_EQ(Names(g.Apply(At(t, 0.95), guests)), V{}) << t;
  }
  EXPECT_EQ(Names(g.Apply(At(196, 0.95), guests)), V{"terminate"});
  EXPECT_EQ(g.state(), availability::HostState::kS3);
  // Stopped when SIGTERM arrived: it dies once continued.
  EXPECT_EQ(c.Death(), "killed by " + std::string(strsignal(SIGTERM)));
}

// Free memory below the working set (S4) terminates at once, from S1.
TEST_F(GatewayTest, MemoryShortageTerminatesAtOnce) {
  availability::ClassifierConfig cfg;
  Gateway g(cfg);
  Child c;
  EXPECT_EQ(Names(g.Apply(At(100, 0.05), {c.pid()})), V{});
  EXPECT_EQ(Names(g.Apply(At(106, 0.05, /*free_mem_mb=*/100), {c.pid()})), V{"terminate"});
  EXPECT_EQ(g.state(), availability::HostState::kS4);
  EXPECT_EQ(c.Next(), "killed by " + std::string(strsignal(SIGTERM)));
}

// A guest that ignores SIGTERM gets SIGKILL at the next sample once it is no
// longer registered (the monitor unregisters terminated guests).
TEST_F(GatewayTest, IgnoredTermIsFollowedByKill) {
  availability::ClassifierConfig cfg;
  Gateway g(cfg);
  Child c(/*ignore_term=*/true);
  EXPECT_EQ(Names(g.Apply(At(100, 0.05, 100), {c.pid()})), V{"terminate"});
  EXPECT_EQ(Names(g.Apply(At(106, 0.05, 100), {})), V{"kill"});
  EXPECT_EQ(c.Next(), "killed by " + std::string(strsignal(SIGKILL)));
}

// Unregistering a suspended guest continues it; an exited guest is "gone".
TEST_F(GatewayTest, ReleasesUnregisteredAndReportsGone) {
  availability::ClassifierConfig cfg;
  Gateway g(cfg);
  Child a, b;
  EXPECT_EQ(Names(g.Apply(At(100, 0.1), {a.pid(), b.pid()})), V{});
  EXPECT_EQ(Names(g.Apply(At(106, 0.9), {a.pid(), b.pid()})), (V{"suspend", "suspend"}));
  EXPECT_EQ(a.Next(), "stopped");
  EXPECT_EQ(b.Next(), "stopped");
  // b unregistered while the spike lasts: continued.
  EXPECT_EQ(Names(g.Apply(At(112, 0.9), {a.pid()})), V{"resume"});
  EXPECT_EQ(b.Next(), "continued");
  // a dies (reaped): the gateway says so instead of acting on it.
  kill(a.pid(), SIGKILL);
  EXPECT_EQ(a.Next(), "killed by " + std::string(strsignal(SIGKILL)));
  const std::vector<GatewayAction> out = g.Apply(At(118, 0.1), {a.pid()});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].action, "gone");
  EXPECT_EQ(out[0].pid, a.pid());
}

// Through the monitor: a /proc-like directory drives the host load, the
// gateway acts on a real registered child, the action is counted in the
// metrics and a terminated guest is unregistered.
TEST_F(GatewayTest, MonitorAppliesItAfterEachSample) {
  sojourn::testing::TempDir dir;
  Child c;
  auto write = [&](uint64_t busy, uint64_t idle) {
    auto put = [&](const std::string& rel, const std::string& text) {
      std::filesystem::create_directories(std::filesystem::path(dir.File(rel)).parent_path());
      std::ofstream(dir.File(rel)) << text;
    };
    put("stat", "cpu  " + std::to_string(busy) + " 0 0 " + std::to_string(idle) +
                    " 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n");
    put("meminfo", "MemTotal:       8388608 kB\nMemAvailable:   2097152 kB\n");
    put("vmstat", "pswpin 0\npswpout 0\n");
    put(std::to_string(c.pid()) + "/stat",
        std::to_string(c.pid()) + " (guest) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0\n");
  };
  ProcSampler sampler(dir.path());
  FakeClock clock;
  SenderConfig sc;
  sc.host = "gw-host";
  sc.statemgr_address = "127.0.0.1:1";  // unreachable: samples stay buffered
  sc.period_seconds = 6;
  SampleSender sender(sc, clock);
  Metrics metrics("monitor-test");
  availability::ClassifierConfig cfg;
  cfg.grace_seconds = 5;  // the first sample starts the high run; the second is 6 s later
  Gateway gateway(cfg);
  Monitor monitor(sampler, sender, clock, metrics, absl::Seconds(6), &gateway);
  write(1000, 1000);
  // Registration looks the guest up under the proc root (as samples do).
  ASSERT_TRUE(monitor.RegisterGuest(c.pid()).ok());

  monitor.Tick();  // starts the interval
  clock.Advance(absl::Seconds(6));
  write(1900, 1100);  // load 0.9: a spike
  monitor.Tick();
  ASSERT_TRUE(monitor.last_sample().has_value());
  ASSERT_NEAR(monitor.last_sample()->cpu_load, 0.9, 1e-9);
  ASSERT_EQ(gateway.mode(), GuestMode::kSuspended);
  EXPECT_EQ(c.Next(), "stopped");
  EXPECT_EQ(monitor.guests(), std::set<int>{c.pid()});
  clock.Advance(absl::Seconds(6));
  write(2800, 1200);  // still 0.9, 6 s after the first high sample > grace: S3
  monitor.Tick();
  EXPECT_EQ(c.Death(), "killed by " + std::string(strsignal(SIGTERM)));
  EXPECT_TRUE(monitor.guests().empty());
  const std::string text = metrics.Render();
  EXPECT_EQ(ActionCount(text, "suspend"), "1") << text;
  EXPECT_EQ(ActionCount(text, "terminate"), "1");
  EXPECT_EQ(ActionCount(text, "renice"), "0");  // declared at start-up
}

// The state letter of a real process (/proc/<pid>/stat field 3).
char RealState(int pid) {
  auto p = ProcSampler().Process(pid);
  return p.ok() ? p->state : '?';
}

// A forgotten guest is left as it is: the next Apply does not resume it (nor
// give back its priority, nor SIGKILL it), where an unregistered one is
// released.
TEST_F(GatewayTest, ForgottenGuestIsLeftAlone) {
  availability::ClassifierConfig cfg;
  Gateway g(cfg);
  Child a;
  EXPECT_EQ(Names(g.Apply(At(100, 0.1), {a.pid()})), V{});
  EXPECT_EQ(Names(g.Apply(At(106, 0.9), {a.pid()})), V{"suspend"});
  EXPECT_EQ(a.Next(), "stopped");
  g.Forget(a.pid());
  EXPECT_EQ(Names(g.Apply(At(112, 0.1), {})), V{});
  EXPECT_EQ(RealState(a.pid()), 'T');  // still stopped
}

// With the gateway on, a guest whose pid the proc root shows with another
// start time (the pid reused) is unregistered at the next sample and the
// gateway forgets it: the process now behind the pid is neither resumed nor
// signalled. The fake proc root stands in for the reuse; the process is a
// real child, so any signal would show in its real state.
TEST_F(GatewayTest, MonitorForgetsAReusedPid) {
  sojourn::testing::TempDir dir;
  Child c;
  auto put = [&](const std::string& rel, const std::string& text) {
    std::filesystem::create_directories(std::filesystem::path(dir.File(rel)).parent_path());
    std::ofstream(dir.File(rel)) << text;
  };
  auto write = [&](uint64_t busy, uint64_t idle, uint64_t start) {
    put("stat", "cpu  " + std::to_string(busy) + " 0 0 " + std::to_string(idle) +
                    " 0 0 0 0 0 0\ncpu0 1 0 0 1 0 0 0 0 0 0\n");
    put("meminfo", "MemTotal:       8388608 kB\nMemAvailable:   2097152 kB\n");
    put("vmstat", "pswpin 0\npswpout 0\n");
    put(std::to_string(c.pid()) + "/stat",
        std::to_string(c.pid()) + " (guest) S 1 1 1 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 " +
            std::to_string(start) + " 0 0\n");
  };
  ProcSampler sampler(dir.path());
  FakeClock clock;
  SenderConfig sc;
  sc.host = "gw-host";
  sc.statemgr_address = "127.0.0.1:1";  // unreachable: samples stay buffered
  sc.period_seconds = 6;
  SampleSender sender(sc, clock);
  Metrics metrics("monitor-test");
  availability::ClassifierConfig cfg;
  cfg.grace_seconds = 30;
  Gateway gateway(cfg);
  Monitor monitor(sampler, sender, clock, metrics, absl::Seconds(6), &gateway);
  write(1000, 1000, 500);
  ASSERT_TRUE(monitor.RegisterGuest(c.pid()).ok());
  monitor.Tick();
  clock.Advance(absl::Seconds(6));
  write(1900, 1100, 500);  // load 0.9: a spike, the guest suspended
  monitor.Tick();
  ASSERT_EQ(gateway.mode(), GuestMode::kSuspended);
  EXPECT_EQ(c.Next(), "stopped");
  clock.Advance(absl::Seconds(6));
  write(2000, 2000, 9999);  // load 0.1; the pid now has another start time
  monitor.Tick();
  EXPECT_TRUE(monitor.guests().empty());
  const std::string text = metrics.Render();
  EXPECT_EQ(ActionCount(text, "resume"), "0") << text;
  EXPECT_EQ(RealState(c.pid()), 'T');  // not continued
  std::istringstream in(text);
  std::string pruned;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("sojourn_monitor_guests_pruned_total{", 0) == 0 &&
        line.find("reason=\"pid_reused\"") != std::string::npos) {
      pruned = line.substr(line.rfind(' ') + 1);
    }
  }
  EXPECT_EQ(pruned, "1") << text;
}

}  // namespace
}  // namespace sojourn::monitor
