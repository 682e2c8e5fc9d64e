// Note [Plain copies] (issue 34): stack, cat, clone() and to() between float and double of plain
// CPU tensors are made without the dispatcher. Each result is compared with LibTorch's (sizes,
// strides, dtype, bytes, inference-ness) over dtypes, shapes with empty and size-one dims and
// every dim; what LibTorch would not copy plainly is left to it; a tensordict's stack, cat,
// clone, to() and lazy-stack reads make no such call for plain leaves, and one for a leaf that
// needs grad. The in-place writes are in plain_write_test.cpp.
#include "support/catch_torch.h"

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/Dimname.h>
#include <c10/core/InferenceMode.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/tensor_dict.h>

#include "core/plain_copy.h"
#include "support/runs_fixtures.h"
#include "unit/plain_copy_fixtures.h"

using namespace tensordict;

// A namespace of its own, not an anonymous one: the sanitizer build compiles test files together.
namespace plain_copy_test {

using namespace plain_copy_fixtures;
using runs_fixtures::KernelCount;

// join_by_copy's result is at::stack's / at::cat's, bit for bit and stride for stride.
void require_as_libtorch(const std::vector<at::Tensor>& parts, int64_t dim, bool stack) {
  const at::Tensor expected = stack ? at::stack(parts, dim) : at::cat(parts, dim);
  const at::Tensor got = tensordict::detail::join_by_copy(parts, dim, stack);
  INFO((stack ? "stack" : "cat") << " of " << parts.size() << " parts of " << parts.front().sizes() << " "
                                 << parts.front().scalar_type() << " at dim " << dim);
  REQUIRE(got.defined());
  CHECK(got.sizes() == expected.sizes());
  CHECK(got.strides() == expected.strides());
  CHECK(got.dtype() == expected.dtype());
  CHECK(got.is_inference() == expected.is_inference());
  CHECK(!got.requires_grad());
  CHECK(got.storage_offset() == 0);
  CHECK(got.is_contiguous());
  CHECK(at::equal(got, expected));
  for (const at::Tensor& p : parts) CHECK(!got.is_alias_of(p));
}

TEST_CASE("join_by_copy gives at::stack's and at::cat's result for plain CPU parts", "[unit][plain_copy]") {
  at::manual_seed(3);
  for (at::ScalarType dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      const auto dims = static_cast<int64_t>(shape.size());
      for (size_t count : {1, 2, 5}) {
        std::vector<at::Tensor> parts;
        for (size_t i = 0; i < count; ++i) parts.push_back(random_of(shape, dtype));
        for (int64_t dim = 0; dim <= dims; ++dim) require_as_libtorch(parts, dim, /*stack=*/true);
        for (int64_t dim = 0; dim < dims; ++dim) {
          // Parts of several sizes along the cat dim, one of them empty there.
          std::vector<at::Tensor> ragged;
          for (size_t i = 0; i < count; ++i) {
            std::vector<int64_t> s = shape;
            s[dim] = static_cast<int64_t>(i % 3);
            ragged.push_back(random_of(s, dtype));
          }
          require_as_libtorch(parts, dim, /*stack=*/false);
          require_as_libtorch(ragged, dim, /*stack=*/false);
        }
      }
    }
  }
}

TEST_CASE("stack_tensors wraps a negative dim as at::stack does", "[unit][plain_copy]") {
  const std::vector<at::Tensor> parts{at::randn({2, 3}), at::randn({2, 3})};
  for (int64_t dim = -3; dim <= 2; ++dim) {
    const at::Tensor got = tensordict::detail::stack_tensors(parts, dim), expected = at::stack(parts, dim);
    CHECK(got.sizes() == expected.sizes());
    CHECK(at::equal(got, expected));
  }
  CHECK_THROWS_AS(tensordict::detail::stack_tensors(parts, 3), c10::Error);  // LibTorch's own error
}

