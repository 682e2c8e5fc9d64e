// Contract: to(device), to(dtype), cpu, clone, detach, contiguous, empty, empty_like, zero_,
// fill_ (semantics.md 1.2, 1.14, case 1.19.24). CPU and the meta device stand in for two
// devices: there is no GPU on the test machines.
#include "support/catch_torch.h"

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;
using contract::joined_keys;
using contract::shares_storage;
using contract::Sizes;
using contract::sizes_of;
using contract::Strings;

namespace {
TensorDict mixed_dtypes() {
  return TensorDict({{"f", at::ones({2, 3})},
                     {"l", at::ones({2}, at::kLong)},
                     {"b", at::ones({2}, at::kBool)},
                     {"n", {{"d", at::ones({2, 1}, at::kDouble)}}},
                     {"s", "keep"}},
                    {2});
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("to(dtype) casts every tensor leaf, integers too (case 24)", "[contract][conversion]",
                        ContractBackends) {
  TensorDict td = TestType::make(mixed_dtypes());
  TensorDict i = td.to(at::kInt);
  for (const auto& [key, entry] : i.items(true, true)) {
    INFO(key.join("."));
    CHECK(entry.tensor().scalar_type() == at::kInt);
  }
  CHECK((at::equal(i.get("f"), at::ones({2, 3}, at::kInt))));
  CHECK(i.get_non_tensor("s").value().as_string() == "keep");
  CHECK(sizes_of(i.batch_size()) == Sizes{2});
  CHECK(joined_keys(i, true) == joined_keys(td, true));
  CHECK(td.get("f").scalar_type() == at::kFloat);  // source untouched
}

TEMPLATE_LIST_TEST_CASE("to(device) returns itself when already there, sets the device otherwise (case 24)",
                        "[contract][conversion][device]", ContractBackends) {
  const at::Device cpu(at::kCPU), meta(at::kMeta);
  TensorDict on_cpu = TestType::make(TensorDict({{"a", at::ones({2})}}, {2}, cpu));
  CHECK(on_cpu.to(cpu).is_same(on_cpu));
  CHECK(on_cpu.cpu().is_same(on_cpu));

  TensorDict no_device = TestType::make(mixed_dtypes());
  TensorDict moved = no_device.to(cpu);
  REQUIRE(moved.device().has_value());
  CHECK(*moved.device() == cpu);
  CHECK(moved.is_same(no_device) == no_device.device().has_value());  // self when already there
  CHECK(moved.get_tensordict("n").device() == moved.device());
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(moved.get("f"), no_device.get("f")));  // already on cpu: no copy
  CHECK(*no_device.cpu().device() == cpu);

  TensorDict m = no_device.to(meta);
  CHECK(*m.device() == meta);
  for (const auto& entry : m.values(true, true)) CHECK(entry.tensor().device() == meta);
  CHECK(m.get_tensordict("n").device() == m.device());
  CHECK(m.get_non_tensor("s").value().as_string() == "keep");
  // Leaves set later follow the device.
  TensorDict m2 = m.clone(false);
  if (TestType::kMutableKeys) {
    m2.set("later", at::zeros({2}));
    CHECK(m2.get("later").device() == meta);
  }
  TensorDict both = no_device.to(meta, at::kHalf);
  CHECK(both.get("l").scalar_type() == at::kHalf);
  CHECK(both.get("l").device() == meta);
}

TEMPLATE_LIST_TEST_CASE("clone copies data - clone(false) shares the leaves", "[contract][conversion]",
                        ContractBackends) {
  TensorDict td = TestType::make(mixed_dtypes());
  TensorDict c = td.clone();
  CHECK_FALSE(c.is_same(td));
  CHECK(joined_keys(c, true) == joined_keys(td, true));
  CHECK(sizes_of(c.batch_size()) == Sizes{2});
  CHECK((at::equal(c.get({"n", "d"}), td.get({"n", "d"}))));
  CHECK_FALSE((shares_storage(c.get({"n", "d"}), td.get({"n", "d"}))));
  CHECK(c.get_non_tensor("s").value().as_string() == "keep");
  c.set_("f", at::zeros({2, 3}));
  CHECK((at::equal(td.get("f"), at::ones({2, 3}))));
  // Python's clone of a lazy stack clones the members and stays lazy.
  CHECK(std::string(c.type_name()) == (TestType::kLazyStack ? "LazyStackedTensorDict" : "TensorDict"));

  TensorDict shallow = td.clone(/*recurse=*/false);
  CHECK_FALSE(shallow.is_same(td));
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(shallow.get("f"), td.get("f")));
  if (TestType::kLeavesAliasStorage) CHECK((shares_storage(shallow.get({"n", "d"}), td.get({"n", "d"}))));
}

