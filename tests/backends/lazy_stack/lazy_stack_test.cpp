// LazyStackedTensorDict: the 24 cases of semantics §2 (Python tensordict v0.14), and the
// weaknesses of Python's version this port fixes (python-backends-v0.14 §2.4). The contract
// suite (tests/contract) runs every other tensordict behaviour on lazy stacks too.

#include "support/catch_torch.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>

#include "support/dim_names_string.h"
#include "support/temp_dir.h"

using namespace tensordict;
using at::indexing::Slice;

namespace {

std::vector<int64_t> sizes(c10::IntArrayRef s) { return {s.begin(), s.end()}; }
using Sizes = std::vector<int64_t>;

bool has_key(const TensorDict& td, const char* key) {
  for (const NestedKey& k : td.keys()) {
    if (k == NestedKey(key)) return true;
  }
  return false;
}

}  // namespace

TEST_CASE("case 1-2: a lazy stack of two members stacks reads and returns members", "[lazy]") {
  TensorDict td0({{"a", at::zeros({3})}}), td1({{"a", at::ones({3})}});
  LazyStackedTensorDict ls = lazy_stack({td0, td1});
  CHECK(sizes(ls.batch_size()) == Sizes{2});
  CHECK(sizes(ls.get("a").sizes()) == Sizes{2, 3});
  CHECK(at::equal(ls.get("a")[1], at::ones({3})));
  CHECK(ls.index({0}).is_same(td0));  // the member itself
  CHECK(ls.index({-1}).is_same(td1));
  CHECK(std::string(ls.type_name()) == "LazyStackedTensorDict");
}

TEST_CASE("case 3: a stack along dim 1 of unbound members", "[lazy]") {
  TensorDict td({{"x", at::randn({3, 4, 2})}}, {3, 4});
  std::vector<TensorDict> tds = td.unbind(1);
  LazyStackedTensorDict ls = lazy_stack(tds, 1);
  CHECK(sizes(ls.batch_size()) == Sizes{3, 4});
  CHECK(ls.index({Slice(), 0}).is_same(tds[0]));
  CHECK(at::equal(ls.get("x"), td.get("x")));
  // An index before the stack dim reaches every member.
  TensorDict row = ls.index({1});
  CHECK(LazyStackedTensorDict::is_lazy_stack(row));
  CHECK(at::equal(row.get("x"), td.get("x")[1]));
}

TEST_CASE("case 4-6: ragged leaves raise on get, read as list, padded or nested", "[lazy]") {
  LazyStackedTensorDict ls = lazy_stack({TensorDict({{"x", at::ones({1})}}), TensorDict({{"x", 2 * at::ones({2})}})});
  REQUIRE_THROWS_AS(ls.get("x"), RuntimeError);
  REQUIRE_THROWS_WITH(ls.get("x"), Catch::Contains("Failed to stack tensors within a tensordict") &&
                                       Catch::Contains("'x'") && Catch::Contains("get_as_list"));
  std::vector<at::Tensor> list = ls.get_as_list("x");
  REQUIRE(list.size() == 2);
  CHECK(at::equal(list[1], 2 * at::ones({2})));
  CHECK(at::equal(ls.get_padded("x"), at::tensor({1.f, 0.f, 2.f, 2.f}).view({2, 2})));
  at::Tensor left = ls.get_padded("x", 100, PaddingSide::Left);
  CHECK(left[0][0].item<float>() == 100);
  CHECK(left[0][1].item<float>() == 1);
  TensorDict outer({{"inner", ls}}, {2});
  at::Tensor nested = LazyStackedTensorDict::from(outer.get_tensordict("inner")).get_nested("x");
  CHECK(nested.is_nested());
  CHECK(at::equal(nested.unbind()[1], 2 * at::ones({2})));
  // A nested tensor needs the stack along dim 0.
  LazyStackedTensorDict dim1 = lazy_stack({TensorDict({{"x", at::ones({3, 1})}}, {3}), TensorDict({{"x", at::ones({3, 2})}}, {3})}, 1);
  REQUIRE_THROWS_AS(dim1.get_nested("x"), ValueError);
  CHECK(sizes(dim1.get_padded("x").sizes()) == Sizes{3, 2, 2});
}

