// Note [Plain copies] (issue 34): stack and cat of plain CPU leaves copy the bytes into
// LibTorch's result with no dispatch. Each result is compared with at::stack's or at::cat's
// (sizes, strides, dtype, bytes, inference-ness) over dtypes, shapes with empty and size-one
// dims, every dim; parts LibTorch would not join by a plain copy are declined; and a
// tensordict's stack, cat and lazy-stack read make no aten::stack or aten::cat call for plain
// leaves, and one for a leaf that needs grad.
#include "support/catch_torch.h"

#include <cmath>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/Parallel.h>
#include <ATen/core/Dimname.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/forward_grad.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/tensor_dict.h>

#include "core/plain_copy.h"
#include "support/runs_fixtures.h"

using namespace tensordict;

// A namespace of its own, not an anonymous one: the sanitizer build compiles test files together.
namespace plain_copy_test {

using runs_fixtures::KernelCount;

at::Tensor random_of(c10::IntArrayRef sizes, at::ScalarType dtype) {
  if (dtype == at::kBool) return at::randint(0, 2, sizes).to(at::kBool);
  if (at::isIntegralType(dtype, /*includeBool=*/false)) return at::randint(-100, 100, sizes).to(dtype);
  if (at::isComplexType(dtype)) return at::randn(sizes, at::TensorOptions().dtype(dtype));
  return at::randn(sizes).to(dtype);
}

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

const std::vector<at::ScalarType> kDtypes{at::kFloat, at::kDouble, at::kLong, at::kChar,
                                          at::kBool,  at::kHalf,   at::kComplexFloat};

// Shapes with empty and size-one dims, and the 4-D and 5-D ones whose strides a memory format
// could read otherwise.
const std::vector<std::vector<int64_t>> kShapes{
    {},           {3},          {4, 5},       {2, 3, 4},    {0, 3},       {3, 0},       {5, 1},       {1, 1},
    {2, 1, 3, 1}, {3, 1, 1, 1}, {1, 1, 1, 1}, {2, 3, 1, 1}, {1, 3, 4, 5}, {2, 3, 4, 5}, {2, 1, 2, 2, 1},
    {2, 3, 4, 5, 6}, {1, 2, 1, 1, 1}};

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

struct DualLevel {
  const uint64_t index = torch::autograd::ForwardADLevel::get_next_idx();
  ~DualLevel() { torch::autograd::ForwardADLevel::release_idx(index); }
};

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

// copy_rows_into and copy_ into the rows' view, on copies of `leaf`: the same bytes and one version
// bump each.
void require_as_copy_(const at::Tensor& leaf, int64_t start, int64_t rows, bool drop_dim, const at::Tensor& value) {
  at::Tensor expected = leaf.clone(), got = leaf.clone();
  const bool inference = got.is_inference();  // no version counter
  const auto expected_version = inference ? 0 : expected._version(), got_version = inference ? 0 : got._version();
  (drop_dim ? expected.select(0, start) : expected.narrow(0, start, rows)).copy_(value);
  INFO("rows " << start << "+" << rows << (drop_dim ? " (one, its dim dropped)" : "") << " of " << leaf.sizes() << " "
               << leaf.scalar_type());
  REQUIRE(tensordict::detail::copy_rows_into(got, start, rows, drop_dim, value));
  CHECK(at::equal(got, expected));
  if (!got.is_inference()) CHECK(got._version() - got_version == expected._version() - expected_version);
}

TEST_CASE("copy_rows_into writes what copy_ into the rows writes, its version bumped once", "[unit][plain_copy]") {
  at::manual_seed(11);
  for (at::ScalarType dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      if (shape.empty() || shape[0] == 0) continue;
      const at::Tensor leaf = random_of(shape, dtype);
      const int64_t n = shape[0];
      for (int64_t start = 0; start < n; ++start) {
        for (int64_t rows = 0; start + rows <= n; ++rows) {
          std::vector<int64_t> s = shape;
          s[0] = rows;
          require_as_copy_(leaf, start, rows, false, random_of(s, dtype));
        }
        require_as_copy_(leaf, start, 1, true, random_of(c10::IntArrayRef(shape).slice(1), dtype));
      }
    }
  }
  SECTION("in inference mode, into inference and normal leaves") {
    const at::Tensor normal = at::randn({4, 3});
    const c10::InferenceMode guard;
    require_as_copy_(at::randn({4, 3}), 1, 2, false, at::randn({2, 3}));
    require_as_copy_(normal, 0, 1, true, at::randn({3}));
  }
}

