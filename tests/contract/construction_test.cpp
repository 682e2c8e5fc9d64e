// Contract: construction, batch-size validation, empty and zero-sized batches, number and
// string conversion, batch-size changes, device placement, handle semantics
// (semantics.md 1.1, 1.2, cases 1.19.1-5).
#include "support/catch_torch.h"

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;
using contract::Sizes;
using contract::sizes_of;

TEMPLATE_LIST_TEST_CASE("a tensordict keeps its leaves, batch size and key order", "[contract][construction]",
                        ContractBackends) {
  TensorDict ref({{"b", at::zeros({3, 4})}, {"a", at::ones({3})}, {"n", {{"x", at::zeros({3, 2})}}}}, {3});
  TensorDict td = TestType::make(ref);
  CHECK((td.batch_size() == c10::IntArrayRef{3}));
  CHECK(td.batch_dims() == 1);
  CHECK(td.numel() == 3);
  CHECK(td.size(0) == 3);
  CHECK(td.size(-1) == 3);
  REQUIRE(td.keys().size() == 3);
  CHECK(td.keys()[0] == NestedKey("b"));
  CHECK(td.keys()[1] == NestedKey("a"));
  CHECK(td.keys()[2] == NestedKey("n"));
  CHECK((td.get({"n", "x"}).sizes() == c10::IntArrayRef{3, 2}));
  CHECK(at::equal(td.get("a"), at::ones({3})));
  // A nested braced list inherits the batch size.
  CHECK(sizes_of(td.get_tensordict("n").batch_size()) == Sizes{3});
}

TEMPLATE_LIST_TEST_CASE("size() out of range is an IndexError", "[contract][construction][errors]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({3, 4})}}, {3, 4}));
  REQUIRE_THROWS_AS(td.size(2), IndexError);
  REQUIRE_THROWS_WITH(td.size(-3), Catch::Contains("out of range") && Catch::Contains("torch.Size([3, 4])"));
}

TEMPLATE_LIST_TEST_CASE("empty tensordicts and zero-sized batch dims", "[contract][construction]",
                        ContractBackends) {
  TensorDict empty = TestType::make(TensorDict());
  CHECK(empty.batch_size().empty());
  CHECK(empty.num_keys() == 0);
  CHECK(empty.keys().empty());
  CHECK(empty.numel() == 1);

  TensorDict batched_empty = TestType::make(TensorDict({}, {2, 3}));
  CHECK((sizes_of(batched_empty.batch_size()) == Sizes{2, 3}));
  CHECK(batched_empty.num_keys() == 0);

  TensorDict zero = TestType::make(TensorDict({{"a", at::zeros({0, 4})}, {"n", {{"b", at::zeros({0})}}}}, {0}));
  CHECK(sizes_of(zero.batch_size()) == Sizes{0});
  CHECK(zero.numel() == 0);  // Python says 1 here (quirk fixed: prod(batch_size))
  CHECK((sizes_of(zero.get("a").sizes()) == Sizes{0, 4}));
  CHECK((sizes_of(zero.get({"n", "b"}).sizes()) == Sizes{0}));
}

TEST_CASE("batch_size is never inferred: absent means an empty batch size", "[construction]") {
  TensorDict td({{"a", at::zeros({3, 4})}});
  CHECK(td.batch_size().empty());
  CHECK(td.batch_dims() == 0);
  TensorDict td3({{"a", at::zeros({3})}}, {3});
  CHECK(sizes_of(td3.batch_size()) == Sizes{3});
}

TEST_CASE("a leaf whose leading dims differ from the batch size is refused, naming key and shapes",
          "[construction][errors]") {
  REQUIRE_THROWS_AS(TensorDict({{"a", at::zeros({3})}}, {4}), ShapeError);
  REQUIRE_THROWS_AS(TensorDict({{"a", at::zeros({3})}}, {4}), RuntimeError);
  REQUIRE_THROWS_WITH(TensorDict({{"a", at::zeros({3})}}, {4}),
                      Catch::Contains("batch dimension mismatch, got self.batch_size=torch.Size([4]) and "
                                      "value.shape=torch.Size([3])"));
  REQUIRE_THROWS_WITH(TensorDict({{"n", {{"a", at::zeros({3})}}}}, {4}),
                      Catch::Contains("batch dimension mismatch") &&
                          Catch::Contains("torch.Size([4])") && Catch::Contains("torch.Size([3])") &&
                          Catch::Contains("'a'"));
  // A leaf with fewer dims than the batch.
  REQUIRE_THROWS_WITH(TensorDict({{"s", at::zeros({})}}, {2}),
                      Catch::Contains("torch.Size([2])") && Catch::Contains("torch.Size([])") &&
                          Catch::Contains("'s'"));
}

