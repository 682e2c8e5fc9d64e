// A C++ schema whose fields depend on the build: `flagged` exists only when the target defines
// TDGEN_TEST_FLAG, which tensordict_generate(HEADERS) passes to the parse.
#pragma once

#include <tensordict/schema.h>

#include "flagged_dims.h"

namespace flagged::schema {

/// A probe of the build integration.
struct TD_TYPED_TENSORDICT Probe {
  td::schema::Tensor<float, kProbeWidth> base;
#if TDGEN_TEST_FLAG
  td::schema::Tensor<float, kProbeWidth * 2> flagged;
#endif
};

}  // namespace flagged::schema
