// Comparisons, value tests and all/any of contiguous CPU tensors by a plain loop (why:
// ops/compare_kernel.h). The inner loops are written so that GCC and Clang vectorize them: a
// fixed-size block with no exit inside for the tests that may stop early, one store per element
// for the others. Long inputs split over LibTorch's intra-op threads with its own grain size, as
// `at::` ops do.

#include "ops/compare_kernel.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <type_traits>

#include <ATen/Parallel.h>
#include <ATen/ops/empty.h>

namespace tensordict {
namespace ops {

namespace {

// The elements one intra-op thread takes at least: LibTorch's own grain (at::internal::GRAIN_SIZE).
constexpr int64_t kGrain = 32768;

// A tensor the loops may read as a flat array of its elements: on the CPU, contiguous, and its
// bytes are its values (no lazy negation or conjugation, no zero tensor without memory). Named
// dims go to LibTorch, whose results carry the names.
bool loopable(const at::Tensor& t) {
  return t.defined() && t.device().is_cpu() && t.layout() == at::kStrided && !t.is_nested() &&
         !t.is_quantized() && t.is_contiguous() && !t.is_neg() && !t.is_conj() && !t._is_zerotensor() &&
         t.has_storage() && !t.has_names();
}

// Calls fn(T{}) with the element type of `dtype` (bools read as bytes: 0 or 1); nothing for a
// dtype with no loop here (half, bfloat16, complex, quantized).
template <typename Fn>
void with_element_type(at::ScalarType dtype, Fn&& fn) {
  switch (dtype) {
    case at::kFloat: return fn(float{});
    case at::kDouble: return fn(double{});
    case at::kLong: return fn(int64_t{});
    case at::kInt: return fn(int32_t{});
    case at::kShort: return fn(int16_t{});
    case at::kChar: return fn(int8_t{});
    case at::kByte:
    case at::kBool: return fn(uint8_t{});
    default: return;
  }
}

template <typename Fn>
void with_comparison(CompareOp op, Fn&& fn) {
  switch (op) {
    case CompareOp::Eq: return fn(std::equal_to<>());
    case CompareOp::Ne: return fn(std::not_equal_to<>());
    case CompareOp::Lt: return fn(std::less<>());
    case CompareOp::Le: return fn(std::less_equal<>());
    case CompareOp::Gt: return fn(std::greater<>());
    case CompareOp::Ge: return fn(std::greater_equal<>());
  }
}

// The right operand: another array, or one value for every element.
template <typename T>
struct Elements {
  const T* data;
  T operator[](int64_t i) const { return data[i]; }
};
template <typename T>
struct Splat {
  T value;
  T operator[](int64_t) const { return value; }
};

// A new bool tensor shaped like `a` whose i-th element is `element(i)`.
template <typename Element>
at::Tensor bools_like(const at::Tensor& a, Element element) {
  at::Tensor out = at::empty(a.sizes(), a.options().dtype(at::kBool));
  bool* __restrict result = out.data_ptr<bool>();
  at::parallel_for(0, a.numel(), kGrain, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) result[i] = element(i);
  });
  return out;
}

template <typename T, typename Rhs>
at::Tensor compare_into_bools(CompareOp op, const at::Tensor& a, Rhs b) {
  const T* lhs = static_cast<const T*>(a.data_ptr());
  at::Tensor out;
  with_comparison(op, [&](auto cmp) { out = bools_like(a, [=](int64_t i) { return cmp(lhs[i], b[i]); }); });
  return out;
}

// `s` as a T when LibTorch compares a T tensor with it in T (c10's type promotion: a scalar of
// the tensor's category or below does not promote it); an integer out of T's range promotes in
// some releases and wraps in others, so it takes the `at::` path too.
template <typename T>
std::optional<T> scalar_in(const c10::Scalar& s, at::ScalarType dtype) {
  if (s.isComplex()) return std::nullopt;
  if (dtype == at::kBool) {
    if (!s.isBoolean()) return std::nullopt;
    return static_cast<T>(s.toBool());
  }
  if (s.isBoolean()) return static_cast<T>(s.toBool());
  if (s.isFloatingPoint()) {
    if constexpr (std::is_floating_point_v<T>) return static_cast<T>(s.toDouble());
    return std::nullopt;  // an integral tensor against a float promotes
  }
  int64_t v;
  try {
    v = s.toLong();  // an unsigned 64-bit scalar above INT64_MAX throws
  } catch (const c10::Error&) {
    return std::nullopt;
  }
  if constexpr (!std::is_floating_point_v<T>) {
    if (v < static_cast<int64_t>(std::numeric_limits<T>::min()) ||
        v > static_cast<int64_t>(std::numeric_limits<T>::max()))
      return std::nullopt;
  }
  return static_cast<T>(v);
}

// True when `found(i)` holds for some i in [0, n): blocks of a fixed size (vectorized), stopping at
// the first block with a hit, over the intra-op threads for long inputs.
template <typename Found>
bool any_index(int64_t n, Found found) {
  std::atomic<bool> hit{false};
  at::parallel_for(0, n, kGrain, [&](int64_t begin, int64_t end) {
    constexpr int64_t kBlock = 256;
    int64_t i = begin;
    for (; i + kBlock <= end; i += kBlock) {
      if (hit.load(std::memory_order_relaxed)) return;
      int any = 0;  // an int, not a bool: a bool accumulator is not vectorized
      for (int64_t j = 0; j < kBlock; ++j) any |= static_cast<int>(found(i + j));
      if (any != 0) {
        hit.store(true, std::memory_order_relaxed);
        return;
      }
    }
    for (; i < end; ++i) {
      if (found(i)) {
        hit.store(true, std::memory_order_relaxed);
        return;
      }
    }
  });
  return hit.load();
}

template <typename T>
bool equal_loop(const T* a, const T* b, int64_t n) {
  return !any_index(n, [a, b](int64_t i) { return !(a[i] == b[i]); });
}

bool same_operands(const at::Tensor& a, const at::Tensor& b) {
  return loopable(a) && loopable(b) && a.scalar_type() == b.scalar_type() && a.sizes() == b.sizes();
}

template <typename T, typename Test>
at::Tensor test_into_bools(const at::Tensor& a, Test test) {
  const T* in = static_cast<const T*>(a.data_ptr());
  return bools_like(a, [=](int64_t i) { return test(in[i]); });
}

// Whether some element is nonzero (`nonzero`) or zero; nullopt where the loops do not apply.
std::optional<bool> some_element(const at::Tensor& a, bool nonzero) {
  if (!loopable(a)) return std::nullopt;
  std::optional<bool> found;
  with_element_type(a.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    const T* data = static_cast<const T*>(a.data_ptr());
    found = nonzero ? any_index(a.numel(), [data](int64_t i) { return !(data[i] == T(0)); })
                    : any_index(a.numel(), [data](int64_t i) { return data[i] == T(0); });
  });
  return found;
}

}  // namespace

