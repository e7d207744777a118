// Conversions between the protobuf contracts and the model libraries' types.
// Used at the service edges only.
#ifndef SOJOURN_SERVICES_CONVERT_H_
#define SOJOURN_SERVICES_CONVERT_H_

#include "absl/status/statusor.h"
#include "common/host_sample.h"
#include "models/availability/frailty.h"
#include "models/availability/load_band.h"
#include "models/availability/sojourn_stats.h"
#include "models/availability/state.h"
#include "models/availability/window.h"
#include "sojourn/v1/common.pb.h"
#include "sojourn/v1/statemgr.pb.h"

namespace sojourn {

v1::HostSample ToProto(const HostSample& s);
HostSample FromProto(const v1::HostSample& p);

v1::HostState ToProto(availability::HostState s);
// INVALID_ARGUMENT for UNSPECIFIED or unknown values.
absl::StatusOr<availability::HostState> FromProto(v1::HostState s);

v1::DayType ToProto(availability::DayType d);

v1::SojournStats ToProto(const availability::SojournStats& stats);
// INVALID_ARGUMENT when a count names an impossible state or length.
absl::StatusOr<availability::SojournStats> FromProto(const v1::SojournStats& p);

v1::FailureExposure ToProto(const availability::FailureExposure& e);
// INVALID_ARGUMENT unless both lists have 96 finite, non-negative values with
// failures <= up_steps.
absl::StatusOr<availability::FailureExposure> FromProto(const v1::FailureExposure& p);

v1::BandExposure ToProto(const availability::BandExposure& e);
// INVALID_ARGUMENT unless both lists have 16 finite, non-negative values.
absl::StatusOr<availability::BandExposure> FromProto(const v1::BandExposure& p);
// availability::LoadBandOf's value (0, 1, kLoadBandUnknown) and back
// (UNKNOWN and unknown enum values -> kLoadBandUnknown).
v1::LoadBand LoadBandToProto(uint8_t band);
uint8_t LoadBandFromProto(v1::LoadBand band);

}  // namespace sojourn

#endif  // SOJOURN_SERVICES_CONVERT_H_