TEST_CASE("case 7: repr shows -1 for ragged dims and the exclusive fields", "[lazy][repr]") {
  LazyStackedTensorDict ls = lazy_stack({TensorDict({{"a", at::zeros({3})}, {"b", at::zeros({2, 3})}}),
                                         TensorDict({{"a", at::zeros({2})}, {"b", at::zeros({})}, {"c", at::zeros({1})}})});
  const std::string repr = ls.repr();
  CHECK_THAT(repr, Catch::Contains("a: Tensor(shape=torch.Size([2, -1]), device=cpu, dtype=torch.float32"));
  CHECK_THAT(repr, Catch::Contains("b: Tensor(shape=torch.Size([-1]), device=cpu"));
  CHECK_THAT(repr, Catch::Contains("exclusive_fields={\n        1 ->\n            c: Tensor(shape=torch.Size([1])"));
  CHECK_THAT(repr, Catch::EndsWith("stack_dim=0)"));
}

TEST_CASE("case 8-12: common keys, exclusive keys, set and set_", "[lazy][errors]") {
  TensorDict m0({{"a", at::zeros({4})}});
  TensorDict m1({{"a", at::zeros({4})}, {"b", at::zeros({3})}, {"c", at::zeros({10})}, {"d", at::zeros({5})}});
  TensorDict ls = maybe_dense_stack({m0, m1});
  REQUIRE(LazyStackedTensorDict::is_lazy_stack(ls));
  CHECK_FALSE(has_key(ls, "b"));
  CHECK(has_key(ls.index({1}), "b"));
  CHECK(LazyStackedTensorDict::from(ls).exclusive_keys() == std::vector<std::string>{"b", "c", "d"});
  // An exclusive key is a KeyError that names the members holding it.
  REQUIRE_THROWS_AS(ls.get("b"), KeyError);
  REQUIRE_THROWS_WITH(ls.get("b"), Catch::Contains("held by member(s) 1 of 2"));
  // case 9: set creates the key in every member, then set_ works.
  at::Tensor v = at::randn({2, 10});
  ls.set("b", v);
  CHECK(at::equal(m0.get("b"), v[0]));
  CHECK(at::equal(m1.get("b"), v[1]));
  ls.set_("b", at::zeros({2, 10}));
  CHECK(at::equal(m1.get("b"), at::zeros({10})));
  // case 10: set_ of a key some members lack.
  REQUIRE_THROWS_AS(ls.set_("c", at::randn({2, 10})), KeyError);
  REQUIRE_THROWS_WITH(ls.set_("c", at::randn({2, 10})),
                      Catch::Contains("only permitted if all members of the stack have this key in their register"));
  // case 11: ragged d once both hold it.
  m0.set("d", at::zeros({6}));
  REQUIRE_THROWS_WITH(ls.get("d"), Catch::Contains("Failed to stack tensors"));
  // case 12.
  ls.set("e", at::randn({2, 4}));
  CHECK(has_key(ls, "e"));
  // A value that does not match the stacked batch is refused before any member changes.
  REQUIRE_THROWS_AS(ls.set("f", at::randn({3, 4})), ShapeError);
  CHECK_FALSE(m0.contains("f"));
}

TEST_CASE("case 13-14: ragged batch dims show -1, strict_shape and ranks refuse", "[lazy][errors]") {
  TensorDict a({}, {3}), b({}, {4});
  LazyStackedTensorDict ls = lazy_stack({a, b});
  CHECK(sizes(ls.batch_size()) == Sizes{2, -1});
  CHECK(ls.index({1}).is_same(b));
  REQUIRE_THROWS_AS(LazyStackedTensorDict({a, b}, 0, /*strict_shape=*/true), RuntimeError);
  REQUIRE_THROWS_WITH(LazyStackedTensorDict({a, TensorDict({}, {3, 1})}),
                      Catch::Contains("batch sizes in tensordicts differs, LazyStackedTensorDict cannot be created"));
  REQUIRE_THROWS_AS(lazy_stack({}), ValueError);
  REQUIRE_THROWS_WITH(lazy_stack({a, a}, 3), Catch::Contains("too big"));
  TensorDict on_meta = TensorDict::empty_with({3}, at::Device(at::kMeta));
  REQUIRE_THROWS_WITH(lazy_stack({a, on_meta}), Catch::Contains("devices differ"));
}