TEST_CASE("join_by_copy: parts viewing one storage, inference tensors and inference mode", "[unit][plain_copy]") {
  const at::Tensor base = at::arange(48, at::kFloat).view({4, 12});
  // Contiguous rows of one storage, each at its own offset.
  require_as_libtorch({base[1].view({3, 4}), base[3].view({3, 4}), base[1].view({3, 4})}, 1, /*stack=*/true);
  require_as_libtorch({base.narrow(0, 1, 2), base.narrow(0, 0, 1)}, 0, /*stack=*/false);
  at::Tensor made_in_inference;
  {
    const c10::InferenceMode guard;
    made_in_inference = at::randn({2, 3});
    require_as_libtorch({made_in_inference, at::randn({2, 3})}, 0, /*stack=*/true);
    require_as_libtorch({made_in_inference, at::randn({4, 3})}, 0, /*stack=*/false);
  }
  // Outside inference mode the result of inference tensors is a normal tensor, as LibTorch's.
  REQUIRE(made_in_inference.is_inference());
  require_as_libtorch({made_in_inference, at::randn({2, 3})}, 1, /*stack=*/true);
}

TEST_CASE("join_by_copy declines parts LibTorch would not join by a plain copy", "[unit][plain_copy]") {
  const at::Tensor a = at::randn({2, 3, 4, 5}), b = at::randn({2, 3, 4, 5});
  const auto declined = [](const std::vector<at::Tensor>& parts, int64_t dim, bool stack) {
    return !tensordict::detail::join_by_copy(parts, dim, stack).defined();
  };
  CHECK(!declined({a, b}, 0, true));  // the plain case, for contrast
  CHECK(declined({}, 0, true));
  CHECK(declined({a, at::Tensor()}, 0, true));
  CHECK(declined({a.transpose(0, 1), b.transpose(0, 1)}, 0, true));  // not contiguous
  CHECK(declined({a.contiguous(at::MemoryFormat::ChannelsLast), b}, 0, false));
  const at::Tensor c = at::randn({2, 3, 4, 5, 6});
  CHECK(declined({c.contiguous(at::MemoryFormat::ChannelsLast3d), c}, 1, false));
  CHECK(declined({a.requires_grad_(false).clone().requires_grad_(true), b}, 0, true));
  CHECK(declined({a, b.to(at::kDouble)}, 0, true));  // LibTorch promotes
  CHECK(declined({a, at::randn({2, 3, 4, 6})}, 0, true));
  CHECK(declined({a, at::randn({2, 3, 5, 5})}, 0, false));  // differs outside the cat dim
  CHECK(declined({a, at::randn({2, 3, 4})}, 0, false));
  CHECK(declined({a, b}, 4, false));  // no such dim to cat
  CHECK(declined({a, b}, 5, true));
  const at::Tensor z = at::randn({2, 3}, at::kComplexFloat);
  CHECK(declined({z.conj(), z}, 0, true));
  CHECK(declined({z._neg_view(), z}, 0, true));
  const std::vector<at::Dimname> names{at::Dimname::fromSymbol(at::Symbol::dimname("B")),
                                       at::Dimname::fromSymbol(at::Symbol::dimname("F"))};
  CHECK(declined({at::randn({2, 3}).refine_names(names), at::randn({2, 3})}, 0, false));
  CHECK(declined({at::quantize_per_tensor(at::randn({2, 3}), 0.1, 0, at::kQInt8),
                  at::quantize_per_tensor(at::randn({2, 3}), 0.1, 0, at::kQInt8)},
                 0, true));
  SECTION("while a dual level is open (a part may carry a tangent)") {
    DualLevel dual;
    CHECK(declined({a, b}, 0, true));
  }
  SECTION("a result LibTorch copies over threads") {
    const int threads = at::get_num_threads();
    at::set_num_threads(2);
    const at::Tensor big = at::randn({at::internal::GRAIN_SIZE});
    CHECK(declined({big, big}, 0, true));
    at::set_num_threads(1);
    CHECK(!declined({big, big}, 0, true));
    at::set_num_threads(threads);
  }
}