at::Tensor compare_contiguous(CompareOp op, const at::Tensor& a, const at::Tensor& b) {
  if (!same_operands(a, b)) return at::Tensor();
  at::Tensor out;
  with_element_type(a.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    out = compare_into_bools<T>(op, a, Elements<T>{static_cast<const T*>(b.data_ptr())});
  });
  return out;
}

at::Tensor compare_contiguous(CompareOp op, const at::Tensor& a, const c10::Scalar& b) {
  if (!loopable(a)) return at::Tensor();
  at::Tensor out;
  with_element_type(a.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    if (const std::optional<T> value = scalar_in<T>(b, a.scalar_type())) {
      out = compare_into_bools<T>(op, a, Splat<T>{*value});
    }
  });
  return out;
}

std::optional<bool> equal_contiguous(const at::Tensor& a, const at::Tensor& b) {
  if (!same_operands(a, b)) return std::nullopt;
  std::optional<bool> equal;
  with_element_type(a.scalar_type(), [&](auto tag) {
    using T = decltype(tag);
    equal = equal_loop(static_cast<const T*>(a.data_ptr()), static_cast<const T*>(b.data_ptr()), a.numel());
  });
  return equal;
}

at::Tensor test_contiguous(ValueTest test, const at::Tensor& a) {
  if (!loopable(a)) return at::Tensor();
  at::Tensor out;
  auto run = [&](auto tag) {
    using T = decltype(tag);
    constexpr T inf = std::numeric_limits<T>::infinity();
    switch (test) {
      case ValueTest::IsNan: out = test_into_bools<T>(a, [](T x) { return x != x; }); break;
      case ValueTest::IsFinite: out = test_into_bools<T>(a, [](T x) { return std::fabs(x) < inf; }); break;
      case ValueTest::IsPosInf: out = test_into_bools<T>(a, [](T x) { return x == inf; }); break;
      case ValueTest::IsNegInf: out = test_into_bools<T>(a, [](T x) { return x == -inf; }); break;
    }
  };
  if (a.scalar_type() == at::kFloat) run(float{});
  if (a.scalar_type() == at::kDouble) run(double{});
  return out;
}

std::optional<bool> all_contiguous(const at::Tensor& a) {
  const std::optional<bool> zero = some_element(a, /*nonzero=*/false);
  return zero ? std::optional<bool>(!*zero) : std::nullopt;
}

std::optional<bool> any_contiguous(const at::Tensor& a) { return some_element(a, /*nonzero=*/true); }

}  // namespace ops
}  // namespace tensordict