TEST_CASE("constructor errors: duplicate keys and negative batch sizes", "[construction][errors]") {
  REQUIRE_THROWS_AS(TensorDict({{"a", at::zeros({3})}, {"a", at::ones({3})}}, {3}), ValueError);
  REQUIRE_THROWS_WITH(TensorDict({{"a", at::zeros({3})}, {"a", at::ones({3})}}, {3}),
                      Catch::Contains("duplicate key 'a'"));
  REQUIRE_THROWS_AS(TensorDict({}, {-1}), ValueError);
  REQUIRE_THROWS_WITH(TensorDict({}, {2, -1}), Catch::Contains("negative"));
}

TEST_CASE("numbers become 0-dim tensors, strings become non-tensor data (case 2)", "[construction]") {
  TensorDict td({{"i", 1}, {"l", int64_t{7}}, {"f", 1.5}, {"b", true}, {"s", "x"}});
  CHECK(td.get("i").dim() == 0);
  CHECK(td.get("i").scalar_type() == at::kLong);
  CHECK(td.get("i").item<int64_t>() == 1);
  CHECK(td.get("l").scalar_type() == at::kLong);
  CHECK(td.get("f").scalar_type() == at::kFloat);
  CHECK(td.get("f").item<double>() == 1.5);
  CHECK(td.get("b").scalar_type() == at::kBool);
  CHECK(td.get_non_tensor("s").value().as_string() == "x");
  CHECK(td.get_entry("s").is_non_tensor());
  // A string is not a tensor: get() names the right accessor.
  REQUIRE_THROWS_AS(td.get("s"), TypeError);
  REQUIRE_THROWS_WITH(td.get("s"), Catch::Contains("'s'") && Catch::Contains("get_non_tensor()"));
}

TEST_CASE("a nested tensordict may have more batch dims, never fewer - mismatches are re-batched",
          "[construction]") {
  TensorDict inner({{"x", at::zeros({3, 2, 5})}}, {3, 2});
  TensorDict td({{"inner", inner}}, {3});
  CHECK((sizes_of(td.get_tensordict("inner").batch_size()) == Sizes{3, 2}));
  CHECK(td.get_tensordict("inner").is_same(inner));  // stored as is, no copy

  // A child with fewer dims whose leaves allow the parent's batch is re-batched (shallow copy).
  TensorDict flat({{"x", at::zeros({3, 2})}});
  TensorDict td2({{"c", flat}}, {3});
  CHECK(sizes_of(td2.get_tensordict("c").batch_size()) == Sizes{3});
  CHECK(flat.batch_size().empty());  // the original is untouched
  CHECK((contract::shares_storage(td2.get({"c", "x"}), flat.get("x"))));

  TensorDict wrong({{"x", at::zeros({4})}});
  REQUIRE_THROWS_AS(TensorDict({{"c", wrong}}, {3}), ShapeError);
  REQUIRE_THROWS_WITH(TensorDict({{"c", wrong}}, {3}),
                      Catch::Contains("'c'") && Catch::Contains("torch.Size([3])") &&
                          Catch::Contains("cannot be re-batched"));
}

TEMPLATE_LIST_TEST_CASE("set_batch_size re-validates every leaf (case 3)", "[contract][construction]",
                        ContractBackends) {
  TensorDict ref({{"a", at::zeros({3, 4, 5, 6})}}, {3, 4});
  TensorDict td = TestType::make(ref);
  if (TestType::kLazyStack) {  // semantics §2: refused; to_tensordict() first
    REQUIRE_THROWS_AS(td.set_batch_size({3}), RuntimeError);
    REQUIRE_THROWS_WITH(td.set_batch_size({3}), Catch::Contains("lazy representation"));
    return;
  }
  REQUIRE_THROWS_AS(td.set_batch_size({3, 5}), ShapeError);
  REQUIRE_THROWS_WITH(td.set_batch_size({3, 5}),
                      Catch::Contains("the Tensor a has shape torch.Size([3, 4, 5, 6]) which is "
                                      "incompatible with the batch-size torch.Size([3, 5])."));
  CHECK((sizes_of(td.batch_size()) == Sizes{3, 4}));  // unchanged after the failure
  td.set_batch_size({3});
  CHECK(sizes_of(td.batch_size()) == Sizes{3});
  td.set_batch_size({3, 4, 5});
  CHECK((sizes_of(td.batch_size()) == Sizes{3, 4, 5}));
}