TEST_CASE("case 15: the batch size of a lazy stack is fixed, to_tensordict's is not", "[lazy][errors]") {
  LazyStackedTensorDict ls = lazy_stack({TensorDict({{"a", at::zeros({3})}}, {3}), TensorDict({{"a", at::ones({3})}}, {3})});
  REQUIRE_THROWS_AS(ls.set_batch_size({2}), RuntimeError);
  REQUIRE_THROWS_WITH(ls.set_batch_size({2}), Catch::Contains("to_tensordict()"));
  TensorDict dense = ls.to_tensordict();
  CHECK(std::string(dense.type_name()) == "TensorDict");
  dense.set_batch_size({2});
  CHECK(sizes(dense.batch_size()) == Sizes{2});
  CHECK(std::string(ls.contiguous().type_name()) == "TensorDict");
}

TEST_CASE("case 16-18: locking blocks append and insert, locks members", "[lazy][lock][errors]") {
  TensorDict td0({{"a", at::zeros({3})}}, {3}), td1({{"a", at::ones({3})}}, {3});
  LazyStackedTensorDict ls = lazy_stack({td0, td1});
  ls.lock_();
  CHECK(td0.is_locked());
  REQUIRE_THROWS_AS(ls.append(td0), LockedError);
  REQUIRE_THROWS_AS(ls.insert(0, td0), LockedError);
  ls.unlock_();
  CHECK_FALSE(td0.is_locked());
  ls.append(TensorDict({{"a", at::zeros({3})}}, {3}));
  ls.insert(0, td1);
  CHECK(ls.num_members() == 4);
  CHECK(sizes(ls.batch_size()) == Sizes{4, 3});
  CHECK(ls.index({0}).is_same(td1));
  // case 17.
  REQUIRE_THROWS_AS(ls.append(TensorDict({}, {5})), ValueError);
  REQUIRE_THROWS_WITH(ls.append(TensorDict({}, {5})), Catch::Contains("Batch sizes in tensordicts differs"));
  // case 18: locked through its members only when all of them are.
  LazyStackedTensorDict two = lazy_stack({td0, td1});
  td0.lock_();
  CHECK_FALSE(two.is_locked());
  td1.lock_();
  CHECK(two.is_locked());
}

TEST_CASE("append to a ragged stack keeps its -1 (Python resets it from member 0)", "[lazy][python_weakness]") {
  LazyStackedTensorDict ls = lazy_stack({TensorDict({}, {3}), TensorDict({}, {4})});
  ls.append(TensorDict({}, {7}));
  CHECK(sizes(ls.batch_size()) == Sizes{3, -1});
  REQUIRE_THROWS_AS(ls.append(TensorDict({}, {7, 1})), ValueError);
}

TEST_CASE("case 19: empty lazy stacks", "[lazy]") {
  LazyStackedTensorDict empty = LazyStackedTensorDict::empty();
  CHECK(sizes(empty.batch_size()) == Sizes{0});
  CHECK_FALSE(empty.device().has_value());
  LazyStackedTensorDict e2 = LazyStackedTensorDict::empty({1, 2}, 1, at::Device(at::kCPU));
  CHECK(sizes(e2.batch_size()) == Sizes{1, 0, 2});
  e2.append(TensorDict::empty_with({1, 2}, at::Device(at::kCPU)));
  CHECK(sizes(e2.batch_size()) == Sizes{1, 1, 2});
}

TEST_CASE("case 20: maybe_dense_stack is dense when members match", "[lazy]") {
  TensorDict dense = maybe_dense_stack({TensorDict({{"a", 0}}), TensorDict({{"a", 0}})});
  CHECK(std::string(dense.type_name()) == "TensorDict");
  CHECK(sizes(dense.batch_size()) == Sizes{2});
  TensorDict lazy = maybe_dense_stack({TensorDict({{"a", 0}}), TensorDict({{"b", 0}})});
  CHECK(LazyStackedTensorDict::is_lazy_stack(lazy));
  TensorDict shapes = maybe_dense_stack({TensorDict({{"a", at::zeros({2})}}), TensorDict({{"a", at::zeros({3})}})});
  CHECK(LazyStackedTensorDict::is_lazy_stack(shapes));
}

