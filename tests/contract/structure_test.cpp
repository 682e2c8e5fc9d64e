// Contract: the structure methods of Python's TensorDictBase (issue 33): new_* constructors,
// dtype / depth / sorted_keys / is_contiguous / grad / detach_ / expand_as, the key-tree edits
// (popitem, create_nested, fromkeys, filters, clear, clear_device_, replace, auto_batch_size_),
// clamp bounds given as tensordicts or tensors, and share_memory_ across fork().
#include "support/catch_torch.h"

#include <sys/wait.h>
#include <type_traits>
#include <unistd.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/ops.h>

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;
using contract::joined_keys;
using contract::Sizes;
using contract::sizes_of;
using contract::Strings;

namespace {
TensorDict structured() {
  return TensorDict({{"a", at::randn({3, 4})}, {"n", {{"i", at::ones({3, 2}, at::kLong)}}}, {"s", "tag"}}, {3});
}

bool all_equal(const at::Tensor& t, double value) { return at::equal(t, at::full_like(t, value)); }
}  // namespace

TEMPLATE_LIST_TEST_CASE("new_zeros, new_ones, new_full and new_empty keep the structure under a new batch size",
                        "[contract][structure]", ContractBackends) {
  TensorDict td = TestType::make(structured());
  TensorDict z = td.new_zeros({2, 5});
  CHECK(sizes_of(z.batch_size()) == Sizes{2, 5});
  CHECK(sizes_of(z.get("a").sizes()) == Sizes{2, 5, 4});
  CHECK(all_equal(z.get("a"), 0));
  CHECK(z.get({"n", "i"}).scalar_type() == at::kLong);
  CHECK(sizes_of(z.get({"n", "i"}).sizes()) == Sizes{2, 5, 2});
  CHECK(sizes_of(z.get_tensordict("n").batch_size()) == Sizes{2, 5});
  CHECK(z.get_non_tensor("s").value().as_string() == "tag");
  CHECK_FALSE(z.is_locked());
  CHECK(all_equal(td.new_ones({2}).get({"n", "i"}), 1));
  CHECK(all_equal(td.new_full({1}, 7).get("a"), 7));
  CHECK(sizes_of(td.new_empty({}).get("a").sizes()) == Sizes{4});
  NewOptions doubles;
  doubles.dtype = at::kDouble;
  CHECK(dtype(td.new_zeros({2}, doubles)) == at::kDouble);
  CHECK(td.get("a").scalar_type() == at::kFloat);  // the source is untouched
  // A device asked for: the result and its nested levels are on it, and so is every leaf.
  NewOptions on_cpu;
  on_cpu.device = at::Device(at::kCPU);
  on_cpu.dtype = at::kDouble;  // every leaf floating, so that it can require grad
  on_cpu.requires_grad = true;
  TensorDict placed = td.new_ones({2}, on_cpu);
  CHECK(placed.device() == std::optional<at::Device>(at::kCPU));
  CHECK(placed.get_tensordict("n").device() == std::optional<at::Device>(at::kCPU));
  CHECK(placed.get("a").device().is_cpu());
  CHECK(placed.get("a").requires_grad());
  CHECK(placed.keys(true) == td.keys(true));  // in the source's order
}

TEMPLATE_LIST_TEST_CASE("new_tensor copies the data into every leaf in the leaf's dtype", "[contract][structure]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({3})}, {"b", at::zeros({3}, at::kLong)}}, {3}));
  const at::Tensor data = at::tensor({1.5, 2.5}, at::kDouble);
  TensorDict t = td.new_tensor(data);
  CHECK(sizes_of(t.batch_size()) == Sizes{2});
  CHECK(at::equal(t.get("a"), at::tensor({1.5f, 2.5f})));
  CHECK(at::equal(t.get("b"), at::tensor({1, 2}, at::kLong)));
  CHECK(t.get("a").data_ptr() != data.data_ptr());  // a copy
  TensorDict by_key = td.new_tensor(TensorDict({{"a", at::ones({4})}, {"b", at::full({4}, 3.0)}}, {4}));
  CHECK(at::equal(by_key.get("b"), at::full({4}, 3, at::kLong)));
  CHECK_THROWS_AS(td.new_tensor(TensorDict({{"a", at::ones({4})}}, {4})), KeyError);
}

