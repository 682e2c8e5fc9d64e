// Contract: batch-dim names (Python's names / refine_names / rename / rename_, issue 33), kept by
// indexing, shape operations, stack, cat and copies as Python v0.14 keeps them, and v0.13's shape
// operations (repeat, repeat_interleave, roll) with their in-place forms.
#include "support/catch_torch.h"

#include <tensordict/backends/lazy_stack.h>

#include "contract/backends.h"
#include "contract/helpers.h"
#include "support/dim_names_string.h"

using namespace tensordict;
using contract::ContractBackends;
using contract::Sizes;
using contract::sizes_of;


// The exception type and a part of its message (the expression runs twice; it has no effect).
#define CHECK_THROWS_TYPED(expr, Type, text) \
  CHECK_THROWS_AS(expr, Type);               \
  CHECK_THROWS_WITH(expr, Catch::Contains(text))

namespace {
const std::nullopt_t none = std::nullopt;

TensorDict names_grid() {
  return TensorDict({{"a", at::arange(24, at::kFloat).view({2, 3, 4})}, {"n", {{"i", at::ones({2, 3, 5}, at::kLong)}}}},
                    {2, 3});
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("names are set, read, refined and renamed", "[contract][names]", ContractBackends) {
  TensorDict td = TestType::make(names_grid());
  CHECK(td.names() == DimNames{none, none});
  td.set_names({"env", "time"});
  CHECK(td.names() == DimNames{"env", "time"});
  // A nested tensordict takes its parent's names as its leading names.
  if (!TestType::kLazyStack) CHECK(td.get_tensordict("n").names() == DimNames{"env", "time"});
  CHECK(td.rename(NameMap{{"time", "t"}}).names() == DimNames{"env", "t"});
  CHECK(td.names() == DimNames{"env", "time"});  // rename copies
  td.rename_({none, "time"});
  CHECK(td.names() == DimNames{none, "time"});
  td.refine_names({"env", "..."});
  CHECK(td.names() == DimNames{"env", "time"});
  td.set_names({});
  CHECK(td.names() == DimNames{none, none});
}

TEMPLATE_LIST_TEST_CASE("bad names raise ValueError and RuntimeError as in Python", "[contract][names]",
                        ContractBackends) {
  TensorDict td = TestType::make(names_grid());
  CHECK_THROWS_TYPED(td.set_names({"a", "a"}), ValueError, "Some dimension names are non-unique");
  CHECK_THROWS_TYPED(td.set_names({"a"}), ValueError, "must equate the tensordict batch_dims");
  td.set_names({"env", none});
  CHECK_THROWS_TYPED(td.refine_names({"other", "t"}), RuntimeError, "cannot coerce");
  CHECK_THROWS_TYPED(td.rename(NameMap{{"nope", "x"}}), ValueError, "were not part of");
  CHECK_THROWS_AS(td.refine_names({"env", "t", "x"}), IndexError);
  CHECK(td.names() == DimNames{"env", none});  // failures change nothing
}

TEMPLATE_LIST_TEST_CASE("indexing keeps the names of the dims it keeps", "[contract][names]", ContractBackends) {
  using at::indexing::Slice;
  TensorDict td = TestType::make(names_grid());
  td.set_names({"env", "time"});
  CHECK(td.index({0}).names() == DimNames{"time"});
  CHECK(td.index({Slice(), 1}).names() == DimNames{"env"});
  CHECK(td.index({Slice(0, 1)}).names() == DimNames{"env", "time"});
  CHECK(td.index({at::indexing::None}).names() == DimNames{none, "env", "time"});
  CHECK(td.index({at::tensor({1, 0}, at::kLong)}).names() == DimNames{"env", "time"});
  CHECK(td.index({at::ones({2, 3}, at::kBool)}).names() == DimNames{none});
}

TEMPLATE_LIST_TEST_CASE("shape operations carry the names as Python does", "[contract][names]", ContractBackends) {
  TensorDict td = TestType::make(names_grid());
  td.set_names({"env", "time"});
  CHECK(td.permute({1, 0}).names() == DimNames{"time", "env"});
  CHECK(td.transpose(0, 1).names() == DimNames{"time", "env"});
  CHECK(td.unsqueeze(1).names() == DimNames{"env", none, "time"});
  CHECK(td.unsqueeze(0).squeeze(0).names() == DimNames{"env", "time"});
  CHECK(td.expand({5, 2, 3}).names() == DimNames{none, "env", "time"});
  CHECK(td.flatten().names() == DimNames{none});
  CHECK(td.unflatten(1, {3, 1}).names() == DimNames{"env", none, none});
  CHECK(td.reshape({6}).names() == DimNames{none});  // reshape and view erase them
  CHECK(td.clone().names() == DimNames{"env", "time"});
  CHECK(td.to(at::kDouble).names() == DimNames{"env", "time"});
  CHECK((td * 2).names() == DimNames{"env", "time"});
  CHECK(td.unbind(0)[1].names() == DimNames{"time"});
  CHECK(td.split(1, 1)[2].names() == DimNames{"env", "time"});
  CHECK(td.gather(1, at::zeros({2, 2}, at::kLong)).names() == DimNames{"env", "time"});
  CHECK(td.repeat({2, 1}).names() == DimNames{"env", "time"});
}

TEMPLATE_LIST_TEST_CASE("stack names the new dim None when every input has the same names; cat keeps them",
                        "[contract][names]", ContractBackends) {
  TensorDict a = TestType::make(names_grid());
  TensorDict b = TestType::make(names_grid());
  a.set_names({"env", "time"});
  b.set_names({"env", "time"});
  CHECK(stack({a, b}, 1).names() == DimNames{"env", none, "time"});
  CHECK(cat({a, b}, 0).names() == DimNames{"env", "time"});
  b.set_names({"x", "time"});
  CHECK(stack({a, b}, 0).names() == DimNames{none, none, none});
}

TEST_CASE("a tensordict set into a named one takes its names; conflicting names are refused", "[contract][names]") {
  TensorDict td({{"a", at::zeros({2, 3})}}, {2, 3}, std::nullopt, {"env", "time"});
  TensorDict child({{"x", at::zeros({2, 3, 4})}}, {2, 3, 4});
  td.set("child", child);
  CHECK(td.get_tensordict("child").names() == DimNames{"env", "time", none});
  CHECK(child.names() == DimNames{none, none, none});  // the caller's keeps its own
  TensorDict clash({{"x", at::zeros({2, 3})}}, {2, 3}, std::nullopt, {"other", none});
  CHECK_THROWS_TYPED(td.set("clash", clash), RuntimeError, "names its batch dim 0 'other'");
  td.set_batch_size({2});  // Python drops the names of the dims that go
  CHECK(td.names() == DimNames{"env"});
}

TEMPLATE_LIST_TEST_CASE("repeat, repeat_interleave and roll match torch leaf by leaf", "[contract][shape][v013]",
                        ContractBackends) {
  TensorDict td = TestType::make(names_grid());
  const at::Tensor a = names_grid().get("a");
  CHECK(at::equal(td.repeat({2, 1}).get("a"), a.repeat({2, 1, 1})));
  CHECK(sizes_of(td.repeat({2, 3}).get({"n", "i"}).sizes()) == Sizes{4, 9, 5});
  CHECK(at::equal(td.repeat_interleave(2, 1).get("a"), a.repeat_interleave(2, 1)));
  CHECK(at::equal(td.repeat_interleave(at::tensor({1, 0, 2}, at::kLong), 1).get("a"),
                  a.repeat_interleave(at::tensor({1, 0, 2}, at::kLong), 1)));
  CHECK(at::equal(td.repeat_interleave(2).get("a"), a.reshape({6, 4}).repeat_interleave(2, 0)));
  CHECK(at::equal(td.roll({1}, {1}).get("a"), a.roll({1}, {1})));
  CHECK(at::equal(td.roll({-1}, {-1}).get("a"), a.roll({-1}, {1})));  // -1 is the last *batch* dim
  CHECK(at::equal(td.roll({1}).get("a"), a.reshape({6, 4}).roll({1}, {0}).view({2, 3, 4})));
  CHECK_THROWS_AS(td.repeat({2}), ValueError);
  CHECK_THROWS_AS(td.roll({1}, {2}), IndexError);
}

TEMPLATE_LIST_TEST_CASE("roll_ writes the rolled values through the backend", "[contract][shape][v013]",
                        ContractBackends) {
  TensorDict td = TestType::make(names_grid());
  td.roll_({1}, {0});
  CHECK(at::equal(TestType::reload(td).get("a"), names_grid().get("a").roll({1}, {0})));
}

TEMPLATE_LIST_TEST_CASE("in-place shape operations keep the handle and its nested tensordicts, or refuse",
                        "[contract][shape][v013]", ContractBackends) {
  TensorDict td = TestType::make(names_grid());
  if (std::string(TestType::name) != "TensorDict") {
    // Leaves that live in a file, a server or a stack's members keep their shapes there.
    CHECK_THROWS_AS(td.reshape_({6}), NotImplementedError);
    CHECK_THROWS_AS(td.flatten_(), NotImplementedError);
    CHECK(sizes_of(td.batch_size()) == Sizes{2, 3});
    return;
  }
  td.set_names({"env", "time"});
  const TensorDictBase* nested = td.get_tensordict("n").impl();
  TensorDict alias = td;
  td.reshape_({3, 2});
  CHECK(sizes_of(alias.batch_size()) == Sizes{3, 2});
  CHECK(alias.get_tensordict("n").impl() == nested);
  CHECK(sizes_of(alias.get({"n", "i"}).sizes()) == Sizes{3, 2, 5});
  CHECK(td.names() == DimNames{none, none});
  td.flatten_();
  CHECK(sizes_of(td.get("a").sizes()) == Sizes{6, 4});
  td.unflatten_(0, {2, 3}).repeat_({1, 2});
  CHECK(sizes_of(td.batch_size()) == Sizes{2, 6});
  td.repeat_interleave_(2, 0).gather_(1, at::zeros({4, 2}, at::kLong));
  CHECK(sizes_of(td.batch_size()) == Sizes{4, 2});
  TensorDict t = TensorDict({{"x", at::arange(6).view({2, 3}).t()}}, {3});
  t.contiguous_();
  CHECK(t.get("x").is_contiguous());
  td.lock_();
  CHECK_THROWS_AS(td.reshape_({8}), LockedError);
}
