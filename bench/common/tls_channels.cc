// tls_channels_bench: what a client's connections cost with and without TLS,
// as a predictor holds one to every state manager (deploy/README.md "TLS").
//
//   build/bin/tls_channels_bench --certs DIR [--channels 1000] [--rounds 3]
//
// DIR holds scripts/make-certs files for localhost (DIR/ca.pem,
// DIR/localhost.pem, DIR/localhost.key). For each round and each mode
// (plaintext, then TLS) a server process listens on 0.0.0.0 and a client
// process opens --channels channels, each to its own loopback address
// 127.0.X.Y (one connection each, as to distinct state managers; with TLS the
// server's name is taken as "localhost", which its certificate names), and
// waits until every one is connected (10 s at most each). Prints JSON: per run
// the client's resident memory (MiB) before and after (after one warm-up
// channel, which is not counted), the KiB per channel and the seconds to
// connect them all; then the medians per mode and the TLS / plaintext ratios.
// Each measurement runs in a fresh process (fork before gRPC starts), so one
// mode's freed memory does not hide the other's.
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/metrics.h"
#include "common/proc_stat.h"
#include "common/server.h"
#include "common/tls.h"

namespace {

struct Run {
  double rss_before_mb = 0, rss_after_mb = 0, kib_per_channel = 0, connect_s = 0;
  int connected = 0;
};

double RssMb() {
  auto usage = sojourn::ReadProcessUsage();
  return usage.ok() ? usage->resident_bytes / (1 << 20) : -1;
}

sojourn::TlsMaterial Load(const std::string& dir, bool tls) {
  if (!tls) return {};
  sojourn::TlsFiles files;
  files.cert = dir + "/localhost.pem";
  files.key = dir + "/localhost.key";
  files.ca = dir + "/ca.pem";
  absl::StatusOr<sojourn::TlsMaterial> m =
      sojourn::LoadTls(files, sojourn::TlsRole::kService, absl::Now());
  if (!m.ok()) {
    std::fprintf(stderr, "tls_channels_bench: %s\n", std::string(m.status().message()).c_str());
    std::_Exit(2);
  }
  return *m;
}

// Child: serves until killed; writes the bound port to `fd`.
[[noreturn]] void Serve(const std::string& dir, bool tls, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  sojourn::Metrics metrics("bench");
  sojourn::ServerOptions options;
  options.listen_address = "0.0.0.0:0";
  options.tls = Load(dir, tls);
  auto server = sojourn::GrpcServer::Start(options, {}, metrics);
  const int port = server.ok() ? (*server)->port() : 0;
  if (write(fd, &port, sizeof(port)) != sizeof(port)) std::_Exit(1);
  pause();
  std::_Exit(0);
}

// Child: opens `channels` channels to the server on `port`; writes a Run to `fd`.
[[noreturn]] void Connect(const std::string& dir, bool tls, int port, int channels, int fd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  grpc_init();
  const sojourn::TlsMaterial material = Load(dir, tls);
  std::shared_ptr<grpc::ChannelCredentials> creds = sojourn::ChannelCredentialsFor(material);
  Run run;
  std::vector<std::shared_ptr<grpc::Channel>> held;
  {
    // One channel first, not counted: gRPC's and OpenSSL's one-time set-up.
    grpc::ChannelArguments args;
    if (tls) args.SetSslTargetNameOverride("localhost");
    auto warm = grpc::CreateCustomChannel(absl::StrCat("127.0.0.1:", port), creds, args);
    warm->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10));
    held.push_back(std::move(warm));
  }
  run.rss_before_mb = RssMb();
  const auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < channels; ++i) {
    // A server that stopped answering would take 10 s a channel: give up after 10 minutes.
    if (std::chrono::steady_clock::now() - start > std::chrono::minutes(10)) break;
    grpc::ChannelArguments args;
    if (tls) args.SetSslTargetNameOverride("localhost");
    const std::string target = absl::StrCat("127.0.", i / 250 + 1, ".", i % 250 + 1, ":", port);
    auto channel = grpc::CreateCustomChannel(target, creds, args);
    if (channel->WaitForConnected(std::chrono::system_clock::now() + std::chrono::seconds(10))) {
      ++run.connected;
    }
    held.push_back(std::move(channel));
  }
  run.connect_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  run.rss_after_mb = RssMb();
  run.kib_per_channel = (run.rss_after_mb - run.rss_before_mb) * 1024 / std::max(1, channels);
  if (write(fd, &run, sizeof(run)) != sizeof(run)) std::_Exit(1);
  std::_Exit(0);
}

// Reads exactly `n` bytes from `fd`; false at EOF (the writer died) or on an error.
bool ReadAll(int fd, void* buf, size_t n) { return read(fd, buf, n) == static_cast<ssize_t>(n); }

