#include "services/broker/ranker.h"

#include <map>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace sojourn::broker {
namespace {

using sojourn::testing::IsOk;

// Answers from a table: host -> (TR, state); hosts missing from it fail.
class TableTrSource final : public TrSource {
 public:
  std::map<std::string, std::pair<double, sojourn::v1::HostState>> table;
  std::vector<sojourn::v1::PredictAvailabilityRequest> requests;
  absl::StatusOr<sojourn::v1::PredictAvailabilityResponse> Predict(
      const sojourn::v1::PredictAvailabilityRequest& request) override {
    requests.push_back(request);
    auto it = table.find(request.host());
    if (it == table.end()) return absl::UnavailableError("statemgr down");
    sojourn::v1::PredictAvailabilityResponse r;
    r.set_host(request.host());
    r.set_tr_ratio(it->second.first);
    r.set_initial_state(it->second.second);
    r.set_mttf_seconds(it->second.first * request.window_seconds());
    r.set_history_windows(5);
    return r;
  }
};

sojourn::v1::RegisteredHost Host(const std::string& name, bool live = true, double mem = 0,
                                 int cores = 0) {
  sojourn::v1::RegisteredHost h;
  h.set_host(name);
  h.set_statemgr_address("sm-" + name);
  h.set_live(live);
  h.mutable_attributes()->set_total_mem_mb(mem);
  h.mutable_attributes()->set_cpu_cores(cores);
  return h;
}

sojourn::v1::RankHostsRequest Job(int64_t seconds, double mem = 0, double cpu = 0) {
  sojourn::v1::RankHostsRequest r;
  r.mutable_job()->set_duration_seconds(seconds);
  r.mutable_job()->set_memory_mb(mem);
  r.mutable_job()->set_cpu_share_ratio(cpu);
  return r;
}

// Usable hosts come first, ordered by TR; the window is the job's duration
// and the host's state manager address is passed along.
TEST(RankerTest, OrdersByTrOverTheJobsDuration) {
  TableTrSource src;
  src.table["a"] = {0.4, sojourn::v1::HOST_STATE_S1_IDLE};
  src.table["b"] = {0.9, sojourn::v1::HOST_STATE_S2_BUSY};
  src.table["c"] = {0.7, sojourn::v1::HOST_STATE_S1_IDLE};
  auto r = RankHosts(Job(7200), {Host("a"), Host("b"), Host("c")}, src);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->hosts_size(), 3);
  EXPECT_EQ(r->hosts(0).host(), "b");
  EXPECT_EQ(r->hosts(0).rank(), 1);
  EXPECT_EQ(r->hosts(1).host(), "c");
  EXPECT_EQ(r->hosts(2).host(), "a");
  EXPECT_EQ(r->hosts(2).rank(), 3);
  for (const auto& req : src.requests) {
    EXPECT_EQ(req.window_seconds(), 7200);
    EXPECT_EQ(req.statemgr_address(), "sm-" + req.host());
  }
}

// Every host appears; those that cannot take the job say why.
TEST(RankerTest, ExplainsEveryIneligibleHost) {
  TableTrSource src;
  src.table["ok"] = {0.8, sojourn::v1::HOST_STATE_S1_IDLE};
  src.table["down"] = {0.0, sojourn::v1::HOST_STATE_S5_REVOKED};
  src.table["small"] = {0.9, sojourn::v1::HOST_STATE_S1_IDLE};
  auto r = RankHosts(Job(3600, /*mem=*/2048),
                     {Host("ok"), Host("down"), Host("expired", false), Host("small", true, 1024),
                      Host("broken")},
                     src);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->hosts_size(), 5);
  EXPECT_EQ(r->hosts(0).host(), "ok");
  EXPECT_TRUE(r->hosts(0).eligible());
  std::map<std::string, std::string> reasons;
  for (int i = 1; i < 5; ++i) {
    EXPECT_FALSE(r->hosts(i).eligible());
    EXPECT_EQ(r->hosts(i).rank(), 0);
    reasons[r->hosts(i).host()] = r->hosts(i).reason();
  }
  EXPECT_NE(reasons["down"].find("S5"), std::string::npos);
  EXPECT_NE(reasons["expired"].find("heartbeat"), std::string::npos);
  EXPECT_NE(reasons["small"].find("MiB"), std::string::npos);
  EXPECT_NE(reasons["broken"].find("statemgr down"), std::string::npos);
}

// A job nobody can run still gets a ranking listing every host with a reason.
TEST(RankerTest, NoHostCanRunTheJob) {
  TableTrSource src;
  auto r = RankHosts(Job(3600, 0, /*cpu=*/8), {Host("a", true, 0, 2), Host("b", true, 0, 4)}, src);
  ASSERT_THAT(r.status(), IsOk());
  ASSERT_EQ(r->hosts_size(), 2);
  for (const auto& h : r->hosts()) {
    EXPECT_FALSE(h.eligible());
    EXPECT_NE(h.reason().find("CPUs"), std::string::npos);
  }
}

// Malformed jobs and unknown policies are INVALID_ARGUMENT.
TEST(RankerTest, RejectsMalformedJobs) {
  TableTrSource src;
  EXPECT_TRUE(absl::IsInvalidArgument(RankHosts(Job(-5), {Host("a")}, src).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(RankHosts(Job(0), {Host("a")}, src).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(RankHosts(Job(60, -1), {Host("a")}, src).status()));
  auto req = Job(60);
  req.set_policy("astrology");
  EXPECT_TRUE(absl::IsInvalidArgument(RankHosts(req, {Host("a")}, src).status()));
  EXPECT_TRUE(src.requests.empty());
}

}  // namespace
}  // namespace sojourn::broker