TEST_CASE("case 21: densify gives nested tensors for ragged and exclusive keys, in first-seen order", "[lazy]") {
  LazyStackedTensorDict ls = lazy_stack(
      {TensorDict({{"a", at::zeros({1})}, {"b", at::zeros({2})}, {"d", {{"e", 0.0}}}}),
       TensorDict({{"b", at::ones({1})}, {"c", at::ones({2})}, {"d", {{"e", 1.0}}}})});
  TensorDict dense = ls.densify();
  CHECK(dense.keys() == (std::vector<NestedKey>{"a", "b", "d", "c"}));
  CHECK(dense.get("a").is_nested());
  CHECK(dense.get("b").is_nested());
  CHECK(dense.get("c").is_nested());
  CHECK(at::equal(dense.get("c").unbind()[1], at::ones({2})));
  CHECK(dense.get("c").unbind()[0].numel() == 0);  // the member without it: empty
  CHECK(at::equal(dense.get({"d", "e"}), at::tensor({0.0, 1.0}, at::kDouble)));
  TensorDict padded = ls.densify(DensifyLayout::Padded);
  CHECK(at::equal(padded.get("b"), at::tensor({0.f, 0.f, 1.f, 0.f}).view({2, 2})));
  CHECK(at::equal(padded.get("a"), at::zeros({2, 1})));
  // A 0-dim leaf has no empty form for the members that lack it.
  LazyStackedTensorDict scalars = lazy_stack({TensorDict({{"s", at::zeros({})}}), TensorDict({{"t", at::zeros({})}})});
  REQUIRE_THROWS_WITH(scalars.densify(), Catch::Contains("empty shape and exclusive keys"));
}

TEST_CASE("case 22: shape ops stay lazy and match the dense ones", "[lazy][shape]") {
  TensorDict td({{"x", at::randn({3, 4, 2})}, {"n", {{"y", at::randn({3, 4})}}}}, {3, 4});
  for (int64_t k : {0, 1, -1, -2}) {
    TensorDict lazy = lazy_stack(td.unbind(1), 1).unsqueeze(k);
    TensorDict dense = td.unsqueeze(k);
    CHECK(LazyStackedTensorDict::is_lazy_stack(lazy));
    CHECK(sizes(lazy.batch_size()) == sizes(dense.batch_size()));
    CHECK(at::equal(lazy.get("x"), dense.get("x")));
    CHECK(at::equal(lazy.get({"n", "y"}), dense.get({"n", "y"})));
  }
  TensorDict ls = lazy_stack(td.unbind(1), 1);
  TensorDict p = ls.permute({1, 0});
  CHECK(LazyStackedTensorDict::from(p).stack_dim() == 0);
  CHECK(at::equal(p.get("x"), td.permute({1, 0}).get("x")));
  TensorDict t = ls.transpose(0, 1);
  CHECK(LazyStackedTensorDict::is_lazy_stack(t));
  CHECK(at::equal(t.get("x"), td.transpose(0, 1).get("x")));
  TensorDict sq = ls.unsqueeze(0).squeeze(0);
  CHECK(LazyStackedTensorDict::is_lazy_stack(sq));
  CHECK(at::equal(sq.get("x"), td.get("x")));
}

TEST_CASE("case 23: apply over a nested lazy stack", "[lazy][apply]") {
  auto member = [](double v, int64_t n) { return TensorDict({{"a", {{"b", {{"c", v * at::ones({3, n})}}}}}}, {3}); };
  TensorDict parent({{"parent", lazy_stack({member(1, 4), member(2, 4)})}}, {2});
  TensorDict sum = parent.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, parent.clone());
  CHECK(at::equal(sum.get({"parent", "a", "b", "c"})[1], 4 * at::ones({3, 4})));
  // Left for later: Python applies member by member and stays lazy, so ragged members work
  // there; here apply reads stacked leaves, and ragged ones raise the typed stacking error.
  TensorDict ragged({{"parent", lazy_stack({member(1, 4), member(2, 5)})}}, {2});
  REQUIRE_THROWS_WITH(ragged.apply([](const at::Tensor& x) { return x + 1; }), Catch::Contains("Failed to stack tensors"));
}