TEST_CASE("copy_rows_into declines what copy_ would do more for, writing nothing", "[unit][plain_copy]") {
  const at::Tensor base = at::randn({4, 3});
  int call = 0;
  const auto declined = [&](at::Tensor leaf, int64_t start, int64_t rows, bool drop_dim, const at::Tensor& value) {
    INFO("call " << ++call);
    const at::Tensor before = leaf.detach().clone();
    // Inference tensors keep no version counter.
    const auto version = leaf.is_inference() ? 0 : leaf._version();
    const bool wrote = tensordict::detail::copy_rows_into(leaf, start, rows, drop_dim, value);
    CHECK(at::equal(leaf.detach(), before));
    CHECK((leaf.is_inference() ? 0 : leaf._version()) == version);
    return !wrote;
  };
  CHECK(tensordict::detail::copy_rows_into(base.clone(), 1, 2, false, at::randn({2, 3})));  // the plain case
  CHECK(declined(base.clone(), 1, 2, false, at::randn({1, 3})));  // copy_ broadcasts
  CHECK(declined(base.clone(), 1, 2, false, at::randn({3})));
  CHECK(declined(base.clone(), 1, 2, false, at::randn({2, 3}, at::kDouble)));  // copy_ casts
  CHECK(declined(base.clone(), 1, 2, false, at::randn({3, 2}).t()));  // not contiguous
  CHECK(declined(base.clone().t().contiguous().t(), 1, 2, false, at::randn({2, 3})));
  CHECK(declined(base.clone(), 3, 2, false, at::randn({2, 3})));  // past the end
  CHECK(declined(base.clone(), 1, 2, true, at::randn({3})));
  at::Tensor self = base.clone();
  CHECK(declined(self, 0, 2, false, self.narrow(0, 2, 2)));  // the source in the leaf's storage
  CHECK(declined(base.clone().requires_grad_(true), 0, 1, true, at::randn({3})));
  CHECK(declined(base.clone(), 0, 1, true, at::randn({3}).requires_grad_(true)));
  const std::vector<at::Dimname> names{at::Dimname::fromSymbol(at::Symbol::dimname("B")),
                                       at::Dimname::fromSymbol(at::Symbol::dimname("F"))};
  CHECK(declined(base.clone().refine_names(names), 0, 1, true, at::randn({3})));
  CHECK(declined(at::randn({4, 3}, at::kComplexFloat).conj(), 0, 1, true, at::randn({3}, at::kComplexFloat)));
  at::Tensor inference;
  {
    const c10::InferenceMode guard;
    inference = at::randn({4, 3});
  }
  CHECK(declined(inference, 0, 1, true, at::randn({3})));  // copy_ raises outside inference mode
  {
    const at::AutoDispatchBelowADInplaceOrView below;  // copy_ would bump no version
    CHECK(declined(base.clone(), 0, 1, true, at::randn({3})));
  }
  {
    DualLevel dual;
    CHECK(declined(base.clone(), 0, 1, true, at::randn({3})));
  }
  const int threads = at::get_num_threads();
  at::set_num_threads(2);
  CHECK(declined(at::zeros({2, at::internal::GRAIN_SIZE}), 0, 1, true, at::randn({at::internal::GRAIN_SIZE})));
  at::set_num_threads(threads);
}

