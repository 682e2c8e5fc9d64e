// consolidate() builds its tree from the tree it packed (backends/consolidated/views_from_tree.h)
// instead of reading back the metadata it wrote. These cases check that the two give the same
// tree: levels, entry order, names, lock, non-tensor data, the layout of the leaves not made yet
// (Note [Lazy leaves]) and the views once made, over trees of one dtype, mixed dtypes, padding,
// empty leaves and levels, and a lazy stack (which keeps the reader's path).
#include "support/catch_torch.h"

#include <string>
#include <vector>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/backends/memmap.h>
#include <tensordict/entry.h>
#if TENSORDICT_TEST_HDF5
#include <tensordict/backends/persistent.h>
#endif

#include "backends/consolidated/rebuild.h"
#include "backends/in_memory/lazy_leaves.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "support/same_view.h"
#include "support/temp_dir.h"

using namespace tensordict;

namespace consolidate_views_test {

void same_flat(const at::Tensor& a, const at::Tensor& b) {
  REQUIRE(a.defined() == b.defined());
  if (!a.defined()) return;
  CHECK(a.data_ptr() == b.data_ptr());
  CHECK(a.scalar_type() == b.scalar_type());
  CHECK(a.sizes() == b.sizes());
  CHECK(a.storage_offset() == b.storage_offset());
}

// The leaves a level has not made yet, as records and flats.
void same_unmade(const TensorDictBase& a, const TensorDictBase& b) {
  const auto* la = dynamic_cast<const TensorDictImpl*>(&a);
  const auto* lb = dynamic_cast<const TensorDictImpl*>(&b);
  REQUIRE((la == nullptr) == (lb == nullptr));
  if (la == nullptr) return;
  CHECK(la->is_packed_result() == lb->is_packed_result());
  const LazyLeaves* ua = la->unmade_leaves();
  const LazyLeaves* ub = lb->unmade_leaves();
  REQUIRE((ua == nullptr) == (ub == nullptr));
  if (ua == nullptr) return;
  CHECK(ua->records == ub->records);
  CHECK(ua->leaves == ub->leaves);
  CHECK(ua->elements == ub->elements);
  CHECK(ua->per_flat.elements == ub->per_flat.elements);
  CHECK(ua->per_flat.leaves == ub->per_flat.leaves);
  CHECK(ua->autograd_views == ub->autograd_views);
  CHECK(ua->shared_version == ub->shared_version);
  CHECK(ua->over_runs == ub->over_runs);
  same_flat(ua->flat, ub->flat);
  REQUIRE(ua->more_flats.size() == ub->more_flats.size());
  for (size_t i = 0; i < ua->more_flats.size(); ++i) same_flat(ua->more_flats[i], ub->more_flats[i]);
}

// Level by level, before any leaf is read: then every entry, leaves made.
void same_tree(const TensorDict& a, const TensorDict& b, const std::string& where) {
  INFO("level " << where);
  CHECK(std::string(a.impl()->type_name()) == b.impl()->type_name());
  CHECK(a.batch_size() == b.batch_size());
  CHECK(a.device() == b.device());
  CHECK((a.impl()->dim_names() == b.impl()->dim_names()));  // (one bool: no printer for names)
  CHECK(a.is_locked() == b.is_locked());
  same_unmade(*a.impl(), *b.impl());
  const bool stacked = std::string(a.impl()->type_name()) == "LazyStackedTensorDict";
  const auto keys_a = a.keys();
  const auto keys_b = b.keys();
  REQUIRE(keys_a.size() == keys_b.size());
  for (size_t i = 0; i < keys_a.size(); ++i) {
    REQUIRE(keys_a[i] == keys_b[i]);  // the reader's order: leaves, non-tensor data, nested levels
    const NestedKey& key = keys_a[i];
    const Entry ea = a.impl()->get(key[0]);
    const Entry eb = b.impl()->get(key[0]);
    REQUIRE(ea.kind() == eb.kind());
    if (ea.is_tensor() && stacked) {
      CHECK(at::equal(ea.tensor(), eb.tensor()));  // a lazy stack's read is a new tensor
    } else if (ea.is_tensor()) {
      INFO("leaf " << key.repr());
      testing_support::check_same_view(ea.tensor(), eb.tensor());
    } else if (ea.is_non_tensor()) {
      CHECK(ea.non_tensor().value() == eb.non_tensor().value());
    } else if (ea.is_tensordict()) {
      same_tree(ea.tensordict(), eb.tensordict(), where + "/" + key[0]);
    }
  }
}

// consolidate(td) against the reader over the same storage and metadata.
void check_as_read(const TensorDict& td) {
  const TensorDict built = consolidate(td);
  REQUIRE(is_consolidated(built));
  const TensorDict read =
      tensordict::detail::rebuild_consolidated(consolidated_storage(built), consolidated_metadata(built), "the reference");
  same_tree(built, read, "root");
  CHECK(to_bytes(built) == to_bytes(read));
}

TensorDict groups_of_floats() {
  std::vector<TensorDict::Item> items;
  for (int g = 0; g < 3; ++g) {
    std::vector<TensorDict::Item> group;
    for (int x = 0; x < 10; ++x) group.emplace_back("x" + std::to_string(x), at::randn({4, 3}));
    items.emplace_back("g" + std::to_string(g), EntryInit(group));
  }
  return TensorDict(items, {4});
}

TEST_CASE("consolidate's tree is the one its metadata reads back as: one dtype", "[unit][consolidate_views]") {
  check_as_read(groups_of_floats());
  // Leaves at the root after a nested level: the walk meets them after the level's leaves.
  TensorDict td({{"n", {{"a", at::randn({2, 5})}, {"b", at::randn({2})}}}, {"z", at::randn({2, 3})}}, {2});
  td.set({"n", "m", "deep"}, at::randn({2, 1, 1}));
  check_as_read(td);
  // Odd byte sizes: each leaf padded to 8 bytes, the runs across the padding.
  check_as_read(TensorDict({{"a", at::randn({3})}, {"b", at::randn({3, 1})}, {"c", at::randn({3, 3})}}, {3}));
}

TEST_CASE("consolidate's tree is the one its metadata reads back as: mixed dtypes, empty leaves and levels",
          "[unit][consolidate_views]") {
  TensorDict td({{"f", at::randn({2, 3})},
                 {"i", at::arange(6, at::kLong).view({2, 3})},
                 {"b", at::ones({2}, at::kBool)},
                 {"h", at::randn({2, 5}).to(at::kHalf)},
                 {"d", at::randn({2}, at::kDouble)},
                 {"empty", at::empty({2, 0})},
                 {"n", {{"f2", at::randn({2, 7})}, {"i2", at::arange(2, at::kLong)}}},
                 {"hollow", std::vector<TensorDict::Item>{}}},
                {2});
  check_as_read(td);
  // Interleaved dtypes: many runs, so the leaves are made at once as views of the bytes.
  TensorDict many({}, {1});
  for (int i = 0; i < 12; ++i) many.set("k" + std::to_string(i), i % 2 ? at::ones({1, 3}) : at::ones({1, 3}, at::kLong));
  check_as_read(many);
  // One leaf only; and no leaf at all.
  check_as_read(TensorDict({{"only", at::randn({4})}}, {4}));
  check_as_read(TensorDict({{"n", std::vector<TensorDict::Item>{}}}, {}));
}

TEST_CASE("consolidate's tree is the one its metadata reads back as: names, non-tensor data, lock, device",
          "[unit][consolidate_views]") {
  TensorDict td = groups_of_floats();
  td.set_non_tensor("label", json::Value("walker"));
  td.set_non_tensor(NestedKey({"g1", "step"}), json::Value(int64_t{7}));
  td.refine_names({"time"});
  td.lock_();
  check_as_read(td);
  TensorDict partly({{"a", at::randn({2, 3, 4})}}, {2, 3});
  partly.refine_names({std::nullopt, "col"});
  check_as_read(partly);
  // An explicit device: every level gets it, as the reader gives it.
  TensorDict on_cpu({{"a", at::randn({2})}, {"n", {{"b", at::randn({2, 2})}}}}, {2}, at::Device(at::kCPU));
  const TensorDict built = consolidate(on_cpu);
  const TensorDict read = tensordict::detail::rebuild_consolidated(consolidated_storage(built), consolidated_metadata(built), "ref");
  same_tree(built, read, "root");
  CHECK(built.get_tensordict("n").device() == at::Device(at::kCPU));
}

TEST_CASE("consolidate's tree of a stored tree is the one its metadata reads back as", "[unit][consolidate_views]") {
  // Other backends' for_each may hand keys and entries over as temporaries: what is kept past an
  // entry (non-tensor data, nested levels, appended last) is copied.
  testing_support::TempDir dir;
  TensorDict td = groups_of_floats();
  td.set_non_tensor("label", json::Value("walker"));
  td.set_non_tensor(NestedKey({"g1", "step"}), json::Value(int64_t{7}));
  const TensorDict stored = memmap(td, dir / "memmap");
  check_as_read(stored);
  CHECK(consolidate(stored).get_non_tensor(NestedKey({"g1", "step"})) == json::Value(int64_t{7}));
#if TENSORDICT_TEST_HDF5
  PersistentTensorDict h5 = PersistentTensorDict::to_h5(td, dir / "tree.h5");
  check_as_read(h5);
  h5.close();
#endif
}

TEST_CASE("a tree holding a lazy stack is consolidated through its metadata", "[unit][consolidate_views]") {
  TensorDict a({{"x", at::randn({3})}}, {});
  TensorDict b({{"x", at::randn({3})}}, {});
  // (stacked: batch [2], the leaf [2, 3])
  TensorDict td({{"top", at::randn({2, 2})}}, {2});
  td.set("stack", LazyStackedTensorDict({a, b}, 0));
  const TensorDict built = consolidate(td);
  CHECK(built.get_tensordict("stack").impl()->type_name() == std::string("LazyStackedTensorDict"));
  same_tree(built, tensordict::detail::rebuild_consolidated(consolidated_storage(built), consolidated_metadata(built), "ref"), "root");
  CHECK(at::equal(built.get({"stack", "x"}), td.get({"stack", "x"})));
}

TEST_CASE("consolidate's tree reads the values packed, and its metadata describes it", "[unit][consolidate_views]") {
  TensorDict td = groups_of_floats();
  td.set("i", at::arange(8, at::kLong).view({4, 2}));
  const TensorDict c = consolidate(td);
  for (const auto& key : td.keys(true, true)) {
    INFO(key.repr());
    CHECK(at::equal(c.get(key), td.get(key)));
  }
  // Its metadata is what packing the source writes, and reads back as a tree of its keys.
  CHECK(to_bytes(c) == to_bytes(td));
  const TensorDict back = from_bytes(to_bytes(c));
  CHECK(back.keys(true) == c.keys(true));
}

}  // namespace consolidate_views_test
