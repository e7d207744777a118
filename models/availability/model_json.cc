#include "models/availability/model_json.h"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status.h"
#include "common/text.h"
#include "models/availability/tr.h"

namespace sojourn::availability {
namespace {

using json = nlohmann::json;

constexpr double kTolerance = 1e-9;
constexpr long long kMaxLength = 1LL << 31;

absl::Status Bad(const std::string& why) { return absl::InvalidArgumentError(why); }

// A positive integer written as a JSON object key ("1", "40"), canonically:
// digits only, no sign, space or leading zero. Otherwise "1" and "01" (or
// " +1") would name the same state in two keys and their rows would merge
// unchecked (a row summing to 1.6).
absl::StatusOr<long long> ParseKey(const std::string& key, const std::string& what) {
  const bool canonical = !key.empty() && key.size() <= 10 && key[0] >= '1' && key[0] <= '9' &&
                         key.find_first_not_of("0123456789") == std::string::npos;
  const long long v = canonical ? std::stoll(key) : 0;
  if (!canonical || v >= kMaxLength) {
    return Bad(absl::StrCat(what, " key \"", Excerpt(key),
                            "\" is not a positive integer (digits only, no sign, space or "
                            "leading zero, below 2^31)"));
  }
  return v;
}

absl::StatusOr<double> Probability(const json& v, const std::string& where) {
  if (!v.is_number()) return Bad(absl::StrCat(where, " is not a number"));
  const double p = v.get<double>();
  if (!std::isfinite(p)) return Bad(absl::StrCat(where, " is not finite"));
  if (p < 0) return Bad(absl::StrFormat("%s is negative (%g)", where, p));
  if (p > 1 + kTolerance) return Bad(absl::StrFormat("%s is above 1 (%g)", where, p));
  return p;
}

// A pmf over l >= 1: a list starting at l = 1 or an object keyed by l. Values
// with l > M are checked but not kept. Returns pmf[l-1].
absl::StatusOr<std::vector<double>> ParsePmf(const json& v, const std::string& where, int M,
                                             double* sum) {
  std::vector<double> pmf;
  *sum = 0;
  auto put = [&](long long l, double p) {
    *sum += p;
    if (l <= M) {
      if (static_cast<long long>(pmf.size()) < l) pmf.resize(l, 0.0);
      pmf[l - 1] += p;
    }
  };
  if (v.is_array()) {
    for (size_t idx = 0; idx < v.size(); ++idx) {
      ASSIGN_OR_RETURN(double p, Probability(v[idx], absl::StrCat(where, "[l=", idx + 1, "]")));
      put(static_cast<long long>(idx + 1), p);
    }
  } else if (v.is_object()) {
    for (const auto& [key, val] : v.items()) {
      ASSIGN_OR_RETURN(long long l, ParseKey(key, absl::StrCat(where, " length")));
      ASSIGN_OR_RETURN(double p, Probability(val, absl::StrCat(where, "[l=", l, "]")));
      put(l, p);
    }
  } else {
    return Bad(absl::StrCat(where, " must be a list or an object keyed by length"));
  }
  if (*sum > 1 + kTolerance) {
    return Bad(absl::StrFormat("%s sums to %.12g > 1", where, *sum));
  }
  return pmf;
}

// "K"-style: {"i": {"j": pmf}}; every row (over j and l) must sum to <= 1.
absl::StatusOr<std::map<int, KernelRow>> ParseK(const json& v, const std::string& name, int M) {
  if (!v.is_object()) return Bad(absl::StrCat("\"", name, "\" must be an object"));
  std::map<int, KernelRow> rows;
  for (const auto& [from_key, row] : v.items()) {
    ASSIGN_OR_RETURN(long long from, ParseKey(from_key, absl::StrCat("\"", name, "\" state")));
    if (!row.is_object()) {
      return Bad(absl::StrCat(name, "[", from, "] must be an object keyed by to-state"));
    }
    double total = 0;
    KernelRow& out = rows[static_cast<int>(from)];
    for (const auto& [to_key, pmf_json] : row.items()) {
      ASSIGN_OR_RETURN(long long to, ParseKey(to_key, absl::StrCat(name, "[", from, "] state")));
      double sum = 0;
      ASSIGN_OR_RETURN(auto pmf, ParsePmf(pmf_json, absl::StrCat(name, "[", from, "][", to, "]"),
                                          M, &sum));
      total += sum;
      out[static_cast<int>(to)] = std::move(pmf);
    }
    if (total > 1 + kTolerance) {
      return Bad(absl::StrFormat("%s row %d sums to %.12g > 1", name, from, total));
    }
  }
  return rows;
}

absl::StatusOr<std::map<int, KernelRow>> ParseQH(const json& q, const json& h, int M) {
  if (!q.is_object()) return Bad("\"Q\" must be an object");
  if (!h.is_object()) return Bad("\"H\" must be an object");
  std::map<int, KernelRow> rows;
  for (const auto& [from_key, qrow] : q.items()) {
    ASSIGN_OR_RETURN(long long from, ParseKey(from_key, "\"Q\" state"));
    if (!qrow.is_object()) return Bad(absl::StrCat("Q[", from, "] must be an object"));
    double total = 0;
    KernelRow& out = rows[static_cast<int>(from)];
    for (const auto& [to_key, qv] : qrow.items()) {
      ASSIGN_OR_RETURN(long long to, ParseKey(to_key, absl::StrCat("Q[", from, "] state")));
      ASSIGN_OR_RETURN(double qij, Probability(qv, absl::StrCat("Q[", from, "][", to, "]")));
      total += qij;
      if (qij == 0) continue;
      const json* pmf_json = nullptr;
      if (auto hr = h.find(from_key); hr != h.end() && hr->is_object()) {
        if (auto hc = hr->find(to_key); hc != hr->end()) pmf_json = &*hc;
      }
      if (pmf_json == nullptr) {
        return Bad(absl::StrCat("H[", from, "][", to, "] is missing (Q[", from, "][", to,
                                "] > 0)"));
      }
      double sum = 0;
      ASSIGN_OR_RETURN(auto pmf, ParsePmf(*pmf_json, absl::StrCat("H[", from, "][", to, "]"),
                                          M, &sum));
      for (double& p : pmf) p *= qij;
      out[static_cast<int>(to)] = std::move(pmf);
    }
    if (total > 1 + kTolerance) {
      return Bad(absl::StrFormat("Q row %d sums to %.12g > 1", from, total));
    }
  }
  for (const auto& [from_key, hrow] : h.items()) {
    ASSIGN_OR_RETURN(long long from, ParseKey(from_key, "\"H\" state"));
    if (!hrow.is_object()) return Bad(absl::StrCat("H[", from, "] must be an object"));
    for (const auto& [to_key, pmf_json] : hrow.items()) {
      ASSIGN_OR_RETURN(long long to, ParseKey(to_key, absl::StrCat("H[", from, "] state")));
      // Validate pmfs whose Q entry is absent or zero too.
      double sum = 0;
      ASSIGN_OR_RETURN(auto pmf, ParsePmf(pmf_json, absl::StrCat("H[", from, "][", to, "]"),
                                          M, &sum));
      (void)pmf;
    }
  }
  return rows;
}

absl::StatusOr<TrModel> ParseJson(const json& doc) {
  if (!doc.is_object()) return Bad("model must be a JSON object");
  // Other fields are ignored (a comment, a name), but not one that differs
  // from a field of the format only in case or '_' / '-' ("K_First", "k"):
  // the model would be solved without what it meant to give.
  auto normal = [](const std::string& key) {
    std::string out;
    for (char c : key) {
      if (c == '_' || c == '-') continue;
      out.push_back(static_cast<char>(std::tolower(static_cast<unsigned char>(c))));
    }
    return out;
  };
  for (const auto& [key, value] : doc.items()) {
    for (const char* known : {"format", "M", "d", "init", "K", "Q", "H", "K_first"}) {
      if (key != known && normal(key) == normal(known)) {
        return Bad(absl::StrCat("field \"", Excerpt(key), "\" is not part of the format: did you "
                                "mean \"", known, "\"?"));
      }
    }
  }
  auto field = [&](const char* name) -> const json* {
    auto it = doc.find(name);
    return it == doc.end() ? nullptr : &*it;
  };
  const json* format = field("format");
  if (format == nullptr) return Bad("missing field \"format\"");
  if (!format->is_string() || format->get<std::string>() != "smp-tr-v1") {
    return Bad("\"format\" must be \"smp-tr-v1\"");
  }
  TrModel model;
  const json* m = field("M");
  if (m == nullptr) return Bad("missing field \"M\"");
  if (!m->is_number_integer() || m->get<long long>() < 1 || m->get<long long>() > 10000000) {
    return Bad("\"M\" must be an integer in 1..10000000");
  }
  model.M = static_cast<int>(m->get<long long>());
  const json* d = field("d");
  if (d == nullptr) return Bad("missing field \"d\"");
  if (!d->is_number() || !(d->get<double>() > 0) || !std::isfinite(d->get<double>())) {
    return Bad("\"d\" must be a positive number of seconds");
  }
  model.kernel.step_seconds = std::llround(d->get<double>());
  const json* init = field("init");
  if (init == nullptr) return Bad("missing field \"init\"");
  if (init->is_number_integer() && init->get<long long>() >= 1 &&
      init->get<long long>() < kMaxLength) {
    model.init = static_cast<int>(init->get<long long>());
  } else if (init->is_string()) {
    ASSIGN_OR_RETURN(long long v, ParseKey(init->get<std::string>(), "\"init\""));
    model.init = static_cast<int>(v);
  } else {
    return Bad("\"init\" must be a positive integer state");
  }
  const json* k = field("K");
  const json* q = field("Q");
  const json* h = field("H");
  if (k != nullptr) {
    if (q != nullptr || h != nullptr) return Bad("give either \"K\" or \"Q\" and \"H\", not both");
    ASSIGN_OR_RETURN(model.kernel.rows, ParseK(*k, "K", model.M));
  } else {
    if (q == nullptr) return Bad("missing field \"Q\" (or \"K\")");
    if (h == nullptr) return Bad("missing field \"H\" (or \"K\")");
    ASSIGN_OR_RETURN(model.kernel.rows, ParseQH(*q, *h, model.M));
  }
  if (const json* kf = field("K_first"); kf != nullptr) {
    ASSIGN_OR_RETURN(model.kernel.first_rows, ParseK(*kf, "K_first", model.M));
  }
  // The initial state must be part of the model.
  std::set<int> states = {3, 4, 5};
  for (const auto* rows : {&model.kernel.rows, &model.kernel.first_rows}) {
    for (const auto& [from, row] : *rows) {
      states.insert(from);
      for (const auto& [to, pmf] : row) states.insert(to);
    }
  }
  if (!states.count(model.init)) {
    return Bad(absl::StrCat("\"init\" ", model.init, " is not a state of the model"));
  }
  // Refuse what the solver could not finish: n transient states over M steps
  // need ~70 n^2 M bytes (20 states at M = 1e6: 28 GB, and a crash when the
  // allocation failed) and ~n^3 M operations.
  const TrCurveCost cost = EstimateTrCurveCost(model.kernel, model.M);
  if (cost.bytes > kMaxTrCurveBytes || cost.work > kMaxTrCurveWork) {
    return Bad(absl::StrFormat(
        "%d transient states over M = %d steps need about %.3g GB and %.3g operations "
        "(70 n^2 M bytes, n^3 M operations), above the limits of %.3g GB and %.3g: lower M or "
        "use fewer states",
        cost.transient_states, model.M, cost.bytes / 1e9, cost.work, kMaxTrCurveBytes / 1e9,
        kMaxTrCurveWork));
  }
  return model;
}

}  // namespace

absl::StatusOr<TrModel> ParseTrModelJson(const std::string& text) {
  json doc;
  // nlohmann keeps the last of two equal keys in an object; a model with
  // "1" twice would lose a row silently. Track the keys of each open object.
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  const json::parser_callback_t track = [&](int /*depth*/, json::parse_event_t event,
                                            json& parsed) {
    if (event == json::parse_event_t::object_start) {
      open_objects.emplace_back();
    } else if (event == json::parse_event_t::object_end) {
      if (!open_objects.empty()) open_objects.pop_back();
    } else if (event == json::parse_event_t::key && !open_objects.empty() &&
               parsed.is_string() && !open_objects.back().insert(parsed.get<std::string>()).second &&
               duplicate.empty()) {
      duplicate = parsed.get<std::string>();
    }
    return true;
  };
  try {
    doc = json::parse(text, track);
  } catch (const json::exception& e) {
    return Bad(absl::StrCat("invalid JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return Bad(absl::StrCat("duplicate key \"", Excerpt(duplicate), "\" in an object"));
  }
  try {
    return ParseJson(doc);
  } catch (const json::exception& e) {
    return Bad(absl::StrCat("invalid model: ", e.what()));
  }
}

}  // namespace sojourn::availability