// clone_tensor's result is clone()'s, stride for stride, and a tensor of its own.
void require_as_clone(const at::Tensor& t) {
  const at::Tensor expected = t.clone(), got = tensordict::detail::clone_tensor(t);
  INFO("clone of " << t.sizes() << " strides " << t.strides() << " " << t.scalar_type());
  CHECK(got.sizes() == expected.sizes());
  CHECK(got.strides() == expected.strides());
  CHECK(got.dtype() == expected.dtype());
  CHECK(got.is_inference() == expected.is_inference());
  CHECK(got.requires_grad() == expected.requires_grad());
  CHECK((got.grad_fn() == nullptr) == (expected.grad_fn() == nullptr));
  CHECK(got.is_conj() == expected.is_conj());
  CHECK(got.has_names() == expected.has_names());
  CHECK(!got.is_alias_of(t));
  CHECK(at::equal(got.resolve_conj(), expected.resolve_conj()));
}

TEST_CASE("clone_tensor gives clone()'s result, copied where the tensor is plain", "[unit][plain_copy]") {
  at::manual_seed(7);
  for (at::ScalarType dtype : kDtypes) {
    for (const auto& shape : kShapes) require_as_clone(random_of(shape, dtype));
  }
  const at::Tensor x = at::randn({4, 6});
  // Dense, but not with the standard strides (clone() keeps them), or not contiguous.
  require_as_clone(at::randn({3}).as_strided({3, 1}, {1, 7}));
  require_as_clone(x.t());
  require_as_clone(x.narrow(1, 1, 3));
  require_as_clone(x[2]);  // contiguous, at an offset
  require_as_clone(x.clone().requires_grad_(true));
  require_as_clone(x.clone().requires_grad_(true) * 2);
  require_as_clone(at::randn({2, 3}, at::kComplexFloat).conj());
  const std::vector<at::Dimname> names{at::Dimname::fromSymbol(at::Symbol::dimname("B")),
                                       at::Dimname::fromSymbol(at::Symbol::dimname("F"))};
  require_as_clone(at::randn({2, 3}).refine_names(names));
  {
    const c10::InferenceMode guard;
    require_as_clone(at::randn({2, 3}));
    require_as_clone(x);
  }
  at::Tensor made_in_inference;
  {
    const c10::InferenceMode guard;
    made_in_inference = at::randn({2, 3});
  }
  require_as_clone(made_in_inference);
  SECTION("copied only where plain: a kernel for the rest") {
    const auto clones = [](const at::Tensor& t) { return KernelCount::of("aten::clone", [&] { tensordict::detail::clone_tensor(t); }); };
    CHECK(clones(x) == 0);
    CHECK(clones(x.t()) == 1);
    CHECK(clones(at::randn({3}).as_strided({3, 1}, {1, 7})) == 1);
    CHECK(clones(x.clone().requires_grad_(true)) == 1);
    CHECK(clones(at::randn({2, 3}).refine_names(names)) == 1);
    {
      DualLevel dual;
      CHECK(clones(x) == 1);
    }
    const int threads = at::get_num_threads();
    at::set_num_threads(2);
    CHECK(clones(at::randn({at::internal::GRAIN_SIZE})) == 1);
    at::set_num_threads(threads);
  }
}

// The bits of a float or double tensor (NaN compares unequal to itself).
at::Tensor bits_of(const at::Tensor& t) { return t.scalar_type() == at::kFloat ? t.view(at::kInt) : t.view(at::kLong); }

