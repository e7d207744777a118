// Tests of the smp-tr-v1 model JSON (issue 3).
#include "models/availability/model_json.h"

#include <string>

#include "gtest/gtest.h"
#include "models/availability/tr.h"

namespace sojourn::availability {
namespace {

std::string Model(const std::string& body, const std::string& init = "1") {
  return R"({"format":"smp-tr-v1","M":5,"d":6,"init":)" + init + "," + body + "}";
}

// Q/H with list and object pmfs; K = Q*H; TR by hand: from S1, failure by
// step 2 is 1->3 at 2 (0.1) or 1->2 at 1 then 2->5 at 1 (0.45*0.5).
TEST(ModelJsonTest, ParsesQAndHListsAndObjects) {
  const auto m = ParseTrModelJson(Model(
      R"("Q":{"1":{"2":0.9,"3":0.1},"2":{"1":0.5,"5":0.5}},)"
      R"("H":{"1":{"2":[0.5,0.5],"3":{"2":1.0}},"2":{"1":[1.0],"5":{"1":1}}})"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->M, 5);
  EXPECT_EQ(m->init, 1);
  EXPECT_EQ(m->kernel.step_seconds, 6);
  EXPECT_DOUBLE_EQ(m->kernel.At(1, 2, 2), 0.45);
  EXPECT_DOUBLE_EQ(m->kernel.At(1, 3, 2), 0.1);
  EXPECT_DOUBLE_EQ(m->kernel.At(1, 3, 1), 0.0);
  const auto tr = TrCurve(m->kernel, m->init, m->M);
  EXPECT_DOUBLE_EQ(tr[0], 1.0);
  EXPECT_DOUBLE_EQ(tr[1], 1.0 - 0.1 - 0.45 * 0.5);
}

// "K" replaces Q and H, rows may sum below 1, lengths beyond M are dropped,
// "K_first" is read, and the tolerance admits rounding above 1.
TEST(ModelJsonTest, ParsesKAndFirstKernel) {
  const auto m = ParseTrModelJson(Model(
      R"("K":{"1":{"3":{"2":0.25,"9":0.25},"2":[0.5000000000001]},"2":{"4":[0.1]}},)"
      R"("K_first":{"1":{"3":[0.3]}})"));
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(m->kernel.At(1, 3, 2), 0.25);
  EXPECT_EQ(m->kernel.rows.at(1).at(3).size(), 2u);  // l = 9 > M dropped
  EXPECT_DOUBLE_EQ(m->kernel.first_rows.at(1).at(3)[0], 0.3);
  // Init as a string key and a state that only appears as a destination.
  EXPECT_TRUE(ParseTrModelJson(Model(R"("K":{"1":{"2":[0.5]}})", "\"2\"")).ok());
}

// Every invalid model is rejected with a reason naming the problem.
TEST(ModelJsonTest, RejectsInvalidModels) {
  struct Case {
    std::string json;
    std::string reason;
  };
  const Case cases[] = {
      {Model(R"("K":{"1":{"3":[0.1,-0.2]}})"), "negative"},
      {Model(R"("K":{"1":{"3":[0.6,0.6]}})"), "sums to"},
      {Model(R"("K":{"1":{"3":[0.6],"2":[0.6]}})"), "row 1 sums to"},
      {Model(R"("Q":{"1":{"3":0.6,"2":0.6}},"H":{"1":{"3":[1],"2":[1]}})"), "Q row 1 sums"},
      {Model(R"("Q":{"1":{"3":0.6}},"H":{"1":{"3":[0.7,0.7]}})"), "H[1][3] sums"},
      {Model(R"("Q":{"1":{"3":-0.1}},"H":{"1":{"3":[1]}})"), "negative"},
      {Model(R"("Q":{"1":{"3":0.5}},"H":{"1":{"2":[1]}})"), "H[1][3] is missing"},
      {Model(R"("Q":{"1":{"3":0.5}},"H":{"1":{"3":{"0":1}}})"), "not a positive integer"},
      {Model(R"("Q":{"1":{"3":0.5}},"H":{"1":{"3":"x"}})"), "must be a list"},
      {Model(R"("Q":{"1":{"3":0.5}})"), "missing field \"H\""},
      {Model(R"("K":{"1":{"3":[0.5]}},"Q":{})"), "either"},
      {Model(R"("K":{"1":{"3":[0.5]}})", "9"), "not a state"},
      {Model(R"("K":{"1":{"3":[0.5]}})", "0"), "init"},
      {Model(R"("K":{"1":{"3":[0.5]}})", "1.5"), "init"},
      {Model(R"("K":{"x":{"3":[0.5]}})"), "not a positive integer"},
      {R"({"format":"smp-tr-v1","d":6,"init":1,"K":{}})", "missing field \"M\""},
      {R"({"format":"smp-tr-v1","M":0,"d":6,"init":1,"K":{}})", "\"M\""},
      {R"({"format":"smp-tr-v1","M":5,"d":-1,"init":1,"K":{}})", "\"d\""},
      {R"({"format":"smp-tr-v1","M":5,"d":6,"K":{}})", "missing field \"init\""},
      {R"({"format":"smp-tr-v2","M":5,"d":6,"init":1,"K":{}})", "format"},
      {R"({"M":5})", "missing field \"format\""},
      {R"([1,2])", "object"},
      {R"({"format":)", "invalid JSON"},
      // Non-canonical or repeated state keys used to merge rows unchecked.
      {Model(R"("K":{"1":{"3":[0.5]},"01":{"3":[0.5]}})"), "key \"01\" is not a positive integer"},
      {Model(R"("K":{" +1":{"3":[0.5]}})"), "key \" +1\" is not a positive integer"},
      {Model(R"("K":{"1":{"03":[0.5]}})"), "not a positive integer"},
      {Model(R"("K":{"1":{"3":{"01":0.5}}})"), "not a positive integer"},
      {Model(R"("K":{"1":{"3":[0.6]},"1":{"3":[0.6]}})"), "duplicate key \"1\""},
      {Model(R"("K":{"1":{"3":[0.6],"3":[0.6]}})"), "duplicate key \"3\""},
      // A misspelt field used to be ignored: "K_First" solved without the
      // first-sojourn kernel.
      {Model(R"("K":{"1":{"3":[0.1]}},"K_First":{"1":{"3":[0.9]}})"),
       "field \"K_First\" is not part of the format: did you mean \"K_first\"?"},
      {Model(R"("k":{"1":{"3":[0.1]}})"), "did you mean \"K\"?"},
      // Keys are quoted on one line, shortened.
      {Model(R"("K":{"1\nX":{"3":[0.5]}})"), "key \"1\\nX\" is not a positive integer"},
      {Model(R"("K":{")" + std::string(100000, '7') + R"(":{"3":[0.5]}})"),
       "is not a positive integer"},
      // Work the solver could not finish: 20 transient states at M = 1e6
      // (crashed in the FFT allocation) and 5 states at M = 1e7.
      {R"({"format":"smp-tr-v1","M":1000000,"d":6,"init":1,"K":{)" + [] {
         std::string rows;
         for (int i = 1; i <= 23; ++i) {
           if (i >= 3 && i <= 5) continue;
           rows += (rows.empty() ? "" : ",") + ("\"" + std::to_string(i) + "\":{\"3\":[0.5]}");
         }
         return rows;
       }() + "}}",
       "20 transient states over M = 1000000 steps need about"},
      {R"({"format":"smp-tr-v1","M":10000000,"d":6,"init":1,"K":{"1":{"3":[0.5]},"2":{"3":[0.5]},)"
       R"("6":{"3":[0.5]},"7":{"3":[0.5]},"8":{"3":[0.5]}}})",
       "above the limits"},
  };
  for (const Case& c : cases) {
    const auto m = ParseTrModelJson(c.json);
    ASSERT_FALSE(m.ok()) << c.json;
    EXPECT_EQ(m.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(m.status().message().find(c.reason), std::string::npos)
        << c.json << " -> " << m.status().message();
    EXPECT_EQ(m.status().message().find('\n'), std::string::npos);
    EXPECT_LT(m.status().message().size(), 300u);
  }
  // Other fields are ignored.
  EXPECT_TRUE(ParseTrModelJson(Model(R"("K":{"1":{"3":[0.5]}},"comment":"two states")")).ok());
}

// The budget still admits the largest realistic models: two transient states
// (S1, S2) at the maximum M, and many states over a short horizon.
TEST(ModelJsonTest, CostEstimateAdmitsRealisticModels) {
  SemiMarkovKernel k;
  k.rows[1][3] = {0.5};
  k.rows[2][3] = {0.5};
  TrCurveCost c = EstimateTrCurveCost(k, 10000000);
  EXPECT_EQ(c.transient_states, 2);
  EXPECT_LT(c.bytes, kMaxTrCurveBytes);
  EXPECT_LT(c.work, kMaxTrCurveWork);
  for (int s = 6; s < 66; ++s) k.rows[s][3] = {0.5};
  c = EstimateTrCurveCost(k, 600);
  EXPECT_EQ(c.transient_states, 62);
  EXPECT_LT(c.bytes, kMaxTrCurveBytes);
  EXPECT_LT(c.work, kMaxTrCurveWork);
}

}  // namespace
}  // namespace sojourn::availability
