#pragma once
// Printing a rollout buffer. Kept apart from main.cpp so that a schema edit recompiles only the
// files that include the generated header.

#include <iosfwd>

#include "rollout.td.h"

namespace rollout {

/// Prints the buffer's shape, fields and a few statistics.
void print_summary(Rollout buffer, std::ostream& os);

}  // namespace rollout