TEMPLATE_LIST_TEST_CASE("detach and contiguous", "[contract][conversion]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::ones({3, 2})}}, {3}));
  const TensorDict with_grad({{"w", at::ones({3, 2}).requires_grad_()}}, {3});
  if (TestType::kStoresAutograd) {
    TensorDict grad = TestType::make(with_grad);
    TensorDict d = grad.detach();
    CHECK_FALSE(d.get("w").requires_grad());
    if (TestType::kLeavesAliasStorage) CHECK(shares_storage(d.get("w"), grad.get("w")));
  } else {
    // Storage without autograd refuses such leaves (as Python does) instead of dropping the graph.
    REQUIRE_THROWS_AS(TestType::make(with_grad), RuntimeError);
    REQUIRE_THROWS_WITH(TestType::make(with_grad), Catch::Contains("requires grad"));
    CHECK(TestType::make(with_grad.detach()).get("w").requires_grad() == false);
  }

  TensorDict wide = TestType::make(TensorDict({{"a", at::arange(12).view({3, 4})}}, {3, 4}));
  TensorDict t = wide.transpose(0, 1);
  CHECK(t.get("a").is_contiguous() == TestType::kLazyStack);  // a lazy read stacks anew
  TensorDict c = t.contiguous();
  CHECK(c.get("a").is_contiguous());
  CHECK(at::equal(c.get("a"), t.get("a")));
  CHECK((sizes_of(c.batch_size()) == Sizes{4, 3}));
  CHECK(td.contiguous().get("a").is_contiguous());
}

TEMPLATE_LIST_TEST_CASE("empty and empty_like", "[contract][conversion]", ContractBackends) {
  TensorDict td = TestType::make(mixed_dtypes());
  TensorDict e = td.empty();
  CHECK(e.num_keys() == 0);
  CHECK(sizes_of(e.batch_size()) == Sizes{2});
  CHECK(e.device() == td.device());
  TensorDict er = td.empty(/*recurse=*/true);
  CHECK(joined_keys(er, true) == Strings{"n"});
  CHECK(er.get_tensordict("n").num_keys() == 0);
  CHECK(sizes_of(er.get_tensordict("n").batch_size()) == Sizes{2});

  TensorDict like = td.empty_like();
  CHECK(joined_keys(like, true) == joined_keys(td, true));
  for (const auto& [key, entry] : td.items(true, true)) {
    INFO(key.join("."));
    const at::Tensor& other = like.get(key);
    CHECK(other.sizes() == entry.tensor().sizes());
    CHECK(other.scalar_type() == entry.tensor().scalar_type());
    CHECK_FALSE(shares_storage(other, entry.tensor()));
  }
}

TEMPLATE_LIST_TEST_CASE("zero_ and fill_ write in place", "[contract][conversion]", ContractBackends) {
  TensorDict td = TestType::make(mixed_dtypes());
  at::Tensor f = td.get("f");
  td.zero_();
  for (const auto& entry : td.values(true, true)) CHECK(entry.tensor().sum().item<double>() == 0.0);
  if (TestType::kLeavesAliasStorage) CHECK(shares_storage(td.get("f"), f));
  td.fill_("f", 2.5);
  CHECK((at::equal(td.get("f"), at::full({2, 3}, 2.5))));
  CHECK(at::equal(td.get("l"), at::zeros({2}, at::kLong)));
  td.fill_({"n", "d"}, 4.0);
  CHECK((at::equal(td.get({"n", "d"}), at::full({2, 1}, 4.0, at::kDouble))));
  td.fill_(1);
  for (const auto& entry : td.values(true, true)) CHECK(entry.tensor().min().item<double>() == 1.0);
  REQUIRE_THROWS_AS(td.fill_("zz", 1.0), KeyError);
  REQUIRE_THROWS_AS(td.fill_("n", 1.0), TypeError);
}