TEST_CASE("set_batch_size grows nested tensordicts that had fewer dims", "[construction]") {
  TensorDict td({{"n", {{"x", at::zeros({3, 4})}}}}, {3});
  td.set_batch_size({3, 4});
  CHECK((sizes_of(td.get_tensordict("n").batch_size()) == Sizes{3, 4}));
  TensorDict bad({{"n", {{"x", at::zeros({3})}}}, {"y", at::zeros({3, 4})}}, {3});
  REQUIRE_THROWS_AS(bad.set_batch_size({3, 4}), ShapeError);
  REQUIRE_THROWS_WITH(bad.set_batch_size({3, 4}), Catch::Contains("in nested TensorDict 'n'"));
}

TEST_CASE("set with a batch mismatch is refused (case 4)", "[construction][errors]") {
  TensorDict td({}, {3});
  REQUIRE_THROWS_AS(td.set("x", 1.0), ShapeError);
  REQUIRE_THROWS_WITH(td.set("x", at::zeros({2})),
                      Catch::Contains("torch.Size([3])") && Catch::Contains("torch.Size([2])") &&
                          Catch::Contains("'x'"));
  CHECK_FALSE(td.contains("x"));
}

TEST_CASE("with a device, inserted leaves move there - without, mixed devices stay (case 5)",
          "[construction][device]") {
  // CPU and the meta device stand in for two devices (no GPU on the test machines).
  const at::Device meta(at::kMeta);
  TensorDict on_meta({{"a", at::zeros({2})}, {"n", {{"b", at::ones({2})}}}}, {2}, meta);
  REQUIRE(on_meta.device().has_value());
  CHECK(*on_meta.device() == meta);
  CHECK(on_meta.get("a").device() == meta);
  CHECK((on_meta.get({"n", "b"}).device() == meta));
  CHECK(on_meta.get_tensordict("n").device() == on_meta.device());
  on_meta.set("c", at::zeros({2}));
  CHECK(on_meta.get("c").device() == meta);
  on_meta.set({"new", "d"}, at::zeros({2}));
  CHECK((on_meta.get({"new", "d"}).device() == meta));
  CHECK(on_meta.get_tensordict("new").device() == on_meta.device());

  TensorDict mixed({{"cpu", at::zeros({2})}, {"meta", at::zeros({2}, at::TensorOptions().device(meta))}}, {2});
  CHECK_FALSE(mixed.device().has_value());
  CHECK(mixed.get("cpu").device().is_cpu());
  CHECK(mixed.get("meta").device() == meta);

  TensorDict cpu({{"i", 1}}, {}, at::Device(at::kCPU));
  cpu.set("x", at::ones({3}));
  CHECK(cpu.get("x").device().is_cpu());
  CHECK(cpu.get("i").device().is_cpu());
  TensorDict meta_numbers({{"i", 1}}, {}, meta);
  CHECK(meta_numbers.get("i").device() == meta);
}

TEMPLATE_LIST_TEST_CASE("handles have reference semantics - clone copies", "[contract][construction]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({3})}}, {3}));
  TensorDict alias = td;
  CHECK(alias.is_same(td));
  alias.set_("a", at::ones({3}));
  CHECK(at::equal(td.get("a"), at::ones({3})));
  TensorDict copy = td.clone();
  CHECK_FALSE(copy.is_same(td));
  copy.set_("a", at::full({3}, 2.0));
  CHECK(at::equal(td.get("a"), at::ones({3})));
  if (!TestType::kMutableKeys) return;
  alias.set("b", at::zeros({3}));
  CHECK(td.contains("b"));
  CHECK_FALSE(copy.contains("b"));
}
