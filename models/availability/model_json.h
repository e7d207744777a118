// The smp-tr-v1 model JSON of issue 3:
//   {"format":"smp-tr-v1","M":600,"d":6,"init":1,
//    "Q":{"1":{"2":0.9,"3":0.05},"2":{...}},
//    "H":{"1":{"2":[p(l=1),p(l=2),...],"3":{"40":0.5,"41":0.5}},"2":{...}}}
// An H pmf is a list starting at l = 1 or an object keyed by l; a Q row may sum
// to less than 1; "K" (Q*H, laid out like H) may replace Q and H. An optional
// "K_first" (laid out like K) gives the first-sojourn kernel.
#ifndef SOJOURN_MODELS_AVAILABILITY_MODEL_JSON_H_
#define SOJOURN_MODELS_AVAILABILITY_MODEL_JSON_H_

#include <string>

#include "absl/status/statusor.h"
#include "models/availability/kernel.h"

namespace sojourn::availability {

struct TrModel {
  SemiMarkovKernel kernel;
  int init = 1;
  int M = 0;
};

// Parses and validates: rejects malformed JSON, a wrong "format", missing or
// mistyped fields, M outside 1..10^7, d <= 0, negative or non-finite probabilities, pmfs
// or Q rows or kernel rows summing above 1 (+1e-9), lengths < 1, an init that
// is not an integer state, state or length keys that are not canonical
// positive integers ("01", " +1"), a key repeated in an object, and models
// whose TR curve would exceed kMaxTrCurveBytes or kMaxTrCurveWork (tr.h); all
// as InvalidArgumentError with a one-line reason.
absl::StatusOr<TrModel> ParseTrModelJson(const std::string& text);

}  // namespace sojourn::availability

#endif  // SOJOURN_MODELS_AVAILABILITY_MODEL_JSON_H_
