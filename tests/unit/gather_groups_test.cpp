// td[tensor] over an intact packed tree (a consolidated tensordict, a packed op's result) gathers
// once a group of leaves of one shape (Note [Grouped results]): each leaf, level, batch size,
// name, lock and non-tensor entry is what the per-leaf path gives, bit for bit (compared with the
// same index of a copy whose leaves each have a storage of their own).
#include "support/catch_torch.h"

#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/batch_index.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/ops.h>

#include "backends/in_memory/intact_result.h"
#include "support/runs_fixtures.h"
#include "unit/grouped_fixtures.h"

using namespace tensordict;

namespace gather_groups_test {

using grouped_fixtures::deferred;
using grouped_fixtures::mixed_tree;
using grouped_fixtures::require_identical;
using runs_fixtures::KernelCount;

// td[rows], and the calls to the gather ops it made (index_select for a 1-D long index, as
// BatchIndex::apply, index for the others; td[rows] is run once for each count): one a group on
// the grouped path, one a leaf otherwise.
std::pair<TensorDict, int> gathered(const TensorDict& td, const at::Tensor& rows) {
  TensorDict out;
  const int selects = KernelCount::of("aten::index_select", [&] { out = td.index({rows}); });
  return {out, selects + KernelCount::of("aten::index", [&] { out = td.index({rows}); })};
}

// td[rows] took the per-leaf path: as many gathers as over `reference` (the same leaves, each
// in a storage of its own), and the same tree.
void require_per_leaf_path(const TensorDict& td, const TensorDict& reference, const at::Tensor& rows) {
  const auto [got, calls] = gathered(td, rows);
  const auto [want, per_leaf_calls] = gathered(reference, rows);
  CHECK(calls == per_leaf_calls);
  require_identical(got, want);
}

// Whether `td` is the grouped path's result: a packed op's level (the per-leaf path builds a plain one).
bool grouped(const TensorDict& td) { return in_memory::packed_level(*td.impl()) != nullptr; }

// A copy of `td` whose leaves each have a storage of their own, its keys in td's order.
TensorDict per_leaf_copy(const TensorDict& td) {
  TensorDict out({}, td.batch_size());
  for (const NestedKey& k : td.keys(true, true)) out.set(k, td.get(k).clone());
  if (td.is_locked()) out.lock_();
  return out;
}


TEST_CASE("td[tensor] of an intact tree gathers a group of leaves at once, each leaf the per-leaf one",
          "[unit][gather_groups]") {
  const TensorDict x = mixed_tree(/*nan=*/true);
  const TensorDict a = consolidate(x);
  const bool read = GENERATE(false, true);
  INFO("leaves read first: " << read);
  std::vector<at::Tensor> held;
  if (read) held = runs_fixtures::read_all(a);
  TensorDict apart = x.clone();
  if (a.is_locked()) apart.lock_();
  const std::vector<std::pair<const char*, at::Tensor>> indices = {
      {"long, repeated and negative", at::tensor({5, 0, -1, 2, 2}, at::kLong)},
      {"long, none", at::empty({0}, at::kLong)},
      {"long, a permutation (the batch size kept)", at::tensor({5, 3, 1, 0, 2, 4}, at::kLong)},
      {"long, 2-D", at::tensor({1, 3, 4, 0}, at::kLong).view({2, 2})},
      {"int32", at::tensor({4, 1}, at::kInt)},
      {"bool mask", at::tensor({1, 0, 0, 1, 1, 0}).to(at::kBool)},
      {"bool mask, none", at::zeros({6}, at::kBool)},
  };
  for (const auto& [name, rows] : indices) {
    INFO(name);
    const auto [got, calls] = gathered(a, rows);
    const auto [want, per_leaf_calls] = gathered(apart, rows);
    require_identical(got, want);
    // Five groups (grouped_fixtures::mixed_tree), one gather each, against 8 leaves (the
    // index's parse may gather too, on both sides). An index of no rows gives groups of no
    // elements, which take the per-leaf path.
    if (want.batch_size()[0] > 0) {
      CHECK(grouped(got));
      CHECK(per_leaf_calls - calls == 8 - 5);
    }
    // A leaf of the result is a tensor of its own: writing it leaves the operand as it was.
    got.get("a").fill_(-9);
  }
  require_identical(a, apart);
  // Unnamed, the result is one deferred level, nothing built until read.
  TensorDict plain = mixed_tree();
  plain.set_names({std::optional<std::string>()});
  const TensorDict unnamed = consolidate(plain);
  CHECK(deferred(unnamed.index({at::tensor({1, 2}, at::kLong)})));
  // The result's next op runs over its groups' storages as over any intact tree.
  const at::Tensor rows = at::tensor({3, 1, 1}, at::kLong);
  require_identical(a.index({rows}).sum(0), apart.index({rows}).sum(0));
  require_identical(a.index({rows}) * 2, apart.index({rows}) * 2);
}

TEST_CASE("td[tensor] over runs, and the trees and indices the gather leaves to the per-leaf path",
          "[unit][gather_groups]") {
  const at::Tensor rows = at::tensor({2, 0, 3}, at::kLong);
  SECTION("float, double and int64 runs, nested levels") {
    TensorDict x = runs_fixtures::mixed();
    x.erase("f2");  // a leaf of no elements keeps a tree off the grouped path
    const TensorDict a = consolidate(x);
    TensorDict apart = per_leaf_copy(a);
    const TensorDict got = a.index({rows});
    CHECK(grouped(got));
    require_identical(got, apart.index({rows}));
    const at::Tensor mask = at::tensor({1, 0, 0, 1}).to(at::kBool);
    require_identical(a.index({mask}), apart.index({mask}));
  }
  SECTION("a NonTensorStack follows the rows: per leaf") {
    TensorDict x = mixed_tree();
    x.set_non_tensor("steps", json::Value("a"));
    TensorDict a = consolidate(x);
    const NonTensorData steps =
        NonTensorData::from_ids({json::Value("a"), json::Value("b")}, at::tensor({0, 1, 1, 0, 1, 0}, at::kLong));
    a.set_non_tensor_("steps", steps);
    x.set_non_tensor_("steps", steps);
    const TensorDict got = a.index({rows});
    CHECK(!grouped(got));
    runs_fixtures::require_same(got, x.clone().index({rows}));  // consolidate may order keys otherwise
    CHECK(got.get_non_tensor("steps").tolist() == json::parse("[\"b\", \"a\", \"a\"]"));
  }
  SECTION("an index out of range raises as per leaf, naming the index") {
    const TensorDict a = consolidate(mixed_tree());
    CHECK_THROWS_AS(a.index({at::tensor({0, 6}, at::kLong)}), IndexError);
    CHECK_THROWS_AS(a.index({at::tensor({1, 0}).to(at::kBool)}), IndexError);
  }
  SECTION("a leaf requiring grad: per leaf, its grad kept") {
    const TensorDict a = consolidate(mixed_tree());
    a.get("a").requires_grad_(true);
    const TensorDict got = a.index({rows});
    CHECK(got.get("a").requires_grad());
    CHECK(!got.get("b").requires_grad());
  }
  SECTION("an index that views (an integer, a slice) stays a view of the operand") {
    const TensorDict a = consolidate(mixed_tree());
    const TensorDict row = a.index({2});
    const TensorDict part = a.index({at::indexing::Slice(1, 4)});
    CHECK(row.get("a").data_ptr() == a.get("a")[2].data_ptr());
    CHECK(part.get({"n", "p"}).data_ptr() == a.get({"n", "p"})[1].data_ptr());
  }
}

TEST_CASE("td[tensor] of a consolidated tree written since: groups found from its leaves", "[unit][gather_groups]") {
  const TensorDict x = mixed_tree();
  const at::Tensor rows = at::tensor({4, 4, 0, 2}, at::kLong);
  const at::Tensor mask = at::tensor({0, 1, 1, 0, 1, 1}).to(at::kBool);
  const at::Tensor permutation = at::tensor({5, 3, 1, 0, 2, 4}, at::kLong);  // the batch size kept
  for (const bool nested : {false, true}) {
    INFO("written at " << (nested ? "a nested level" : "the root"));
    TensorDict a = consolidate(x).clone();  // an unlocked tree over one storage
    TensorDict apart = x.clone();
    const at::Tensor added = at::randn({6, 3});
    const NestedKey key = nested ? NestedKey({"n", "added"}) : NestedKey("added");
    if (nested) {
      a.set(key, added.unsqueeze(1).expand({6, 2, 3}).contiguous());
      apart.set(key, added.unsqueeze(1).expand({6, 2, 3}).contiguous());
    } else {
      a.set(key, added);
      apart.set(key, added.clone());
    }
    REQUIRE(!in_memory::intact_packed_storage(*a.impl()).defined());
    for (const at::Tensor& index : {rows, mask, permutation}) {
      const auto [got, calls] = gathered(a, index);
      const auto [want, per_leaf_calls] = gathered(apart, index);
      require_identical(got, want);
      CHECK(per_leaf_calls - calls == 9 - 6);  // five groups and the added leaf, against 9 leaves
    }
  }
  SECTION("a leaf requiring grad is gathered alone, its grad kept") {
    TensorDict a = consolidate(x).clone();
    a.set("added", at::randn({6, 3}));
    a.get("b").requires_grad_(true);
    const TensorDict got = a.index({rows});
    CHECK(got.get("b").requires_grad());
    CHECK(got.get("b").grad_fn() != nullptr);
    CHECK(!got.get("c").requires_grad());
    CHECK(at::equal(got.get("b").detach(), x.get("b").index({rows})));
    CHECK(at::equal(got.get("c"), x.get("c").index({rows})));
  }
  SECTION("a tree of leaves each in its own storage is left to the per-leaf path at its second leaf") {
    require_per_leaf_path(x.clone(), x, rows);
  }
  SECTION("a nested level of another backend indexes its own rows: per leaf") {
    TensorDict a = consolidate(x).clone();
    TensorDict apart = x.clone();
    std::vector<TensorDict> members;
    for (int i = 0; i < 6; ++i) {
      TensorDict m({}, {});
      m.set("v", at::full({2}, static_cast<double>(i)));
      members.push_back(m);
    }
    a.set("stacked", lazy_stack(members, 0));
    apart.set("stacked", lazy_stack(members, 0));
    require_per_leaf_path(a, apart, rows);
  }
  SECTION("a NonTensorStack follows the rows: per leaf") {
    TensorDict a = consolidate(x).clone();
    a.set_non_tensor("steps", json::Value("a"));
    a.set_non_tensor_("steps", NonTensorData::from_ids({json::Value("a"), json::Value("b")},
                                                       at::tensor({0, 1, 1, 0, 1, 0}, at::kLong)));
    const TensorDict got = a.index({rows});
    CHECK(got.get_non_tensor("steps").tolist() == json::parse("[\"b\", \"b\", \"a\", \"b\"]"));
    CHECK(gathered(a, rows).second == 8 + 1);  // a gather a leaf, and one of the stack's ids
  }
}

TEST_CASE("td[tensor] of one tree from four threads, its plan and result shape kept once", "[unit][gather_groups]") {
  const TensorDict x = mixed_tree();
  const TensorDict a = consolidate(x);  // nobody has made its leaves
  const at::Tensor rows = at::tensor({5, 1, 1, 0}, at::kLong);
  TensorDict apart = x.clone();
  apart.lock_();
  const TensorDict want = apart.index({rows});
  std::vector<TensorDict> got(4);
  std::vector<at::Tensor> read(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) threads.emplace_back([&, i] { got[i] = a.index({rows}); });
  for (std::thread& t : threads) t.join();
  threads.clear();
  for (size_t i = 0; i < read.size(); ++i) threads.emplace_back([&, i] { read[i] = got[0].get({"n", "p"}); });
  for (std::thread& t : threads) t.join();
  for (const TensorDict& r : got) require_identical(r, want);
  for (const at::Tensor& t : read) CHECK(t.is_same(read.front()));
}

TEST_CASE("one tensor index: the batch it leaves is LibTorch's, without indexing a probe", "[unit][gather_groups]") {
  const std::vector<std::vector<int64_t>> batches = {{6}, {6, 3}, {6, 3, 2}};
  const std::vector<std::pair<const char*, at::Tensor>> indices = {
      {"long 0-D", at::tensor(4, at::kLong)},
      {"long 1-D, negative", at::tensor({-1, 0, 5, -6}, at::kLong)},
      {"long 2-D", at::tensor({1, 2, 3, 4, 5, 0}, at::kLong).view({3, 2})},
      {"long, not contiguous", at::arange(12).remainder(6).view({6, 2}).t()},
      {"int32", at::tensor({2, 2}, at::kInt)},
      {"long, empty", at::empty({0}, at::kLong)},
      {"bool mask", at::tensor({1, 0, 1, 1, 0, 0}).to(at::kBool)},
      {"byte mask", at::tensor({0, 1, 0, 0, 0, 1}, at::kByte)},
  };
  for (const std::vector<int64_t>& batch : batches) {
    const at::Tensor probe = at::zeros(batch);
    for (const auto& [name, rows] : indices) {
      INFO(name << ", batch " << c10::IntArrayRef(batch));
      const BatchIndex index({rows}, batch);
      const at::Tensor by_torch = probe.index({rows.scalar_type() == at::kInt ? rows.to(at::kLong) : rows});
      CHECK(index.result_batch_size() == by_torch.sizes());
      CHECK(at::equal(index.apply(at::arange(probe.numel()).view(batch)),
                      at::arange(probe.numel()).view(batch).index({rows.scalar_type() == at::kInt ? rows.to(at::kLong) : rows})));
    }
  }
  CHECK_THROWS_AS(BatchIndex({at::tensor({0, 6}, at::kLong)}, {6}), IndexError);
  CHECK_THROWS_AS(BatchIndex({at::tensor({-7}, at::kLong)}, {6}), IndexError);
  CHECK_THROWS_AS(BatchIndex({at::tensor({1, 0, 1}).to(at::kBool)}, {6}), IndexError);
}

}  // namespace gather_groups_test
