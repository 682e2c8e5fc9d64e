// update_ and copy_ between consolidated tensordicts (issue 34): a source laid out as the
// destination is copied once per storage or run, never leaf by leaf, with the per-leaf result;
// every other source takes the per-leaf path as before. Kernels are counted with a
// RecordFunction callback.
#include "support/catch_torch.h"

#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/ops.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "support/runs_fixtures.h"

using namespace tensordict;

// A namespace of its own, not an anonymous one: the sanitizer build compiles test files together.
namespace packed_copy_test {

using runs_fixtures::KernelCount;
using runs_fixtures::mixed;
using runs_fixtures::read_all;
using runs_fixtures::require_same;

TensorDict uniform(double low) { return runs_fixtures::two_levels(low); }

// Whether the leaves of td's level "g0" are still records (the root holds nested levels only).
bool unread(const TensorDict& td) {
  const TensorDictImpl* level = in_memory::packed_level(*td.get_tensordict("g0").impl());
  return level != nullptr && level->has_lazy_leaves();
}

int copies(const std::function<void()>& run) { return KernelCount::of("aten::copy_", run); }

TEST_CASE("copy_ between consolidated tensordicts of one layout copies the storage once", "[unit][packed][copy]") {
  TensorDict x = uniform(0), y = uniform(10);
  TensorDict a = consolidate(x), b = consolidate(y);
  SECTION("neither read: no leaf made") {
    CHECK(copies([&] { a.copy_(b); }) == 1);
    CHECK(unread(a));
    CHECK(unread(b));
    require_same(a, y);
  }
  SECTION("both read and held: the held leaves see the values, their versions bumped") {
    const std::vector<at::Tensor> held = read_all(a);
    read_all(b);
    const auto version = held.front()._version();
    CHECK(copies([&] { a.update_(b); }) == 1);
    CHECK(held.front()._version() > version);
    CHECK(at::equal(held.front(), y.get({"g0", "x0"})));
    require_same(a, y);
  }
  SECTION("a source of another dtype laid out alike converts as copy_ does leaf by leaf") {
    TensorDict d = consolidate(y.to(at::kDouble));
    CHECK(copies([&] { a.copy_(d); }) == 1);
    require_same(a, y.to(at::kDouble).to(at::kFloat));
  }
  SECTION("a locked destination is written in place") {
    a.lock_();
    CHECK(copies([&] { a.copy_(b); }) == 1);
    require_same(a, y);
  }
  SECTION("from itself: nothing changes") {
    a.copy_(a);
    require_same(a, x);
  }
}

TEST_CASE("update_ over mixed dtypes and Python's padding copies once a run, the padding kept",
          "[unit][packed][copy]") {
  SECTION("mixed dtypes: a run per dtype") {
    TensorDict x = mixed(), y = mixed();
    TensorDict a = consolidate(x), b = consolidate(y);
    read_all(a);
    CHECK(copies([&] { a.update_(b); }) == 3);
    require_same(a, y);
  }
  SECTION("padded float leaves: one run, its padding's bytes as they were") {
    TensorDict x({}, {3}), y({}, {3});
    for (int i = 0; i < 6; ++i) {
      x.set("l" + std::to_string(i), at::randn({3}));
      y.set("l" + std::to_string(i), at::randn({3}) + 5);
    }
    TensorDict a = consolidate(x), b = consolidate(y);
    // Padding of the source that is not zero: the copy must not carry it over.
    consolidated_storage(b).narrow(0, 12, 4).fill_(7);
    read_all(a);
    CHECK(copies([&] { a.copy_(b); }) == 1);
    require_same(a, y);
    const at::Tensor storage = consolidated_storage(a);
    for (int i = 0; i < 6; ++i) {
      INFO(i);
      CHECK(storage.narrow(0, i * 16 + 12, 4).eq(0).all().item<bool>());
    }
  }
}

TEST_CASE("update_ from part of a consolidated tree copies the runs of that part only", "[unit][packed][copy]") {
  TensorDict x = uniform(0), y = uniform(10);
  TensorDict a = consolidate(x), b = consolidate(y);
  // The source holds one level of the destination's two: its leaves are one run of b's storage,
  // the destination's leaves under it one run of a's.
  const TensorDict part = b.select({NestedKey("g0")});
  CHECK(copies([&] { a.update_(part); }) == 1);
  for (int i = 0; i < 5; ++i) {
    const std::string key = "x" + std::to_string(i);
    CHECK(at::equal(a.get({"g0", key}), y.get({"g0", key})));
    CHECK(at::equal(a.get({"g1", key}), x.get({"g1", key})));
  }
  // Two levels of one storage: g1's leaves copied over g0's, as leaf by leaf on a plain tree.
  TensorDict plain = uniform(0);
  TensorDict c = consolidate(plain);
  CHECK(copies([&] { c.get_tensordict("g0").update_(c.get_tensordict("g1").exclude({NestedKey("deep")})); }) == 1);
  plain.get_tensordict("g0").update_(plain.get_tensordict("g1").exclude({NestedKey("deep")}));
  require_same(c, plain);
}

TEST_CASE("update_ from sources laid out otherwise keeps copy_'s per-leaf meaning", "[unit][packed][copy]") {
  TensorDict x = uniform(0);
  TensorDict a = consolidate(x);
  SECTION("a source that broadcasts is copied leaf by leaf") {
    TensorDict ones({}, {8});
    for (const NestedKey& k : x.keys(true, true)) ones.set(k, at::full({8, 1}, 3.0));
    TensorDict b = consolidate(ones);
    CHECK(copies([&] { a.update_(b); }) == 11);
    for (const NestedKey& k : x.keys(true, true)) CHECK(a.get(k).eq(3).all().item<bool>());
  }
  SECTION("a source that needs grad is copied leaf by leaf") {
    TensorDict w = uniform(1).requires_grad_(true);
    read_all(a);
    {
      const at::NoGradGuard no_grad;
      CHECK(copies([&] { a.update_(w); }) == 11);
    }
    require_same(a, w.detach());
    // In grad mode the leaves of one storage refuse it from the second on, as LibTorch does.
    CHECK_THROWS_WITH(a.update_(w), Catch::Contains("requires grad"));
  }
  SECTION("a key the destination lacks is a KeyError, and nothing is written") {
    TensorDict src = uniform(5);
    src.set("extra", at::zeros({8}));
    TensorDict b = consolidate(src);
    CHECK_THROWS_AS(a.update_(b), KeyError);
    require_same(a, x);
  }
  SECTION("a leaf of another shape under a key is a ShapeError naming it") {
    TensorDict b = consolidate(uniform(5)).clone();
    b.set({"g1", "x3"}, at::zeros({8, 5}));
    CHECK_THROWS_WITH(a.update_(b), Catch::Contains("x3"));
  }
}

TEST_CASE("update_ over consolidated trees writes non-tensor values too", "[unit][packed][copy]") {
  TensorDict x = uniform(0), y = uniform(10);
  x.set_non_tensor({"g0", "note"}, json::Value("old"));
  y.set_non_tensor({"g0", "note"}, json::Value("new"));
  TensorDict a = consolidate(x), b = consolidate(y);
  CHECK(copies([&] { a.update_(b); }) == 1);
  CHECK(a.get_non_tensor({"g0", "note"}).value() == json::Value("new"));
  require_same(a.exclude({NestedKey({"g0", "note"})}), y.exclude({NestedKey({"g0", "note"})}));
}

}  // namespace packed_copy_test