TEST_CASE("copy_bytes_into writes a tensor's bytes as a copy_ into a view of the bytes does", "[unit][plain_copy]") {
  at::manual_seed(17);
  for (at::ScalarType dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      const at::Tensor value = random_of(shape, dtype);
      const int64_t n = value.numel() * value.element_size();
      for (int64_t offset : {int64_t{0}, int64_t{8}}) {
        at::Tensor expected = at::zeros({n + 16}, at::kByte), got = at::zeros({n + 16}, at::kByte);
        expected.narrow(0, offset, n).view(dtype).view(value.sizes()).copy_(value);
        INFO(value.sizes() << " " << dtype << " at " << offset);
        REQUIRE(tensordict::detail::copy_bytes_into(got, offset, value));
        CHECK(at::equal(got, expected));
        CHECK(got._version() == expected._version());
      }
    }
  }
  const at::Tensor bytes = at::zeros({64}, at::kByte);
  const auto declined = [&](const at::Tensor& into, int64_t offset, const at::Tensor& value) {
    const at::Tensor before = into.clone();
    const bool wrote = tensordict::detail::copy_bytes_into(into, offset, value);
    CHECK(at::equal(into, before));
    return !wrote;
  };
  CHECK(declined(bytes, 60, at::randn({2})));  // past the end
  CHECK(declined(bytes, -1, at::randn({2})));
  CHECK(declined(bytes, 0, at::randn({2, 3}).t()));  // not contiguous
  CHECK(declined(bytes, 0, at::randn({2}).requires_grad_(true)));
  CHECK(declined(bytes.view({8, 8}), 0, at::randn({2})));  // not 1-D
  CHECK(declined(at::zeros({16}), 0, at::randn({2})));     // not bytes
  CHECK(declined(bytes, 0, bytes.narrow(0, 8, 8)));        // the bytes themselves
}