TEMPLATE_LIST_TEST_CASE("dtype, depth, sorted_keys and is_contiguous describe the leaves", "[contract][structure]",
                        ContractBackends) {
  TensorDict mixed = TestType::make(structured());
  CHECK_FALSE(dtype(mixed).has_value());
  TensorDict floats = TestType::make(TensorDict({{"b", at::ones({2})}, {"a", {{"m", {{"x", at::ones({2})}}}}}}, {2}));
  REQUIRE(dtype(floats).has_value());
  CHECK(*dtype(floats) == at::kFloat);
  CHECK(depth(floats) == 2);
  CHECK(depth(mixed) == 1);
  CHECK(floats.sorted_keys() == Strings{"a", "b"});
  CHECK(floats.contiguous().is_contiguous());
}

TEST_CASE("is_contiguous is false for a transposed leaf, depth ignores empty levels", "[structure]") {
  TensorDict td({{"x", at::zeros({3, 2}).t()}}, {2});
  CHECK_FALSE(td.is_contiguous());
  CHECK(td.contiguous().is_contiguous());
  TensorDict empty_levels({{"a", {{"b", TensorDict()}}}});
  CHECK(depth(empty_levels) == 0);  // as Python: no leaf below
  CHECK_FALSE(dtype(TensorDict()).has_value());
}

TEMPLATE_LIST_TEST_CASE("grad gathers the leaves' gradients, detach_ drops the history", "[contract][structure]",
                        ContractBackends) {
  TensorDict plain = TestType::make(structured());
  std::optional<TensorDict> none = grad(plain.filter_non_tensor_data());
  CHECK_FALSE(none.has_value());  // nothing has a gradient: Python's None
  if constexpr (!TestType::kStoresAutograd) return;  // files and stores refuse such leaves
  at::Tensor w = at::ones({2}).requires_grad_(true);
  TensorDict td = TestType::make(TensorDict({{"w", w}, {"c", at::zeros({2})}, {"s", "kept"}}, {2}));
  if (!TestType::kLeavesAliasStorage && !TestType::kLazyStack) {
    // Reads are copies: detaching one that requires grad would leave the stored tensor attached.
    if (td.get("w").requires_grad()) {
      CHECK_THROWS_AS(td.detach_(), NotImplementedError);
    } else {
      CHECK_NOTHROW(td.detach_());
    }
    return;
  }
  // A memory-mapped or consolidated copy of the leaves keeps no history.
  if (std::is_same_v<TestType, contract::InMemoryBackend>) REQUIRE(td.get("w").requires_grad());
  if (td.get("w").requires_grad()) {
    (td.get("w") * 3).sum().backward();
    std::optional<TensorDict> g = grad(td);
    REQUIRE(g.has_value());
    if (TestType::kLazyStack) {
      // The members' tensors are views of w (unbind), not leaves: autograd gives them no .grad.
      CHECK(joined_keys(*g) == Strings{"s"});
      CHECK(at::equal(w.grad(), at::full({2}, 3.0)));
    } else {
      CHECK(joined_keys(*g) == Strings{"w", "s"});  // no gradient for c; non-tensor data kept
      CHECK(at::equal(g->get("w"), at::full({2}, 3.0)));
    }
    if (TestType::kLazyStack) {
      // The members are views of one tensor (unbind): LibTorch detaches no view in place.
      CHECK_THROWS_AS(td.detach_(), RuntimeError);
    } else {
      td.detach_();
      CHECK_FALSE(td.get("w").requires_grad());
    }
  }
}

TEMPLATE_LIST_TEST_CASE("expand_as takes a tensor's shape or a tensordict's leaves", "[contract][structure]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::ones({3, 1})}, {"n", {{"c", at::ones({3})}}}}, {3}));
  TensorDict by_tensor = td.expand_as(at::zeros({2, 3}));
  CHECK(sizes_of(by_tensor.batch_size()) == Sizes{2, 3});
  CHECK(sizes_of(by_tensor.get("a").sizes()) == Sizes{2, 3, 1});
  TensorDict target({{"a", at::zeros({2, 3, 5})}, {"n", {{"c", at::zeros({2, 3})}}}}, {2, 3});
  TensorDict by_td = td.expand_as(target);
  CHECK(sizes_of(by_td.batch_size()) == Sizes{2, 3});
  CHECK(sizes_of(by_td.get("a").sizes()) == Sizes{2, 3, 5});
  CHECK(sizes_of(by_td.get({"n", "c"}).sizes()) == Sizes{2, 3});
  CHECK_THROWS_AS(td.expand_as(TensorDict({{"a", at::zeros({2, 3, 5})}}, {2, 3})), KeyError);
}