TEST_CASE("convert_tensor converts between float and double as to() does, bit for bit", "[unit][plain_copy]") {
  // Signed zeros, infinities, NaN, subnormals, values that overflow or underflow a float, and
  // ties that round to even.
  const double inf = std::numeric_limits<double>::infinity();
  const at::Tensor specials = at::tensor(
      std::vector<double>{0.0, -0.0, inf, -inf, std::nan(""), 1e-40, -3e-39, 1e300, -1e300, 1e-320, 1 + std::ldexp(1.0, -24),
                          1 + 3 * std::ldexp(1.0, -24), 3.4028234663852886e38, 0.1, -2.5, 1.0 / 3},
      at::kDouble);
  at::manual_seed(31);
  for (const auto& shape : kShapes) {
    const int64_t numel = c10::multiply_integers(shape);
    const at::Tensor values =
        at::cat({specials, at::randn({std::max<int64_t>(numel, 1)}, at::kDouble)}).narrow(0, 0, numel).view(shape);
    for (const at::Tensor& t : {values, values.to(at::kFloat)}) {
      const at::ScalarType to = t.scalar_type() == at::kFloat ? at::kDouble : at::kFloat;
      const at::Tensor expected = t.to(to);
      at::Tensor got;
      const int calls = KernelCount::of("aten::_to_copy", [&] { got = tensordict::detail::convert_tensor(t, to); });
      INFO(t.sizes() << " " << t.scalar_type() << " -> " << to);
      if (numel > 0) CHECK(calls == 0);  // an empty tensor's strides may be to()'s to keep
      CHECK(got.sizes() == expected.sizes());
      CHECK(got.strides() == expected.strides());
      CHECK(got.dtype() == expected.dtype());
      CHECK(at::equal(bits_of(got), bits_of(expected)));
    }
  }
  SECTION("the rest is to()'s") {
    const at::Tensor x = at::randn({4, 3});
    const auto converts = [](const at::Tensor& t, at::ScalarType to) {
      return KernelCount::of("aten::_to_copy", [&] { tensordict::detail::convert_tensor(t, to); });
    };
    CHECK(tensordict::detail::convert_tensor(x, at::kFloat).is_same(x));  // already of the dtype
    CHECK(converts(x, at::kHalf) == 1);
    CHECK(converts(x.to(at::kLong), at::kDouble) == 1);
    CHECK(converts(x.t(), at::kDouble) == 1);                                    // to() keeps these strides
    CHECK(converts(at::randn({3}).as_strided({3, 1}, {1, 7}), at::kDouble) == 1);
    const at::Tensor grad = x.clone().requires_grad_(true);
    CHECK(converts(grad, at::kDouble) == 1);
    CHECK(tensordict::detail::convert_tensor(grad, at::kDouble).grad_fn() != nullptr);
    {
      const c10::InferenceMode guard;
      const at::Tensor got = tensordict::detail::convert_tensor(at::randn({2, 3}), at::kDouble);
      CHECK(got.is_inference());
    }
  }
}