TEST_CASE("case 24: membership is identity", "[lazy]") {
  TensorDict td0({{"a", at::zeros({3})}}), td1({{"a", at::ones({3})}});
  LazyStackedTensorDict ls = lazy_stack({td0, td1});
  CHECK(ls.has_member(td0));
  CHECK_FALSE(ls.has_member(td0.clone()));
}

TEST_CASE("indices on the stack dim pick members, no copy", "[lazy][indexing]") {
  std::vector<TensorDict> ms;
  for (int i = 0; i < 5; ++i) ms.push_back(TensorDict({{"x", at::full({2}, double(i))}}));
  LazyStackedTensorDict ls = lazy_stack(ms);
  LazyStackedTensorDict half = LazyStackedTensorDict::from(ls.index({Slice(1, 4, 2)}));
  CHECK(half.num_members() == 2);
  CHECK(half.member(0).is_same(ms[1]));
  CHECK(half.member(1).is_same(ms[3]));
  LazyStackedTensorDict picked = LazyStackedTensorDict::from(ls.index({at::tensor({4, 0, 4}, at::kLong)}));
  CHECK(picked.member(0).is_same(ms[4]));
  CHECK(picked.member(2).is_same(ms[4]));  // repeated: the same member
  LazyStackedTensorDict masked = LazyStackedTensorDict::from(ls.index({at::tensor({0, 1, 0, 0, 1}).to(at::kBool)}));
  CHECK(masked.member(1).is_same(ms[4]));
  // An empty selection keeps the type and the batch.
  TensorDict none = ls.index({Slice(2, 2)});
  CHECK(LazyStackedTensorDict::is_lazy_stack(none));
  CHECK(sizes(none.batch_size()) == Sizes{0});
  // None unsqueezes, and the stack dim moves after it.
  TensorDict lifted = ls.index({at::indexing::None});
  CHECK(sizes(lifted.batch_size()) == Sizes{1, 5});
  CHECK(LazyStackedTensorDict::from(lifted).stack_dim() == 1);
}

TEST_CASE("ls[i] and ls[a:b] share the members and keep batch, names and errors", "[lazy][indexing]") {
  std::vector<TensorDict> ms;
  for (int i = 0; i < 5; ++i) ms.push_back(TensorDict({{"x", at::full({3, 2}, double(i))}}, {3}));
  LazyStackedTensorDict ls = lazy_stack(ms);
  CHECK(ls.index({4}).is_same(ms[4]));
  CHECK(ls.index({-1}).is_same(ms[4]));
  CHECK_THROWS_AS(ls.index({5}), IndexError);
  CHECK_THROWS_WITH(ls.index({-6}), Catch::Contains("out of range"));
  TensorDict tail = ls.index({Slice(3, at::indexing::None)});
  CHECK(sizes(tail.batch_size()) == Sizes{2, 3});
  CHECK(LazyStackedTensorDict::from(tail).member(1).is_same(ms[4]));
  tail.set("x", at::zeros({2, 3, 2}));  // a write through the sub-stack reaches the member
  CHECK(at::equal(ms[3].get("x"), at::zeros({3, 2})));
  // Stacked along dim 1: ls[i] indexes the members' dim 0; ls[:, a:b] picks members.
  TensorDict by_col = lazy_stack(ms, 1);
  CHECK(sizes(by_col.index({0}).batch_size()) == Sizes{5});
  CHECK_FALSE(by_col.index({0}).is_same(ms[0]));
  TensorDict cols = by_col.index({Slice(), Slice(1, 3)});
  CHECK(sizes(cols.batch_size()) == Sizes{3, 2});
  CHECK(LazyStackedTensorDict::from(cols).member(0).is_same(ms[1]));
  // Batch-dim names follow both shortcuts.
  TensorDict named = lazy_stack(ms);
  named.set_names({"env", "t"});
  CHECK(named.index({1}).names() == std::vector<std::optional<std::string>>{"t"});
  CHECK(named.index({Slice(0, 2)}).names() == std::vector<std::optional<std::string>>{"env", "t"});
}