TEMPLATE_LIST_TEST_CASE("popitem, create_nested, clear and filter_empty_ edit the key tree", "[contract][structure]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::ones({2})}, {"n", {{"x", at::ones({2})}}}, {"c", at::zeros({2})}}, {2}));
  if (td.is_locked()) {
    CHECK_THROWS_AS(td.popitem(), LockedError);
    CHECK_THROWS_AS(td.create_nested("m"), LockedError);
    CHECK_THROWS_AS(td.clear(), LockedError);
    CHECK(td.num_keys() == 3);
    return;
  }
  auto [key, value] = td.popitem();
  CHECK(key == "c");
  CHECK(at::equal(value.tensor(), at::zeros({2})));
  CHECK(joined_keys(td) == Strings{"a", "n"});
  td.create_nested({"n", "m"});  // the existing level "n" keeps its entries
  CHECK(joined_keys(td, true) == Strings{"a", "n", "n.x", "n.m"});
  CHECK(sizes_of(td.get_tensordict({"n", "m"}).batch_size()) == Sizes{2});
  td.create_nested({"p", "q"});
  td.filter_empty_();  // n.m, p.q, then p: no leaf below
  CHECK(joined_keys(td, true) == Strings{"a", "n", "n.x"});
  td.clear();
  CHECK(td.num_keys() == 0);
  CHECK(sizes_of(td.batch_size()) == Sizes{2});
  CHECK_THROWS_AS(td.popitem(), KeyError);
}

TEMPLATE_LIST_TEST_CASE("filter_non_tensor_data and non_tensor_items split tensors from other data",
                        "[contract][structure]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::ones({2})}, {"s", "top"}, {"n", {{"t", "inner"}, {"x", at::ones({2})}}}}, {2}));
  TensorDict tensors = td.filter_non_tensor_data();
  CHECK(joined_keys(tensors, true) == Strings{"a", "n", "n.x"});
  auto top = td.non_tensor_items();
  REQUIRE(top.size() == 1);
  CHECK(top[0].first == NestedKey("s"));
  CHECK(top[0].second.value().as_string() == "top");
  auto all = td.non_tensor_items(/*include_nested=*/true);
  REQUIRE(all.size() == 2);
  CHECK(all[1].first == NestedKey({"n", "t"}));
}

TEMPLATE_LIST_TEST_CASE("replace gives a new tree with the entries set over it", "[contract][structure]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::ones({2})}, {"b", at::zeros({2})}}, {2}));
  TensorDict replaced = td.replace(TensorDict({{"b", at::full({2}, 5.0)}, {"c", at::ones({2})}}, {2}));
  CHECK(joined_keys(replaced) == Strings{"a", "b", "c"});
  CHECK(all_equal(replaced.get("b"), 5));
  CHECK(all_equal(td.get("b"), 0));  // the source keeps its entries
  CHECK_FALSE(replaced.is_locked());
  CHECK(td.replace(TensorDict({}, {2})).is_same(td));
}

TEMPLATE_LIST_TEST_CASE("clamp_min and clamp_max take tensordict and tensor bounds", "[contract][structure]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::tensor({-2.0f, 0.5f, 3.0f})}, {"n", {{"b", at::tensor({1.0f, 2.0f, 3.0f})}}}}, {3}));
  TensorDict lows({{"a", at::zeros({3})}, {"n", {{"b", at::full({3}, 2.0)}}}}, {3});
  TensorDict lo = td.clamp_min(lows);
  CHECK(at::equal(lo.get("a"), at::tensor({0.0f, 0.5f, 3.0f})));
  CHECK(at::equal(lo.get({"n", "b"}), at::tensor({2.0f, 2.0f, 3.0f})));
  TensorDict hi = td.clamp_max(at::tensor({0.0f, 1.0f, 2.0f}));  // aligned to the batch dim
  CHECK(at::equal(hi.get("a"), at::tensor({-2.0f, 0.5f, 2.0f})));
  CHECK(at::equal(hi.get({"n", "b"}), at::tensor({0.0f, 1.0f, 2.0f})));
  CHECK_THROWS_AS(td.clamp_min(TensorDict({{"a", at::zeros({3})}}, {3})), KeyError);
  TensorDict partial = td.clamp_min(TensorDict({{"a", at::zeros({3})}}, {3}), BinaryDefault::intersection());
  CHECK(joined_keys(partial, true) == Strings{"a"});
  td.clamp_max_(lows);
  CHECK(at::equal(td.get("a"), at::tensor({-2.0f, 0.0f, 0.0f})));
  td.clamp_min_(at::zeros({3}));
  CHECK(at::equal(td.get({"n", "b"}), at::tensor({1.0f, 2.0f, 2.0f})));
}