TEST_CASE("zero_plain clears what zero_ clears, its version bumped once", "[unit][plain_copy]") {
  at::manual_seed(23);
  for (at::ScalarType dtype : kDtypes) {
    for (const auto& shape : kShapes) {
      const at::Tensor t = random_of(shape, dtype);
      at::Tensor expected = t.clone(), got = t.clone();
      expected.zero_();
      INFO(t.sizes() << " " << dtype);
      REQUIRE(tensordict::detail::zero_plain(got));
      CHECK(at::equal(got, expected));
      CHECK(got._version() == expected._version());
    }
  }
  {
    const c10::InferenceMode guard;
    const at::Tensor t = at::randn({2, 3});
    REQUIRE(tensordict::detail::zero_plain(t));
    CHECK(at::equal(t, at::zeros({2, 3})));
  }
  const auto declined = [](const at::Tensor& t) {
    const at::Tensor before = t.detach().clone();
    const bool wrote = tensordict::detail::zero_plain(t);
    CHECK(at::equal(t.detach(), before));
    return !wrote;
  };
  CHECK(declined(at::randn({3, 4}).t()));
  CHECK(declined(at::randn({3}).requires_grad_(true)));
  CHECK(declined(at::randn({2, 3}, at::kComplexFloat).conj()));
  at::Tensor inference;
  {
    const c10::InferenceMode guard;
    inference = at::randn({3});
  }
  CHECK(declined(inference));  // zero_ raises outside inference mode
  {
    const at::AutoDispatchBelowADInplaceOrView below;
    CHECK(declined(at::randn({3})));
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

TEST_CASE("consolidate copies plain leaves with no copy_", "[unit][plain_copy]") {
  at::manual_seed(19);
  TensorDict td({}, {4});
  td.set("a", at::randn({4, 3}));
  td.set({"n", "b"}, at::randint(0, 9, {4, 2, 2}));
  td.set({"n", "c"}, at::rand({4}) > 0.5);
  td.set({"n", "d"}, at::randn({4, 5}, at::kDouble));
  TensorDict c;
  CHECK(KernelCount::of("aten::copy_", [&] { c = consolidate(td); }) == 0);
  for (const NestedKey& key : td.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
    CHECK(at::equal(c.get(key), td.get(key)));
    CHECK(c.get(key).is_alias_of(consolidated_storage(c)));
  }
  SECTION("a leaf that is not plain goes through copy_") {
    td.set("t", at::randn({3, 4}).t());
    CHECK(KernelCount::of("aten::copy_", [&] { c = consolidate(td); }) == 1);
    CHECK(at::equal(c.get("t"), td.get("t")));
  }
}

TensorDict tree(double shift) {
  TensorDict td({}, {4});
  td.set("a", at::randn({4, 3}) + shift);
  td.set({"n", "b"}, at::randint(0, 9, {4, 2, 2}));
  td.set({"n", "c"}, at::rand({4}) > 0.5);
  return td;
}

TEST_CASE("stack, cat, clone and a lazy stack's read copy plain leaves with no aten::stack, cat or clone",
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
  SECTION("zero_ of the tree") {
    TensorDict dest = tds[1].clone();
    const at::Tensor held = dest.get("a");
    const auto version = held._version();
    CHECK(KernelCount::of("aten::zero_", [&] { dest.zero_(); }) == 0);
    CHECK(held._version() == version + 1);
    for (const NestedKey& key : dest.keys(/*include_nested=*/true, /*leaves_only=*/true))
      CHECK(at::equal(dest.get(key), at::zeros_like(dest.get(key))));
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

TEST_CASE("td[rows] = other, update_ and copy_ write plain leaves with no copy_, the leaves' versions bumped", "[unit][plain_copy]") {
  at::manual_seed(13);
  const TensorDict source = tree(0);
  const auto require_written = [&](const std::vector<at::indexing::TensorIndex>& index, const TensorDict& value) {
    TensorDict dest = source.clone(), expected = source.clone();
    const at::Tensor held = dest.get("a");
    const auto version = held._version();
    CHECK(KernelCount::of("aten::copy_", [&] { dest.index_put_(index, value); }) == 0);
    for (const NestedKey& key : source.keys(/*include_nested=*/true, /*leaves_only=*/true)) {
      expected.get(key).index(index).copy_(value.get(key));
      CHECK(at::equal(dest.get(key), expected.get(key)));
    }
    CHECK(held._version() == version + 1);
  };
  using at::indexing::Slice;
  require_written({Slice(1, 3)}, tree(10).index({Slice(0, 2)}).clone());
  require_written({2}, tree(10).index({0}).clone());
  require_written({-1}, tree(10).index({0}).clone());
  require_written({Slice()}, tree(10));
  SECTION("update_ and copy_ of a whole tree") {
    TensorDict dest = source.clone();
    const TensorDict value = tree(20), other = tree(30);
    const at::Tensor held = dest.get({"n", "b"});
    const auto version = held._version();
    CHECK(KernelCount::of("aten::copy_", [&] { dest.update_(value); }) == 0);
    CHECK(KernelCount::of("aten::copy_", [&] { dest.copy_(other); }) == 0);
    CHECK(held._version() == version + 2);
    dest.update_(value);
    for (const NestedKey& key : source.keys(/*include_nested=*/true, /*leaves_only=*/true))
      CHECK(at::equal(dest.get(key), value.get(key)));
    // apply_ writes a result that is not the leaf itself back the same way.
    CHECK(KernelCount::of("aten::copy_", [&] { dest.apply_([](const at::Tensor& t) { return t.flip(0); }); }) == 0);
    for (const NestedKey& key : source.keys(/*include_nested=*/true, /*leaves_only=*/true))
      CHECK(at::equal(dest.get(key), value.get(key).flip(0)));
    dest.update_(value);
    // A value of another dtype is cast by copy_.
    TensorDict cast = value.clone();
    cast.set("a", at::ones({4, 3}, at::kDouble));
    CHECK(KernelCount::of("aten::copy_", [&] { dest.update_(cast); }) == 1);
    CHECK(at::equal(dest.get("a"), at::ones({4, 3})));
  }
  SECTION("a value that needs grad goes through copy_, its graph kept") {
    TensorDict dest = source.clone(), value = tree(10).index({Slice(0, 2)}).clone();
    value.set("a", at::randn({2, 3}).requires_grad_(true));
    CHECK(KernelCount::of("aten::copy_", [&] { dest.index_put_({Slice(1, 3)}, value); }) == 1);
    CHECK(dest.get("a").grad_fn() != nullptr);
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
