#pragma once
// Which leaves a run may cover the padding between (Note [Packed runs], ops/packed_runs.h): the
// bytes of Python's padding, read as a floating or complex number, cannot trap; read as an
// integer they can make a division raise or trap, and read as a bool they need not be 0 or 1.

#include <c10/core/ScalarType.h>

namespace tensordict {
namespace detail {

inline bool may_read_padding(at::ScalarType dtype) { return at::isFloatingType(dtype) || at::isComplexType(dtype); }

}  // namespace detail
}  // namespace tensordict
