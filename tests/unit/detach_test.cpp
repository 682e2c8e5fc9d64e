// detach() of a tensordict: each leaf's detach() built directly (core/detach_leaf.h), and over a
// consolidated tensordict one detach() of its storage (intact_detached), the result's leaves made
// on first access, over the same bytes, sharing the version counter the consolidated leaves
// share. These cases compare both with LibTorch's detach() of each leaf, over leaves of every
// kind, and check the trees the one-storage path must leave to the per-leaf one.
#include "support/catch_torch.h"
#include "support/packed_fixtures.h"
#include "support/runs_fixtures.h"
#include "support/same_view.h"

#include <string>
#include <thread>
#include <utility>
#include <typeinfo>
#include <vector>

#include <ATen/core/grad_mode.h>
#include <ATen/core/Dimname.h>
#include <c10/core/InferenceMode.h>
#include <torch/csrc/autograd/forward_grad.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/ops.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/tensor_dict_impl.h"

using namespace tensordict;

namespace detach_test {

TensorDict fixture() {
  return testing_support::root_and_nested_leaves(7, [](int i) { return i == 4 ? at::randn({10, 2, 3}) : at::randn({10, 5}); });
}

// Whether `td` came out of the one-detach path: a level made deferred, nothing built yet.
bool deferred(const TensorDict& td) {
  const TensorDictBase& level = *td.impl();
  return typeid(level) == typeid(TensorDictImpl) && static_cast<const TensorDictImpl&>(level).is_deferred();
}

// td.detach(), and how many detach() calls it made through the dispatcher: one per storage on
// the one-storage path; per leaf, none but for leaves detach_leaf leaves to LibTorch.
std::pair<TensorDict, int> detach_counted(const TensorDict& td) {
  TensorDict out;
  const int calls = runs_fixtures::KernelCount::of("aten::detach", [&] { out = td.detach(); });
  return {out, calls};
}

// `out` holds what detach() of each leaf of `td` gives: the same bytes and geometry, no grad, no
// view autograd knows, and the version counter of the leaf it detaches (one bump seen by both).
void require_detached_per_leaf(const TensorDict& out, const TensorDict& td) {
  const std::vector<NestedKey> keys = td.keys(true, true);
  REQUIRE(out.keys(true, true) == keys);
  REQUIRE(out.batch_size() == td.batch_size());
  for (const NestedKey& k : keys) {
    INFO(k.repr());
    const at::Tensor got = out.get(k), leaf = td.get(k), expected = leaf.detach();
    testing_support::check_same_view(got, expected);
    CHECK(got.is_leaf() == expected.is_leaf());
    CHECK(got.key_set() == expected.key_set());
    CHECK(got.has_names() == expected.has_names());
    if (expected.has_names()) CHECK(got.names() == expected.names());
    CHECK(got.is_conj() == expected.is_conj());
    CHECK(got.is_neg() == expected.is_neg());
    CHECK(got.is_contiguous() == expected.is_contiguous());
    CHECK(got.device() == expected.device());
    CHECK(!got.grad_fn());
    CHECK(!got.grad().defined());
    CHECK(got.is_inference() == expected.is_inference());
    CHECK(got.unsafeGetTensorImpl()->allow_tensor_metadata_change() ==
          expected.unsafeGetTensorImpl()->allow_tensor_metadata_change());
    if (leaf.is_inference()) continue;  // no version counter to share
    CHECK(got._version() == leaf._version());
    {
      const at::NoGradGuard no_grad;
      got.copy_(got.clone());  // a write the leaf's counter must see (any dtype)
    }
    CHECK(got._version() == leaf._version());
    CHECK(expected._version() == leaf._version());
  }
}


TEST_CASE("detach of a consolidated tensordict is one detach of its storage", "[unit][detach]") {
  const TensorDict plain = fixture();
  for (const bool read_first : {false, true}) {
    DYNAMIC_SECTION("leaves read before: " << read_first) {
      TensorDict c = consolidate(plain);
      if (read_first) {
        for (const NestedKey& k : c.keys(true, true)) REQUIRE(c.get(k).defined());
      }
      TensorDict r = c.detach();
      CHECK(deferred(r));
      CHECK(r.is_locked() == c.is_locked());
      testing_support::require_same_leaves(r, plain);
      require_detached_per_leaf(r, c);
      // Another detach of the result (views of a detached storage) takes the same path.
      TensorDict rr = r.detach();
      CHECK(deferred(rr));
      require_detached_per_leaf(rr, r);
    }
  }
}

TEST_CASE("detach's one-storage result: writes reach the consolidated leaves, and the next ops stay one kernel",
          "[unit][detach]") {
  const TensorDict plain = fixture();
  TensorDict c = consolidate(plain);
  const at::Tensor held = c.get({"n", "l0"});
  TensorDict r = c.detach();
  const int64_t before = held._version();
  r.mul_(2);  // one kernel over the detached storage
  CHECK(held._version() > before);
  CHECK(at::equal(held, plain.get({"n", "l0"}) * 2));
  CHECK(in_memory::intact_packed_storage(*r.impl()).defined());
  TensorDict doubled = r + r;
  CHECK(in_memory::intact_packed_storage(*doubled.impl()).defined());
  testing_support::require_same_leaves(doubled, plain * 4);
  // A write into the result's storage through one of its leaves is one every detached sibling and
  // every consolidated leaf sees as a version bump too (they share one counter, as per leaf).
  const at::Tensor sibling = r.get("l1");
  const int64_t sibling_before = sibling._version();
  r.get("l2").zero_();
  CHECK(sibling._version() > sibling_before);
  CHECK(c.get("l2").abs().sum().item<float>() == 0.0f);
}

TEST_CASE("detach keeps the names and the lock, and drops the grad a consolidated leaf requires",
          "[unit][detach]") {
  TensorDict named = fixture();
  named.refine_names({"batch"});
  TensorDict c = consolidate(named);
  TensorDict r = c.detach();
  REQUIRE((c.names() == named.names()));
  CHECK((r.names() == c.names()));
  CHECK(r.is_locked() == c.is_locked());

  TensorDict g = consolidate(fixture());
  at::Tensor leaf = g.get("l1");
  leaf.requires_grad_(true);
  REQUIRE(g.get("l1").requires_grad());
  TensorDict d = g.detach();
  CHECK(deferred(d));  // the grad a made leaf requires is no reason to detach per leaf
  require_detached_per_leaf(d, g);
  CHECK(!d.get("l1").requires_grad());
}

TEST_CASE("detach's leaves are no views of each other: an in-place op with grad on one leaves its siblings alone",
          "[unit][detach]") {
  TensorDict c = consolidate(fixture());
  TensorDict r = c.detach();
  const at::Tensor w = at::ones({10, 5}).requires_grad_(true);
  at::Tensor l1 = r.get("l1");
  l1.mul_(w);
  CHECK(l1.requires_grad());
  CHECK(!r.get("l2").requires_grad());
  CHECK(!c.get("l2").requires_grad());
  CHECK(!c.get("l1").requires_grad());
  // A leaf of r now requires grad: the next op in grad mode goes per leaf, and its grad follows.
  TensorDict s = r * 2;
  CHECK(s.get("l1").requires_grad());
  CHECK(!s.get("l2").requires_grad());
}

TEST_CASE("detach goes per leaf where the leaves are not all the storage's views", "[unit][detach]") {
  const TensorDict plain = fixture();
  SECTION("an op's result: its leaves have counters of their own") {
    TensorDict m = consolidate(plain) * 2;
    TensorDict r = m.detach();
    CHECK(!deferred(r));
    require_detached_per_leaf(r, m);
  }
  SECTION("a leaf moved to another storage") {
    TensorDict c = consolidate(plain);
    const at::Tensor other = at::randn({10, 5});
    c.get("l1").set_(other);
    TensorDict r = c.detach();
    CHECK(!deferred(r));
    CHECK(r.get("l1").data_ptr() == other.data_ptr());
    require_detached_per_leaf(r, c);
  }
  SECTION("a tensordict never consolidated") {
    TensorDict r = plain.detach();
    require_detached_per_leaf(r, plain);
  }
  SECTION("an op's result over runs") {
    TensorDict m = consolidate(runs_fixtures::mixed()) * 2;
    // Each leaf of an op's result is a tensor of its own, as per leaf: its own version counter.
    const at::Tensor f0 = m.get("f0");
    const int64_t f0_version = f0._version();
    m.get("f3").add_(1);
    CHECK(f0._version() == f0_version);
    const auto [r, calls] = detach_counted(m);
    CHECK(calls == 0);  // per leaf, each built directly (the one-storage path calls detach once a run)
    require_detached_per_leaf(r, m);
  }
}

TEST_CASE("detach over runs: one detach a dtype's run, padding included", "[unit][detach]") {
  TensorDict padded({}, {5});
  for (int i = 0; i < 4; ++i) padded.set({i % 2 == 0 ? "a" : "b", "p" + std::to_string(i)}, at::randn({5, 1 + 2 * i}));
  padded.set("flag", at::rand({5}).gt(0.5));
  for (const TensorDict& plain : {runs_fixtures::mixed(), padded}) {
    for (const bool read_first : {false, true}) {
      TensorDict c = consolidate(plain);
      REQUIRE(runs_fixtures::storages(c) == 1);
      if (read_first) runs_fixtures::read_all(c);
      const auto [r, calls] = detach_counted(c);
      CHECK(calls == (plain.keys(true, true).size() == 9 ? 3 : 2));  // one a dtype
      runs_fixtures::require_same(r, plain);
      require_detached_per_leaf(r, c);
      // The next op runs over the detached runs as over the consolidated ones.
      runs_fixtures::require_same(r * 3, plain * 3);
    }
  }
}

TEST_CASE("detach in inference mode and under no_grad equals detach per leaf", "[unit][detach]") {
  const TensorDict plain = fixture();
  TensorDict c = consolidate(plain);
  {
    const at::NoGradGuard no_grad;
    require_detached_per_leaf(c.detach(), c);
  }
  {
    const c10::InferenceMode inference;
    TensorDict r = c.detach();
    testing_support::require_same_leaves(r, plain);
    require_detached_per_leaf(r, c);
  }
}

struct DualLevel {
  const uint64_t index = torch::autograd::ForwardADLevel::get_next_idx();
  ~DualLevel() { torch::autograd::ForwardADLevel::release_idx(index); }
};

// A tree of leaves of every kind a tensordict holds in memory, none consolidated.
TensorDict every_kind(const at::Tensor& grad_leaf) {
  TensorDict td({}, {4});
  td.set("float", at::randn({4, 3}));
  td.set("grad_leaf", grad_leaf);
  td.set("non_leaf", grad_leaf * 2);                           // a grad_fn
  td.set("view", grad_leaf.select(1, 0));                      // a view autograd knows
  td.set("transposed", at::randn({3, 4}).t());                 // not contiguous
  td.set("empty", at::randn({4, 0}));
  td.set({"n", "int"}, at::arange(8).view({4, 2}));
  td.set({"n", "bool"}, at::rand({4}).gt(0.5));
  td.set({"n", "double"}, at::randn({4, 2}, at::kDouble));
  td.set({"n", "conj"}, at::randn({4, 2}, at::kComplexFloat).conj());  // the lazy conjugation bit
  td.set({"n", "neg"}, at::imag(at::randn({4, 2}, at::kComplexFloat).conj()));  // the negative bit
  const std::vector<at::Dimname> names{at::Dimname::fromSymbol(at::Symbol::dimname("B")),
                                       at::Dimname::fromSymbol(at::Symbol::dimname("F"))};
  td.set({"n", "named"}, at::randn({4, 5}).refine_names(names));
  {
    const c10::InferenceMode inference;
    td.set({"n", "inference"}, at::randn({4, 2}));
  }
  return td;
}

TEST_CASE("detach of any tensordict gives each leaf what its detach() gives", "[unit][detach]") {
  const at::Tensor grad_leaf = at::randn({4, 3}).requires_grad_(true);
  TensorDict td = every_kind(grad_leaf);
  REQUIRE(td.get({"n", "conj"}).is_conj());
  REQUIRE(td.get({"n", "neg"}).is_neg());
  for (const bool grad_mode : {true, false}) {
    DYNAMIC_SECTION("grad mode " << grad_mode) {
      const at::AutoGradMode mode(grad_mode);
      TensorDict r = td.detach();
      require_detached_per_leaf(r, td);
      CHECK(r.get({"n", "inference"}).is_inference());
    }
  }
  SECTION("a leaf's forward tangent is not carried") {
    DualLevel dual;
    TensorDict t = td.clone();
    at::Tensor leaf = t.get("float");
    leaf._set_fw_grad(at::ones_like(leaf), dual.index, /*is_inplace_op=*/false);
    REQUIRE(t.get("float")._fw_grad(dual.index).defined());
    TensorDict r = t.detach();
    CHECK(!r.get("float")._fw_grad(dual.index).defined());
    CHECK(!t.get("float").detach()._fw_grad(dual.index).defined());
    require_detached_per_leaf(r, t);
  }
  SECTION("below ADInplaceOrView LibTorch's own detach runs, a new counter per leaf") {
    at::Tensor got, expected;
    {
      const at::AutoDispatchBelowADInplaceOrView below;
      got = td.detach().get("float");
      expected = td.get("float").detach();
    }
    CHECK(got.data_ptr() == expected.data_ptr());
    const at::NoGradGuard no_grad;
    const int64_t before = td.get("float")._version();
    expected.add_(1);
    REQUIRE(td.get("float")._version() == before);  // LibTorch's: not the leaf's counter
    got.add_(1);
    CHECK(td.get("float")._version() == before);
  }
}

TEST_CASE("detach builds no leaf through the dispatcher but where LibTorch must", "[unit][detach]") {
  const at::Tensor grad_leaf = at::randn({4, 3}).requires_grad_(true);
  TensorDict td = every_kind(grad_leaf);
  const auto [r, calls] = detach_counted(td);
  CHECK(calls == 1);  // the inference tensor's
  CHECK(r.keys(true, true).size() == 13);
  const c10::InferenceMode inference;
  CHECK(detach_counted(td).second == 1);
}

TEST_CASE("detach of one consolidated tensordict from four threads while they read its leaves", "[unit][detach]") {
  const TensorDict plain = fixture();
  const TensorDict c = consolidate(plain);  // nobody has made its leaves
  std::vector<TensorDict> got(4);
  std::vector<at::Tensor> read(4);
  std::vector<std::thread> threads;
  for (size_t i = 0; i < got.size(); ++i) {
    threads.emplace_back([&, i] {
      got[i] = c.detach();
      read[i] = got[i].get({"n", "l0"});
    });
  }
  for (std::thread& t : threads) t.join();
  for (const TensorDict& r : got) require_detached_per_leaf(r, c);
  for (const at::Tensor& t : read) CHECK(t.data_ptr() == c.get({"n", "l0"}).data_ptr());
}

}  // namespace detach_test
