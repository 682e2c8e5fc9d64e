// Trees over a few runs kept intact (issue 34, Note [Intact runs]): a consolidated tensordict of
// mixed dtypes or with Python's padding keeps where each leaf lies in its runs, so an op over it
// runs once a run even after its leaves were read, checking each made leaf against its record,
// and an op's result over runs does the same. Kernels are counted with a RecordFunction callback.
#include "support/catch_torch.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/entry.h>
#include <tensordict/ops.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/intact_runs.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "support/runs_fixtures.h"

using namespace tensordict;

// A namespace of its own, not an anonymous one: the sanitizer build compiles test files together.
namespace intact_runs_test {
namespace {

using runs_fixtures::KernelCount;
using runs_fixtures::mixed;
using runs_fixtures::read_all;
using runs_fixtures::require_same;

size_t runs_of(const TensorDict& td) {
  const auto runs = in_memory::intact_runs(*td.impl());
  return runs ? runs->storages.size() : 0;
}

// 3-float leaves, each followed by 4 bytes of padding in Python's layout.
TensorDict padded(int leaves) {
  TensorDict td({}, {3});
  for (int i = 0; i < leaves; ++i) td.set("l" + std::to_string(i), at::randn({3}));
  return td;
}

// `bytes` (to_bytes' layout: storage, metadata, its length) with `from` replaced by `to` in the
// metadata.
std::string edit_metadata(const std::string& bytes, const std::string& from, const std::string& to) {
  int64_t m = 0;
  std::memcpy(&m, bytes.data() + bytes.size() - 8, 8);
  const size_t meta_at = bytes.size() - 8 - static_cast<size_t>(m);
  std::string meta = bytes.substr(meta_at, static_cast<size_t>(m));
  const size_t at = meta.find(from);
  REQUIRE(at != std::string::npos);
  meta.replace(at, from.size(), to);
  const auto length = static_cast<int64_t>(meta.size());
  std::string out = bytes.substr(0, meta_at) + meta;
  out.append(reinterpret_cast<const char*>(&length), 8);
  return out;
}

}  // namespace

TEST_CASE("a mixed consolidated tensordict whose leaves were read runs each op once per dtype",
          "[unit][packed][runs][intact]") {
  const TensorDict x = mixed(), y = mixed();
  const TensorDict a = consolidate(x), b = consolidate(y);
  CHECK(runs_of(a) == 3);  // unread: float, double and int64 runs of one storage
  const std::vector<at::Tensor> held_a = read_all(a), held_b = read_all(b);
  CHECK(runs_of(a) == 3);  // read: its leaves are as made
  TensorDict out;
  CHECK(KernelCount::of("aten::exp", [&] { out = a.exp(); }) == 3);
  require_same(out, x.exp());
  CHECK(runs_of(out) == 3);
  CHECK(KernelCount::of("aten::add", [&] { out = a + b; }) == 3);
  require_same(out, x + y);
  out = a.gt(b);  // (contiguous comparisons run a loop of their own, not counted)
  require_same(out, x.gt(y));
  CHECK(runs_fixtures::storages(out) == 3);  // one result a run
  CHECK(KernelCount::of("aten::clone", [&] { out = a.clone(); }) == 3);
  require_same(out, x);
  // An op's result and its operand are laid out alike but for where their runs start: per run
  // of the leaves, the same values.
  require_same(a + out, x + x);
}

TEST_CASE("a result over runs is one deferred level sharing its operand's shape until read",
          "[unit][packed][runs][intact]") {
  const TensorDict x = mixed();
  const TensorDict a = consolidate(x);
  const auto deferred = [](const TensorDict& td) {
    return static_cast<const TensorDictImpl*>(td.impl())->is_deferred();
  };
  const TensorDict once = a * 2;
  CHECK(deferred(once));
  const auto runs = in_memory::intact_runs(*once.impl());
  REQUIRE(runs);
  CHECK(runs->canonical);  // every level numbers the three runs alike
  // A chain runs once a run and leaves its middle result unread.
  TensorDict twice;
  CHECK(KernelCount::of("aten::exp", [&] { twice = once.exp(); }) == 3);
  CHECK(deferred(once));
  CHECK(deferred(twice));
  require_same(twice, (x * 2).exp());  // read: built from the shape, leaves where the records say
  CHECK_FALSE(deferred(twice));
  CHECK(runs_of(twice) == 3);
  // Read, then an op between it and a fresh result of the same shape: laid out alike.
  TensorDict sum;
  CHECK(KernelCount::of("aten::add", [&] { sum = twice + a.exp(); }) == 3);
  require_same(sum, (x * 2).exp() + x.exp());
}

TEST_CASE("in place over a mixed consolidated tensordict: once per dtype, held leaves see it and are bumped",
          "[unit][packed][runs][intact]") {
  TensorDict x = mixed();
  TensorDict a = consolidate(x);
  const std::vector<at::Tensor> held = read_all(a);
  const auto version = held.front()._version();
  CHECK(KernelCount::of("aten::abs_", [&] { a.abs_(); }) == 3);
  CHECK(held.front()._version() > version);
  x.abs_();
  require_same(a, x);
  TensorDict y = mixed();
  TensorDict b = consolidate(y);
  read_all(b);
  CHECK(KernelCount::of("aten::add_", [&] { b.add_(a); }) == 3);
  y.add_(x);
  require_same(b, y);
  // An op's result over runs: its leaves have version counters of their own, each bumped.
  TensorDict result = b * 2;
  const at::Tensor r0 = result.get("f0");
  const auto before = r0._version();
  CHECK(KernelCount::of("aten::add_", [&] { result.add_(1); }) <= 4);
  CHECK(r0._version() > before);
  require_same(result, y * 2 + 1);
}

TEST_CASE("a made leaf changed through its handle, or needing grad, is seen by the next op",
          "[unit][packed][runs][intact]") {
  const TensorDict x = mixed();
  const TensorDict a = consolidate(x);
  at::Tensor f0 = a.get("f0");
  f0.set_(at::zeros({4, 3}));
  CHECK(runs_of(a) == 0);
  CHECK(at::equal(a.exp().get("f0"), at::ones({4, 3})));
  const TensorDict b = consolidate(x);
  at::Tensor d0 = b.get("d0");
  d0.as_strided_({2}, {2});
  CHECK(runs_of(b) == 0);
  CHECK(b.exp().get("d0").sizes() == at::IntArrayRef{2});
  // Needing grad: autograd records the op on that leaf.
  TensorDict c = consolidate(x);
  at::Tensor f3 = c.get("f3");
  f3.requires_grad_(true);
  CHECK(runs_of(c) == 0);
  (c * 3).get("f3").sum().backward();
  CHECK(at::equal(f3.grad(), at::full({4, 2}, 3.f)));
  // Written: the records are dropped.
  TensorDict d = consolidate(x);
  d.unlock_();
  d.set("f0", at::ones({4, 3}));
  CHECK(runs_of(d) == 0);
  CHECK(at::equal(d.exp().get("f0"), at::ones({4, 3}).exp()));
}

TEST_CASE("Python's padding: a consolidated tensordict read runs one kernel over its padded run",
          "[unit][packed][runs][intact]") {
  const TensorDict x = padded(6), y = padded(6);
  const TensorDict a = consolidate(x), b = consolidate(y);
  read_all(a);
  read_all(b);
  CHECK(runs_of(a) == 1);
  TensorDict out;
  CHECK(KernelCount::of("aten::exp", [&] { out = a.exp(); }) == 1);
  require_same(out, x.exp());
  CHECK(KernelCount::of("aten::mul", [&] { out = a * b; }) == 1);
  require_same(out, x * y);
  out = a.lt(b);
  require_same(out, x.lt(y));
  CHECK(runs_fixtures::storages(out) == 1);
}

TEST_CASE("reductions, all(), any() and (a == b).all() read the runs of a read tree whole, never padding",
          "[unit][packed][runs][intact]") {
  const TensorDict x = mixed();
  const TensorDict a = consolidate(x), b = consolidate(x.clone()), c = consolidate(mixed());
  read_all(a);
  const auto runs = in_memory::intact_runs(*a.impl());
  REQUIRE(runs);
  CHECK(runs->exact);
  CHECK(at::allclose(a.sum(reduce), x.sum(reduce), 1e-5, 1e-5));
  CHECK(at::allclose(a.mean(reduce), x.mean(reduce), 1e-5, 1e-5));
  CHECK(at::equal(a.amax(reduce), x.amax(reduce)));
  CHECK((a == b).all());
  CHECK_FALSE((a == c).all());
  const TensorDict above = a.gt(-100);  // bools over three runs, unread
  CHECK(runs_of(above) == 3);
  CHECK(above.all());
  CHECK_FALSE(a.gt(100).any());
  CHECK(a.lt(0).any() == x.lt(0).any());
  // Padded: the runs hold padding, so these go leaf by leaf (where the padding is not read).
  const TensorDict plain = padded(5);
  const TensorDict p = consolidate(plain);
  const auto padded_runs = in_memory::intact_runs(*p.impl());
  REQUIRE(padded_runs);
  CHECK_FALSE(padded_runs->exact);
  const TensorDict ones = consolidate(TensorDict({{"a", at::ones({3})}, {"b", at::ones({3})}}, {3}));
  CHECK(ones.gt(0).all());  // a padding image read as false would fail it
  CHECK(at::allclose((p * 2).sum(reduce), (plain * 2).sum(reduce), 1e-5, 1e-5));
}

TEST_CASE("in place over Python's padding: one kernel a run, the padding's bytes as they were",
          "[unit][packed][runs][intact]") {
  TensorDict x = padded(6);
  TensorDict a = consolidate(x);
  const std::string before = to_bytes(a);
  read_all(a);
  CHECK(KernelCount::of("aten::add_", [&] { a.add_(1); }) == 1);
  x.add_(1);
  require_same(a, x);
  const at::Tensor storage = consolidated_storage(a);
  for (int i = 0; i < 6; ++i) {
    INFO(i);
    CHECK(storage.narrow(0, i * 16 + 12, 4).eq(0).all().item<bool>());  // still zeros
  }
  // The same values give the same bytes.
  CHECK(KernelCount::of("aten::fill_", [&] { a.fill_(2); }) == 1);
  x.fill_(2);
  CHECK(to_bytes(a) == to_bytes(consolidate(x)));
  CHECK(before.size() == to_bytes(a).size());
}

TEST_CASE("padding kept through an error; padding after the last leaf and a run a result drops leave one storage",
          "[unit][packed][runs][intact]") {
  // Padded floats, then int64 leaves: add_(0.5) writes the float run, then fails on the first
  // int64 leaf. The padding (set to a pattern here) is put back all the same.
  TensorDict x({}, {3});
  for (int i = 0; i < 4; ++i) x.set("f" + std::to_string(i), at::randn({3}));
  x.set("i0", at::ones({3}, at::kLong));
  x.set("i1", at::ones({3}, at::kLong));
  TensorDict a = consolidate(x);
  const at::Tensor bytes = consolidated_storage(a);
  for (int i = 0; i < 4; ++i) bytes.narrow(0, i * 16 + 12, 4).fill_(0xA5);
  const at::Tensor before = bytes.clone();
  CHECK_THROWS_WITH(a.add_(0.5), Catch::Contains("'i0'"));
  CHECK(at::allclose(a.get("f2"), x.get("f2") + 0.5));
  for (int i = 0; i < 4; ++i) {
    INFO(i);
    CHECK(at::equal(bytes.narrow(0, i * 16 + 12, 4), before.narrow(0, i * 16 + 12, 4)));
  }
  // One dtype whose only padding follows its last leaf: its leaves tile the storage's start.
  const TensorDict tail = consolidate(TensorDict({{"a", at::randn({4})}, {"b", at::randn({3})}}, {}));
  CHECK(consolidated_storage(tail).numel() == 32);
  CHECK(in_memory::intact_packed_storage(*tail.impl()).defined());
  read_all(tail);
  CHECK(in_memory::intact_packed_storage(*tail.impl()).defined());
  // `to` the float run's own dtype: those leaves are the operand's, the int64 run's one storage.
  TensorDict y({}, {4});
  y.set({"n", "a"}, at::randn({4}));
  y.set({"n", "b"}, at::randn({4}));
  y.set({"m", "i"}, at::randint(0, 9, {4}, at::kLong));
  y.set({"m", "j"}, at::randint(0, 9, {4}, at::kLong));
  const TensorDict c = consolidate(y);
  const TensorDict floats = c.to(at::kFloat);
  CHECK(floats.get({"n", "a"}).is_same(c.get({"n", "a"})));
  const TensorDict m = floats.get_tensordict("m");
  CHECK(in_memory::intact_packed_storage(*m.impl()).defined());
  require_same(floats, y.to(at::kFloat));
}

TEST_CASE("a nested level over part of the runs, or a run through another leaf, is never taken whole",
          "[unit][packed][runs][intact]") {
  // n fills the float run exactly, and lists the int64 run its leaves do not view.
  TensorDict x({}, {4});
  x.set({"n", "a"}, at::randn({4}));
  x.set({"n", "b"}, at::randn({4}));
  x.set("i", at::randint(0, 9, {4}, at::kLong));
  x.set("j", at::randint(0, 9, {4}, at::kLong));
  const TensorDict a = consolidate(x);
  TensorDict n = a.get_tensordict("n");
  require_same(n * 2, x.get_tensordict("n") * 2);
  n.mul_(2);
  x.get_tensordict("n").mul_(2);
  require_same(a, x);
  // An empty float leaf inside a double one must not open a run across that double's bytes.
  TensorDict y({}, {});
  y.set("A", at::tensor({1.5, 2.5}, at::kDouble));
  y.set("e", at::zeros({0}));
  y.set("f", at::tensor({3.f}));
  y.set("g", at::tensor({4.f}));
  const std::string bytes = to_bytes(consolidate(y));
  const std::string e_spec = consolidated_metadata(consolidate(y)).find("leaves")->find("e")->dump();
  TensorDict moved = from_bytes(edit_metadata(bytes, e_spec, R"(["torch.float32",[0],12,12,0])"));
  CHECK(moved.get("e").storage_offset() == 3);  // bytes 12-16: inside A
  moved.mul_(2);
  CHECK(at::equal(moved.get("A"), at::tensor({3.0, 5.0}, at::kDouble)));
  CHECK(at::equal(moved.get("g"), at::tensor({8.f})));
}

// Each level's counts by flat (LazyLeaves::per_flat, what the runs walk adds up) against its records
// decoded one by one; then its nested levels'. Returns the levels checked.
int require_counts_match_records(const TensorDictBase& td) {
  const TensorDictImpl* level = in_memory::packed_level(td);
  REQUIRE(level != nullptr);
  int checked = 0;
  if (const LazyLeaves* layout = level->packed_layout()) {
    FlatCounts decoded;
    for (size_t i = 0; i < layout->records.size();) {
      const LazyLeaves::Record r = layout->next(i);
      decoded.add(r.storage, c10::multiply_integers(r.sizes), 1);
    }
    CHECK(std::vector<int64_t>(layout->per_flat.elements.begin(), layout->per_flat.elements.end()) ==
          std::vector<int64_t>(decoded.elements.begin(), decoded.elements.end()));
    CHECK(std::vector<int64_t>(layout->per_flat.leaves.begin(), layout->per_flat.leaves.end()) ==
          std::vector<int64_t>(decoded.leaves.begin(), decoded.leaves.end()));
    ++checked;
  }
  level->for_each_slot([&](const TensorDictImpl::Slot& slot) {
    if (slot.value.is_tensordict()) checked += require_counts_match_records(*slot.value.tensordict_unchecked().impl());
  });
  return checked;
}

TEST_CASE("each level counts its leaves by run as its records say; a kept shape still sees a written nested level",
          "[unit][packed][runs][intact]") {
  const TensorDict x = mixed();
  const TensorDict a = consolidate(x);
  const size_t runs = runs_of(a);
  REQUIRE(runs >= 2);
  // Consolidated; an op's result built from its shape (read, so materialized); a result whose
  // float run is dropped (`to` its own dtype: those leaves per leaf, the others copied record by
  // record).
  CHECK(require_counts_match_records(*a.impl()) >= 2);
  const TensorDict doubled = a * 2;
  const auto held = read_all(doubled);
  CHECK(require_counts_match_records(*doubled.impl()) >= 2);
  CHECK(runs_of(doubled) == runs);
  const TensorDict as_float = a.to(at::kFloat);
  read_all(as_float);
  require_counts_match_records(*as_float.impl());
  require_same(as_float, x.to(at::kFloat));
  // The ops above kept shapes on a's levels. Writing a nested level drops its records, not its
  // parent's shape: the walk, which finds the nested levels in that shape, still refuses the tree.
  const auto leaves = read_all(a);
  CHECK(runs_of(a) == runs);
  TensorDict root = a;
  root.unlock_();
  root.set({"n", "x"}, at::full({4}, 7.f));
  CHECK(in_memory::packed_level(*a.impl())->shape() != nullptr);  // the root's shape is kept
  CHECK(runs_of(a) == 0);
  const TensorDict tripled = a * 3;
  CHECK(at::equal(tripled.get({"n", "x"}), at::full({4}, 21.f)));
}

TEST_CASE("ops over a tree of runs while other threads read its leaves agree", "[unit][packed][runs][intact]") {
  // Readers make the leaves of a result over runs (deferred, then built), cache shapes and check
  // made leaves while the ops run: every op only reads the tree (writes are not concurrent with
  // reads). No Catch assertion off the main thread (Catch is not thread-safe): results and counts
  // are checked after the join.
  const TensorDict x = mixed();
  const TensorDict expected_sum = x * 2 + x * 2, expected_clone = x * 2;
  const TensorDict expected_fma = (x * 2).addcmul(x * 2, x * 2, 2);
  for (int round = 0; round < 10; ++round) {
    const TensorDict r = consolidate(x) * 2;  // deferred over three runs
    std::vector<int> undefined(2, 0);
    std::vector<TensorDict> sums(2), clones(2), fmas(2);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        for (const NestedKey& k : r.keys(true, true)) {
          if (!r.get(k).defined()) ++undefined[t];
        }
      });
      threads.emplace_back([&, t] {
        for (int i = 0; i < 5; ++i) {
          sums[t] = r + r;
          clones[t] = r.clone();
          fmas[t] = r.addcmul(r, r, 2);  // three operands' runs compared and read
        }
      });
    }
    for (std::thread& t : threads) t.join();
    CHECK(undefined[0] + undefined[1] == 0);
    for (int t = 0; t < 2; ++t) {
      require_same(sums[t], expected_sum);
      require_same(clones[t], expected_clone);
      require_same(fmas[t], expected_fma);
    }
    CHECK(runs_of(r) == 3);  // read by every thread, still intact
  }
  // Reductions over padding decode the leaves' spans from the records while readers make leaves.
  TensorDict padded({}, {3});
  for (int i = 0; i < 8; ++i) padded.set({i < 4 ? "a" : "b", "l" + std::to_string(i)}, at::randn({3, 5}));
  const at::Tensor expected = padded.sum(reduce);
  for (int round = 0; round < 10; ++round) {
    const TensorDict c = consolidate(padded);
    std::vector<at::Tensor> reduced(2);
    std::vector<int> undefined(2, 0);
    std::vector<std::thread> threads;
    for (int t = 0; t < 2; ++t) {
      threads.emplace_back([&, t] {
        for (const NestedKey& k : c.keys(true, true)) {
          if (!c.get(k).defined()) ++undefined[t];
        }
      });
      threads.emplace_back([&, t] {
        for (int i = 0; i < 5; ++i) reduced[t] = c.sum(reduce);
      });
    }
    for (std::thread& t : threads) t.join();
    CHECK(undefined[0] + undefined[1] == 0);
    for (int t = 0; t < 2; ++t) CHECK(at::allclose(reduced[t], expected, 1e-5, 1e-5));
  }
}