TEST_CASE("stack, cat, clone, to() and a lazy stack's read copy plain leaves with no aten::stack, cat, clone or to",
          "[unit][plain_copy]") {
  at::manual_seed(5);
  const std::vector<TensorDict> tds{tree(0), tree(10), tree(20)};
  const auto joins = [](const std::function<void()>& run) {
    return KernelCount::of("aten::stack", run) + KernelCount::of("aten::cat", run);
  };
  const auto require_leaves = [&](const TensorDict& got, int64_t dim, bool stack) {
    for (const NestedKey& key : tds.front().keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      std::vector<at::Tensor> column;
      for (const TensorDict& td : tds) column.push_back(td.get(key));
      const at::Tensor expected = stack ? at::stack(column, dim) : at::cat(column, dim);
      INFO(key.repr() << " at dim " << dim);
      CHECK(got.get(key).strides() == expected.strides());
      CHECK(at::equal(got.get(key), expected));
    }
  };
  for (int64_t dim : {0, 1}) {
    TensorDict stacked, joined;
    CHECK(joins([&] { stacked = tensordict::stack(tds, dim); }) == 0);
    require_leaves(stacked, dim, true);
    if (dim == 0) {
      CHECK(joins([&] { joined = tensordict::cat(tds, dim); }) == 0);
      require_leaves(joined, dim, false);
    }
  }
  SECTION("a lazy stack's read of a leaf") {
    const TensorDict lazy = lazy_stack(tds, 0);
    at::Tensor read;
    CHECK(joins([&] { read = lazy.get({"n", "b"}); }) == 0);
    CHECK(at::equal(read, at::stack({tds[0].get({"n", "b"}), tds[1].get({"n", "b"}), tds[2].get({"n", "b"})})));
  }
  SECTION("clone() of the tree") {
    TensorDict copy;
    CHECK(KernelCount::of("aten::clone", [&] { copy = tds[1].clone(); }) == 0);
    for (const NestedKey& key : tds[1].keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      CHECK(at::equal(copy.get(key), tds[1].get(key)));
      CHECK(!copy.get(key).is_alias_of(tds[1].get(key)));
    }
  }
  SECTION("to(double) and back of the tree's float leaves") {
    TensorDict floats({}, {4});
    floats.set("a", at::randn({4, 3}));
    floats.set({"n", "b"}, at::randn({4, 2, 2}));
    TensorDict doubles, back;
    CHECK(KernelCount::of("aten::_to_copy", [&] { doubles = floats.to(at::kDouble); }) == 0);
    CHECK(KernelCount::of("aten::_to_copy", [&] { back = doubles.to(at::kFloat); }) == 0);
    for (const NestedKey& key : floats.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      CHECK(at::equal(doubles.get(key), floats.get(key).to(at::kDouble)));
      CHECK(at::equal(back.get(key), floats.get(key)));
    }
  }
  SECTION("a lazy stack made dense") {
    const TensorDict lazy = lazy_stack(tds, 1);
    TensorDict dense;
    CHECK(joins([&] { dense = lazy.contiguous(); }) == 0);
    require_leaves(dense, 1, true);
  }
  SECTION("a leaf that needs grad goes through at::stack, its graph kept") {
    std::vector<TensorDict> with_grad = tds;
    for (TensorDict& td : with_grad) td = td.clone();
    with_grad[1].set("a", at::randn({4, 3}).requires_grad_(true));
    TensorDict stacked;
    CHECK(KernelCount::of("aten::stack", [&] { stacked = tensordict::stack(with_grad, 0); }) == 1);
    CHECK(stacked.get("a").requires_grad());
    CHECK(stacked.get("a").grad_fn() != nullptr);
  }
  SECTION("leaves of other shapes still raise with the key named") {
    std::vector<TensorDict> ragged = tds;
    ragged[2] = tds[2].clone();
    ragged[2].set({"n", "b"}, at::randint(0, 9, {4, 2, 3}));
    CHECK_THROWS_WITH(tensordict::stack(ragged, 0), Catch::Contains(NestedKey({"n", "b"}).repr()));
  }
}

TEST_CASE("four threads stack, cat, clone and consolidate one set of trees at once", "[unit][plain_copy]") {
  at::manual_seed(29);
  const std::vector<TensorDict> tds{tree(0), tree(10), tree(20)};
  const TensorDict stacked = tensordict::stack(tds, 0), joined = tensordict::cat(tds, 0);
  std::vector<std::string> failures(4);
  std::vector<std::thread> threads;
  for (size_t w = 0; w < 4; ++w) {
    threads.emplace_back([&, w] {
      // No Catch assertion off the main thread: each worker notes what differs.
      for (int round = 0; round < 20; ++round) {
        const TensorDict s = tensordict::stack(tds, 0), c = tensordict::cat(tds, 0), k = tds[w % 3].clone();
        const TensorDict packed = consolidate(tds[w % 3]);
        for (const NestedKey& key : tds[0].keys(/*include_nested=*/true, /*leaves_only=*/true)) {
          if (!at::equal(s.get(key), stacked.get(key)) || !at::equal(c.get(key), joined.get(key)) ||
              !at::equal(k.get(key), tds[w % 3].get(key)) || !at::equal(packed.get(key), tds[w % 3].get(key)))
            failures[w] = "round " + std::to_string(round) + ": " + key.repr();
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const std::string& f : failures) CHECK(f.empty());
}

}  // namespace plain_copy_test
