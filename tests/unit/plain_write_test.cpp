// Note [Plain copies] (issue 34), in place: rows of a leaf (`td[rows] = other`, `update_at_`),
// whole leaves (`update_`, `copy_`, `apply_`'s write-back), `consolidate`'s storage and `zero_()`
// are written with memcpy or memset for plain CPU tensors, each version bumped as the op would.
// Each write is compared with LibTorch's (bytes and version counts); what LibTorch would do more
// for is declined, writing nothing; a tensordict's writes make no copy_ or zero_ call for plain
// leaves.
#include "support/catch_torch.h"

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
namespace plain_write_test {

using namespace plain_copy_fixtures;
using runs_fixtures::KernelCount;

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

TEST_CASE("td[rows] = other, update_, copy_ and zero_ write plain leaves with no dispatch, the leaves' versions bumped", "[unit][plain_copy]") {
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
  SECTION("zero_ of the tree") {
    TensorDict dest = source.clone();
    const at::Tensor held = dest.get("a");
    const auto version = held._version();
    CHECK(KernelCount::of("aten::zero_", [&] { dest.zero_(); }) == 0);
    CHECK(held._version() == version + 1);
    for (const NestedKey& key : dest.keys(/*include_nested=*/true, /*leaves_only=*/true))
      CHECK(at::equal(dest.get(key), at::zeros_like(dest.get(key))));
  }
  SECTION("update_ of a tree holding a lazy stack: the in-memory level's leaves copied in place") {
    // A level whose reads are copies sends update_ through each level's write_many_.
    TensorDict dest = source.clone(), value = tree(40);
    const TensorDict lazy_dest = lazy_stack(tree(1).unbind(0), 0), lazy_value = lazy_stack(tree(2).unbind(0), 0);
    dest.set("ls", lazy_dest);
    value.set("ls", lazy_value);
    REQUIRE(LazyStackedTensorDict::is_lazy_stack(dest.get_tensordict("ls")));
    const at::Tensor held = dest.get({"n", "b"});
    const auto version = held._version();
    dest.update_(value);
    CHECK(held._version() == version + 1);
    for (const NestedKey& key : value.keys(/*include_nested=*/true, /*leaves_only=*/true))
      CHECK(at::equal(dest.get(key), value.get(key)));
  }
  SECTION("a value that needs grad goes through copy_, its graph kept") {
    TensorDict dest = source.clone(), value = tree(10).index({Slice(0, 2)}).clone();
    value.set("a", at::randn({2, 3}).requires_grad_(true));
    CHECK(KernelCount::of("aten::copy_", [&] { dest.index_put_({Slice(1, 3)}, value); }) == 1);
    CHECK(dest.get("a").grad_fn() != nullptr);
  }
}

}  // namespace plain_write_test