bool Measure(const std::string& dir, bool tls, int channels, Run* out) {
  int server_pipe[2];
  if (pipe(server_pipe) != 0) return false;
  const pid_t server = fork();
  if (server < 0) {
    close(server_pipe[0]);
    close(server_pipe[1]);
    return false;
  }
  if (server == 0) {
    close(server_pipe[0]);
    Serve(dir, tls, server_pipe[1]);
  }
  close(server_pipe[1]);  // EOF when the server dies before writing its port
  int port = 0;
  bool ok = ReadAll(server_pipe[0], &port, sizeof(port)) && port > 0;
  close(server_pipe[0]);
  int client_pipe[2];
  if (ok && pipe(client_pipe) == 0) {
    const pid_t client = fork();
    if (client == 0) {
      close(client_pipe[0]);
      Connect(dir, tls, port, channels, client_pipe[1]);
    }
    close(client_pipe[1]);  // EOF when the client dies before reporting
    ok = client > 0 && ReadAll(client_pipe[0], out, sizeof(*out));
    close(client_pipe[0]);
    if (client > 0) waitpid(client, nullptr, 0);
  } else {
    ok = false;
  }
  kill(server, SIGKILL);
  waitpid(server, nullptr, 0);
  return ok;
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0 : n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

[[noreturn]] void Usage(const char* why) {
  std::fprintf(stderr,
               "tls_channels_bench: %s\nusage: tls_channels_bench --certs DIR [--channels N "
               "(1..10000, default 1000)] [--rounds N (1..20, default 3)]\n",
               why);
  std::exit(2);
}

}  // namespace

int main(int argc, char** argv) {
  std::string dir;
  int channels = 1000, rounds = 3;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-h") {
      std::printf("tls_channels_bench --certs DIR [--channels N] [--rounds N]: see the source\n");
      return 0;
    }
    if (i + 1 >= argc) Usage(("missing value after " + a).c_str());
    const std::string v = argv[++i];
    if (a == "--certs") {
      dir = v;
    } else if (a == "--channels") {
      if (!absl::SimpleAtoi(v, &channels) || channels < 1 || channels > 10000) {
        Usage("--channels wants an integer in [1, 10000]");
      }
    } else if (a == "--rounds") {
      if (!absl::SimpleAtoi(v, &rounds) || rounds < 1 || rounds > 20) {
        Usage("--rounds wants an integer in [1, 20]");
      }
    } else {
      Usage(("unknown option " + a).c_str());
    }
  }
  if (dir.empty()) Usage("--certs DIR is required (scripts/make-certs DIR localhost)");
  Load(dir, true);  // exits 2 on bad files, before any measurement

  std::map<bool, std::vector<Run>> runs;
  std::string out = "{\"channels\": " + std::to_string(channels) + ", \"runs\": [";
  bool first = true;
  for (int r = 0; r < rounds; ++r) {
    for (bool tls : {false, true}) {
      Run run;
      if (!Measure(dir, tls, channels, &run)) {
        std::fprintf(stderr, "tls_channels_bench: a measurement failed\n");
        return 1;
      }
      if (run.connected != channels) {
        std::fprintf(stderr, "tls_channels_bench: %s: %d of %d channels connected\n",
                     tls ? "tls" : "plaintext", run.connected, channels);
        return 1;
      }
      runs[tls].push_back(run);
      const std::string line = absl::StrFormat(
          "{\"round\": %d, \"mode\": \"%s\", \"rss_before_mb\": %.1f, \"rss_after_mb\": %.1f, "
          "\"kib_per_channel\": %.1f, \"connect_s\": %.3f}",
          r, tls ? "tls" : "plaintext", run.rss_before_mb, run.rss_after_mb, run.kib_per_channel,
          run.connect_s);
      std::fprintf(stderr, "%s\n", line.c_str());
      absl::StrAppend(&out, first ? "" : ", ", line);
      first = false;
    }
  }
  auto median = [&](bool tls, double Run::*field) {
    std::vector<double> v;
    for (const Run& r : runs[tls]) v.push_back(r.*field);
    return Median(v);
  };
  const double kib_plain = median(false, &Run::kib_per_channel);
  const double kib_tls = median(true, &Run::kib_per_channel);
  const double s_plain = median(false, &Run::connect_s);
  const double s_tls = median(true, &Run::connect_s);
  absl::StrAppend(
      &out,
      absl::StrFormat("], \"median_kib_per_channel\": {\"plaintext\": %.1f, \"tls\": "
                      "%.1f}, \"median_connect_s\": {\"plaintext\": %.3f, \"tls\": "
                      "%.3f}, \"tls_ratio\": {\"kib_per_channel\": %.2f, "
                      "\"connect_s\": %.2f}}",
                      kib_plain, kib_tls, s_plain, s_tls, kib_plain > 0 ? kib_tls / kib_plain : 0,
                      s_plain > 0 ? s_tls / s_plain : 0));
  std::printf("%s\n", out.c_str());
  return 0;
}