TEMPLATE_LIST_TEST_CASE("clear_device_ forgets the device, the tensors stay", "[contract][structure]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::ones({2})}, {"n", {{"b", at::ones({2})}}}}, {2}, at::Device(at::kCPU)));
  td.clear_device_();
  CHECK_FALSE(td.device().has_value());
  CHECK(td.get("a").is_cpu());
}

TEST_CASE("fromkeys gives each key its value", "[structure]") {
  TensorDict zeros = TensorDict::fromkeys({NestedKey("a"), NestedKey({"n", "b"})});
  CHECK(joined_keys(zeros, true) == Strings{"a", "n", "n.b"});
  CHECK(zeros.get("a").scalar_type() == at::kLong);
  CHECK(zeros.get("a").data_ptr() != zeros.get({"n", "b"}).data_ptr());  // one tensor per key
  CHECK(TensorDict::fromkeys({NestedKey("x")}, 0.5).get("x").scalar_type() == at::kFloat);
  CHECK(TensorDict::fromkeys({NestedKey("x")}, true).get("x").scalar_type() == at::kBool);
  const at::Tensor shared = at::ones({3});
  TensorDict same = TensorDict::fromkeys({NestedKey("a"), NestedKey("b")}, shared);
  CHECK(same.get("b").data_ptr() == shared.data_ptr());
  CHECK(TensorDict::fromkeys({NestedKey("s")}, "text").get_non_tensor("s").value().as_string() == "text");
}

TEST_CASE("auto_batch_size_ takes the longest leading shape every entry shares", "[structure]") {
  TensorDict td({{"a", at::zeros({3, 4, 5})}, {"n", TensorDict({{"b", at::zeros({3, 4, 2})}}, {})}, {"c", at::zeros({3, 4})}});
  td.auto_batch_size_();
  CHECK(sizes_of(td.batch_size()) == Sizes{3, 4});
  CHECK(sizes_of(td.get_tensordict("n").batch_size()) == Sizes{3, 4, 2});  // nested levels first
  TensorDict capped({{"a", at::zeros({3, 4, 5})}});
  capped.auto_batch_size_(1);
  CHECK(sizes_of(capped.batch_size()) == Sizes{3});
  CHECK_THROWS_AS(capped.auto_batch_size_(-1), ValueError);
}

namespace {
// Runs `child` in a forked process (raw pointers only: no LibTorch call after fork) while this
// one runs `parent`; returns the child's exit status (100 when it did not exit normally).
template <class Child, class Parent>
int forked(Child child, Parent parent) {
  const pid_t pid = ::fork();
  if (pid == 0) ::_exit(child());
  parent();
  int status = 0;
  ::waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 100;
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("share_memory_ shares the leaves with processes forked afterwards", "[contract][structure][shared]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"x", at::zeros({4})}, {"n", {{"y", at::zeros({4})}}}}, {4}));
  if (td.is_memmap()) {
    CHECK_THROWS_AS(td.share_memory_(), StorageError);
    return;
  }
  if (!TestType::kLeavesAliasStorage && !TestType::kLazyStack) {
    CHECK_THROWS_AS(td.share_memory_(), NotImplementedError);
    return;
  }
  CHECK_FALSE(td.is_shared());
  td.share_memory_();
  CHECK(td.is_shared());
  CHECK(td.is_locked());
  // Members of a lazy stack hold the storage; reads are new stacks, so go through a member.
  TensorDict holder = TestType::kLazyStack ? LazyStackedTensorDict::from(td).members()[0] : td;
  float* x = holder.get("x").data_ptr<float>();
  float* y = holder.get({"n", "y"}).data_ptr<float>();
  // The child writes, the parent sees it.
  CHECK(forked([&] { return (x[0] = 42.0f) == 42.0f ? 0 : 1; }, [] {}) == 0);
  CHECK(x[0] == 42.0f);
  CHECK(holder.get("x").flatten()[0].item<float>() == 42.0f);
  // The parent writes after the fork, the child sees it.
  int ready[2];
  REQUIRE(::pipe(ready) == 0);
  const int status = forked(
      [&] {
        char byte = 0;
        if (::read(ready[0], &byte, 1) != 1) return 2;
        return y[0] == 7.0f ? 0 : 1;
      },
      [&] {
        y[0] = 7.0f;
        const char byte = 1;
        REQUIRE(::write(ready[1], &byte, 1) == 1);
      });
  CHECK(status == 0);
  ::close(ready[0]);
  ::close(ready[1]);
  td.unlock_();
  CHECK_FALSE(td.is_shared());  // as Python: unlocking ends is_shared
}
