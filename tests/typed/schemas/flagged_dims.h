// Included by flagged.h: its sizes come from here (an included header the depfile lists).
#pragma once

#include <cstdint>

namespace flagged::schema {
constexpr int64_t kProbeWidth = 3;
}  // namespace flagged::schema
