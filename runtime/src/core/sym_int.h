#pragma once
// LibTorch 2.x hands TensorIndex integers and slice bounds out as c10::SymInt, 1.13 as int64_t:
// plain_int gives an int64_t from either (a symbolic size is an error: none reaches a tensordict).

#include <cstdint>

namespace tensordict {
namespace detail {

inline int64_t plain_int(int64_t v) { return v; }
template <typename SymInt>
int64_t plain_int(const SymInt& v) {
  return v.expect_int();
}

}  // namespace detail
}  // namespace tensordict
