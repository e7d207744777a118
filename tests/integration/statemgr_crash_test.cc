// Acceptance: killing the statemgr with SIGKILL and restarting it keeps every
// sample it had acknowledged. Runs the real statemgr binary.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "gtest/gtest.h"
#include "sojourn/v1/statemgr.grpc.pb.h"
#include "tests/test_util.h"

namespace sojourn {
namespace {

using sojourn::testing::TempDir;

// Starts the statemgr binary and reads its port from --port_file.
class StatemgrProcess {
 public:
  StatemgrProcess(const std::string& db, const std::string& port_file) {
    std::remove(port_file.c_str());
    pid_ = fork();
    if (pid_ == 0) {
      execl(STATEMGR_BIN, STATEMGR_BIN, "--listen=127.0.0.1:0", "--metrics_listen=",
            ("--db_path=" + db).c_str(), ("--port_file=" + port_file).c_str(),
            "--sync_writes=false", static_cast<char*>(nullptr));
      _exit(127);
    }
    // The port file appears once the server is bound (written atomically).
    // Bounded wait for another process: poll with a deadline.
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    while (absl::Now() < deadline) {
      std::ifstream f(port_file);
      std::string line;
      if (std::getline(f, line) && absl::StartsWith(line, "grpc_port=")) {
        port_ = std::stoi(line.substr(10));
        break;
      }
      int status;
      if (waitpid(pid_, &status, WNOHANG) == pid_) break;  // died
      usleep(20000);
    }
  }
  ~StatemgrProcess() { Kill(SIGKILL); }
  void Kill(int sig) {
    if (pid_ > 0) {
      kill(pid_, sig);
      waitpid(pid_, nullptr, 0);
      pid_ = -1;
    }
  }
  int port() const { return port_; }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

TEST(StatemgrCrashTest, AcknowledgedSamplesSurviveSigkill) {
  TempDir dir;
  const std::string db = dir.File("db");
  int64_t acked_until = 0;
  {
    StatemgrProcess p(db, dir.File("ports"));
    ASSERT_GT(p.port(), 0) << "statemgr did not start";
    auto stub = v1::StateManager::NewStub(grpc::CreateChannel(
        absl::StrCat("127.0.0.1:", p.port()), grpc::InsecureChannelCredentials()));
    for (int batch = 0; batch < 5; ++batch) {
      grpc::ClientContext ctx;
      v1::PushSamplesResponse resp;
      auto writer = stub->PushSamples(&ctx, &resp);
      v1::PushSamplesRequest req;
      req.set_host("victim");
      for (int i = 0; i < 100; ++i) {
        auto* s = req.add_samples();
        s->set_unix_seconds(1700000000 + batch * 600 + i * 6);
        s->set_cpu_load_ratio(0.01 * i);
      }
      ASSERT_TRUE(writer->Write(req));
      writer->WritesDone();
      ASSERT_TRUE(writer->Finish().ok());
      acked_until = resp.last_persisted_unix_seconds().at("victim");
    }
    p.Kill(SIGKILL);
  }
  StatemgrProcess again(db, dir.File("ports2"));
  ASSERT_GT(again.port(), 0) << "statemgr did not restart";
  auto stub = v1::StateManager::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", again.port()), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::GetSeriesRequest req;
  req.set_host("victim");
  v1::GetSeriesResponse resp;
  ASSERT_TRUE(stub->GetSeries(&ctx, req, &resp).ok());
  ASSERT_EQ(resp.samples_size(), 500);
  EXPECT_EQ(resp.samples(499).unix_seconds(), acked_until);
  EXPECT_DOUBLE_EQ(resp.samples(7).cpu_load_ratio(), 0.07);
}

}  // namespace
}  // namespace sojourn
