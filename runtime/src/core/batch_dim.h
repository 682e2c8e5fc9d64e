#pragma once
// The one batch-dim normalizer: every operation taking a batch dim wraps it here, raising the
// error kind Python tensordict raises for that operation.

#include <cstdint>

#include <c10/macros/Macros.h>
#include <c10/util/ArrayRef.h>

#include <tensordict/errors.h>

#include "core/format.h"

namespace tensordict {
namespace detail {

/// `dim` in [-ndims, ndims) wrapped to [0, ndims); otherwise `ErrorType` naming `op`, the dim
/// and the batch size, in Python's wording.
template <typename ErrorType>
int64_t wrap_batch_dim(int64_t dim, int64_t ndims, const char* op, c10::IntArrayRef batch_size) {
  if (C10_LIKELY(dim >= -ndims && dim < ndims)) return dim < 0 ? dim + ndims : dim;
  throw ErrorType(c10::str(op, ": dim ", dim, " is out of range: dim must be greater than or equal to ",
                           "-tensordict.batch_dims and smaller than tensordict.batch_dims (batch size ",
                           size_str(batch_size), ")"));
}

}  // namespace detail
}  // namespace tensordict