TEST_CASE("a mask over the stack dim and another dim is split per member", "[lazy][indexing]") {
  TensorDict td({{"x", at::arange(12).view({3, 4})}}, {3, 4});
  TensorDict ls = lazy_stack(td.unbind(0), 0);
  at::Tensor mask = at::rand({3, 4}) > 0.5;
  CHECK(at::equal(ls.index({mask}).get("x"), td.get("x").index({mask})));
  at::Tensor rows = at::tensor({2, 0}, at::kLong), cols = at::tensor({1, 3}, at::kLong);
  CHECK(at::equal(ls.index({rows, cols}).get("x"), td.get("x").index({rows, cols})));
}

TEST_CASE("writes reach the members: index_put_, set_at_, in-place math", "[lazy][write_path]") {
  TensorDict a({{"x", at::zeros({4})}, {"n", {{"y", at::zeros({4, 2})}}}}, {4});
  TensorDict b({{"x", at::zeros({4})}, {"n", {{"y", at::zeros({4, 2})}}}}, {4});
  TensorDict ls = lazy_stack({a, b});
  ls.index_put_({1, Slice(0, 2)}, TensorDict({{"x", at::ones({2})}}, {2}));
  CHECK(at::equal(b.get("x"), at::tensor({1.f, 1.f, 0.f, 0.f})));
  CHECK(at::equal(a.get("x"), at::zeros({4})));
  ls.set_at_({"n", "y"}, at::full({2}, 7.0), {0, 3});
  CHECK(at::equal(a.get({"n", "y"})[3], at::full({2}, 7.f)));
  ls.index_put_({Slice(), 0}, 5.0);
  CHECK(a.get("x")[0].item<float>() == 5);
  CHECK(b.get({"n", "y"})[0][1].item<float>() == 5);
  ls += 1;
  CHECK(at::equal(a.get("x"), at::tensor({6.f, 1.f, 1.f, 1.f})));
  ls.zero_();
  CHECK(b.get({"n", "y"}).sum().item<float>() == 0);
  // A value broadcast along the stack dim: each member gets its row.
  ls.set_("x", at::tensor({1.f, 2.f}).view({2, 1}).expand({2, 4}));
  CHECK(at::equal(b.get("x"), at::full({4}, 2.f)));
}

TEST_CASE("update from a longer lazy stack keeps every member (Python drops the extra ones)",
          "[lazy][python_weakness]") {
  LazyStackedTensorDict ls = lazy_stack({TensorDict({{"a", at::zeros({2})}}, {2})});
  LazyStackedTensorDict longer =
      lazy_stack({TensorDict({{"a", at::ones({2})}}, {2}), TensorDict({{"a", 2 * at::ones({2})}}, {2})});
  ls.update(longer);
  REQUIRE(ls.num_members() == 2);
  CHECK(at::equal(ls.get("a"), at::tensor({1.f, 1.f, 2.f, 2.f}).view({2, 2})));
}

// ---- Storage ---------------------------------------------------------------------------------