TEST_CASE("trees laid out otherwise, nested levels and integer padding take the per-leaf or runs path",
          "[unit][packed][runs][intact]") {
  // The same leaves set in another key order: laid out otherwise, matched by key, the same values.
  const TensorDict x = mixed();
  const std::vector<NestedKey> keys = x.keys(true, true);
  TensorDict z({}, {4});
  for (auto k = keys.rbegin(); k != keys.rend(); ++k) z.set(*k, x.get(*k).clone());
  const TensorDict a = consolidate(x), c = consolidate(z);
  CHECK(runs_of(c) == 3);
  require_same(a + c, x + z);
  require_same(a.lt(c), x.lt(z));
  // A nested level holds part of each run: never a tree over runs of its own.
  const TensorDict nested = a.get_tensordict("n");
  CHECK(runs_of(nested) == 0);
  require_same(nested * 2, x.get_tensordict("n") * 2);
  // 4-byte integers with padding never run over it: one run a leaf gains nothing, leaves made at once.
  TensorDict ints({}, {3});
  for (int i = 0; i < 4; ++i) ints.set("i" + std::to_string(i), at::randint(-5, 5, {3}, at::kInt));
  const TensorDict ci = consolidate(ints);
  CHECK(runs_of(ci) == 0);
  require_same(ci * 3, ints * 3);
  // A lazy stack in the tree: its members view the storage, made at once.
  const TensorDict stacked = consolidate(LazyStackedTensorDict({mixed(), mixed()}, 0));
  CHECK(runs_of(stacked) == 0);
}

}  // namespace intact_runs_test
