// Included by rollout.h: sizes and extra fields of the record. tdgen's depfile lists this
// header, so editing it regenerates rollout.td.h.
#pragma once

#include <cstdint>

namespace rollout::schema {
constexpr int64_t kObsSize = 4;  // the observation's width
}  // namespace rollout::schema

// Fields a build adds to the record (markers inside a macro are seen: tdgen runs the
// preprocessor).
#define ROLLOUT_EXTRA_FIELDS