namespace {

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

void write_text(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

}  // namespace

TEST_CASE("memmap of a lazy stack uses Python's layout and loads back lazy", "[lazy][memmap]") {
  testing_support::TempDir dir("lazy_memmap");
  TensorDict a({{"x", at::arange(6).view({3, 2})}, {"only_a", at::ones({3})}, {"s", "first"}}, {3});
  TensorDict b({{"x", at::arange(8).view({4, 2})}, {"n", {{"y", at::zeros({4, 1})}}}}, {4});
  LazyStackedTensorDict ls = lazy_stack({a, b});
  TensorDict saved = memmap(ls, dir.path());
  CHECK(LazyStackedTensorDict::is_lazy_stack(saved));
  CHECK(read_text(dir / "meta.json") ==
        "{\"_type\": \"<class 'tensordict._lazy.LazyStackedTensorDict'>\", \"stack_dim\": 0, \"num_members\": 2}");
  CHECK_THAT(read_text(dir.path("0/meta.json")), Catch::Contains("\"shape\": [3]"));
  CHECK_THAT(read_text(dir.path("1/meta.json")), Catch::Contains("\"shape\": [4]"));

  LazyStackedTensorDict loaded = LazyStackedTensorDict::from(load_memmap(dir.path()));
  CHECK(sizes(loaded.batch_size()) == Sizes{2, -1});
  CHECK(loaded.member(0).is_memmap());
  CHECK(at::equal(loaded.member(1).get("x"), b.get("x")));
  CHECK(at::equal(loaded.member(1).get({"n", "y"}), at::zeros({4, 1})));
  CHECK(loaded.exclusive_keys() == std::vector<std::string>{"only_a", "s", "n"});
  CHECK(at::equal(loaded.get_as_list("x")[0], a.get("x")));
  // Writes through the loaded stack reach the files.
  loaded.index({0}).set_("x", at::full({3, 2}, 7, at::kLong));
  LazyStackedTensorDict again = LazyStackedTensorDict::from(load_memmap(dir.path()));
  CHECK(at::equal(again.member(0).get("x"), at::full({3, 2}, 7, at::kLong)));
}

TEST_CASE("a nested lazy stack and a stack along dim 1 round-trip", "[lazy][memmap]") {
  testing_support::TempDir dir("lazy_memmap_nested");
  TensorDict grid({{"x", at::randn({3, 4})}}, {3, 4});
  TensorDict root({{"inner", lazy_stack(grid.unbind(1), 1)}, {"z", at::zeros({3})}}, {3});
  memmap(root, dir.path());
  CHECK_THAT(read_text(dir / "meta.json"), Catch::Contains("\"inner\": {\"type\": \"LazyStackedTensorDict\"}"));
  TensorDict loaded = load_memmap(dir.path());
  TensorDict inner = loaded.get_tensordict("inner");
  REQUIRE(LazyStackedTensorDict::is_lazy_stack(inner));
  CHECK(LazyStackedTensorDict::from(inner).stack_dim() == 1);
  CHECK(at::equal(inner.get("x"), grid.get("x")));
}

TEST_CASE("stale member directories of a longer save are not loaded (Python reloads them)",
          "[lazy][memmap][python_weakness]") {
  testing_support::TempDir dir("lazy_memmap_stale");
  auto member = [](double v) { return TensorDict({{"x", at::full({2}, v)}}, {2}); };
  memmap(lazy_stack({member(0), member(1), member(2)}), dir.path());
  MemmapOptions overwrite;
  overwrite.overwrite = true;
  memmap(lazy_stack({member(5), member(6)}), dir.path(), overwrite);
  CHECK_FALSE(std::filesystem::exists(dir / "2"));  // removed, so Python reads 2 members too
  CHECK(LazyStackedTensorDict::from(load_memmap(dir.path())).num_members() == 2);
  // A stale directory left behind anyway (an interrupted save) is ignored: the count decides.
  std::filesystem::copy(dir / "1", dir / "2", std::filesystem::copy_options::recursive);
  CHECK(LazyStackedTensorDict::from(load_memmap(dir.path())).num_members() == 2);
}

TEST_CASE("a lazy stack in Python's own layout (no member count) loads every member directory", "[lazy][memmap]") {
  testing_support::TempDir dir("lazy_memmap_python");
  memmap(TensorDict({{"a", at::ones({3})}}, {3}), dir / "0");
  memmap(TensorDict({{"a", at::zeros({3})}, {"b", at::ones({3, 2})}}, {3}), dir / "1");
  write_text(dir / "meta.json", "{\"_type\": \"<class 'tensordict._lazy.LazyStackedTensorDict'>\", \"stack_dim\": 1}");
  TensorDict loaded = load_memmap(dir.path());
  REQUIRE(LazyStackedTensorDict::is_lazy_stack(loaded));
  CHECK(sizes(loaded.batch_size()) == Sizes{3, 2});
  CHECK(at::equal(loaded.get("a"), at::stack({at::ones({3}), at::zeros({3})}, 1)));
  write_text(dir / "meta.json", "{\"_type\": \"<class 'tensordict._lazy.LazyStackedTensorDict'>\", \"stack_dim\": 1, \"num_members\": -2}");
  REQUIRE_THROWS_AS(load_memmap(dir.path()), StorageError);
}

TEST_CASE("get stacks leaves exactly as at::stack, whatever the stack dim and leaf layout", "[lazy][get]") {
  // Plain leaves take the byte-copy path; transposed, autograd and conj leaves go through at::stack.
  for (int64_t dim = 0; dim <= 1; ++dim) {
    INFO("stack dim " << dim);
    std::vector<TensorDict> members;
    std::vector<at::Tensor> plain, strided, grads, empty;
    for (int i = 0; i < 3; ++i) {
      plain.push_back(at::randn({2, 3, 4}));
      strided.push_back(at::randn({2, 4, 3}).transpose(1, 2));
      grads.push_back(at::randn({2, 3}).requires_grad_());
      empty.push_back(at::zeros({2, 0}));
      members.push_back(TensorDict({{"plain", plain.back()}, {"strided", strided.back()},
                                    {"grad", grads.back()}, {"empty", empty.back()},
                                    {"c", at::randn({2, 3}, at::kComplexFloat).conj()}},
                                   {2}));
    }
    LazyStackedTensorDict ls = lazy_stack(members, dim);
    CHECK(at::equal(ls.get("plain"), at::stack(plain, dim)));
    CHECK(ls.get("plain").is_contiguous());
    CHECK(at::equal(ls.get("strided"), at::stack(strided, dim)));
    CHECK((ls.get("empty").sizes() == at::stack(empty, dim).sizes()));
    at::Tensor g = ls.get("grad");
    CHECK(g.requires_grad());  // autograd sees the stack
    g.sum().backward();
    CHECK(at::equal(grads[1].grad(), at::ones({2, 3})));
    std::vector<at::Tensor> cs;
    for (auto& m : members) cs.push_back(m.get("c"));
    CHECK(at::equal(ls.get("c").resolve_conj(), at::stack(cs, dim).resolve_conj()));
  }
}

TEST_CASE("view and reshape that keep the stack dim whole stay lazy and view the members", "[lazy][shape]") {
  std::vector<TensorDict> members;
  for (int i = 0; i < 3; ++i) members.push_back(TensorDict({{"x", at::randn({4, 6, 2})}}, {4, 6}));
  LazyStackedTensorDict ls = lazy_stack(members, 1);  // batch [4, 3, 6]
  const at::Tensor dense = ls.get("x");

  TensorDict v = ls.view({2, 2, 3, 6});  // dims before the stack dim split: stack dim at 2
  REQUIRE(LazyStackedTensorDict::is_lazy_stack(v));
  CHECK(LazyStackedTensorDict::from(v).stack_dim() == 2);
  CHECK(at::equal(v.get("x"), dense.view({2, 2, 3, 6, 2})));
  TensorDict flat = ls.reshape({4, 3, 3, 2});  // dims after it
  REQUIRE(LazyStackedTensorDict::is_lazy_stack(flat));
  CHECK(at::equal(flat.get("x"), dense.reshape({4, 3, 3, 2, 2})));
  // The members of the result view the original members: writes go through.
  LazyStackedTensorDict::from(v).member(1).get("x").fill_(5.0);
  CHECK(at::equal(members[1].get("x"), at::full({4, 6, 2}, 5.0)));

  // Merging the stack dim with another reads the stacked leaves (dense), values as at::view.
  TensorDict merged = ls.view({12, 6});
  CHECK_FALSE(LazyStackedTensorDict::is_lazy_stack(merged));
  CHECK(at::equal(merged.get("x"), ls.get("x").view({12, 6, 2})));
  // flatten / unflatten of member dims stay lazy too.
  CHECK(LazyStackedTensorDict::is_lazy_stack(ls.flatten(0, 0).unflatten(2, {2, 3})));
  // A member that cannot be viewed (a transposed leaf) falls back to the stacked leaves.
  std::vector<TensorDict> strided{TensorDict({{"x", at::randn({6, 4}).t()}}, {4, 6}),
                                  TensorDict({{"x", at::randn({6, 4}).t()}}, {4, 6})};
  LazyStackedTensorDict st = lazy_stack(strided, 0);
  CHECK_FALSE(LazyStackedTensorDict::is_lazy_stack(st.view({2, 24})));
  TensorDict r = st.reshape({2, 24});
  CHECK(at::equal(r.get("x"), st.get("x").reshape({2, 24})));
}
