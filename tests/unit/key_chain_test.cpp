// The key path a walk carries down nested levels (detail::KeyChain): built on the stack, turned
// into a NestedKey only for an error or a callable that takes the key. Each walk that carries
// one (binary ops, apply, apply_, stack/cat, index_put_) names the full path of a bad entry two
// levels down; a LibTorch error raised for a leaf is re-raised naming it, whichever of its two
// exception types LibTorch used.
#include "support/catch_torch.h"

#include <stdexcept>

#include <tensordict/tensordict.h>

#include "core/key_chain.h"

using namespace tensordict;
using tensordict::detail::KeyChain;

namespace {
// {"a": 2x3, "n": {"m": {"x": 2x3, "y": 2x3}}}, batch [2].
TensorDict nested_td() {
  TensorDict td({}, {2});
  td.set("a", at::zeros({2, 3}));
  td.set({"n", "m", "x"}, at::zeros({2, 3}));
  td.set({"n", "m", "y"}, at::zeros({2, 3}));
  return td;
}
}  // namespace

TEST_CASE("a key chain names its path from the root only when asked", "[unit][key_chain]") {
  const KeyChain root;
  CHECK(root.empty());
  CHECK(root.path().empty());
  CHECK(root.child_path("a") == NestedKey("a"));
  const std::string n = "n", m = "m";
  const KeyChain level_n = root.child(n);
  const KeyChain level_m = level_n.child(m);
  CHECK_FALSE(level_m.empty());
  CHECK(level_m.path() == NestedKey({"n", "m"}));
  CHECK(level_m.child_path("x") == NestedKey({"n", "m", "x"}));
  CHECK(level_m.repr() == "('n', 'm')");
  CHECK(level_n.path() == NestedKey("n"));  // a child leaves its parent as it was
}

TEST_CASE("binary ops name the nested path of entries of different kinds", "[unit][key_chain]") {
  TensorDict a = nested_td();
  TensorDict b = nested_td();
  b.erase({"n", "m", "y"});
  b.set({"n", "m", "y", "deeper"}, at::zeros({2, 3}));
  CHECK_THROWS_WITH(a + b, Catch::Contains("('n', 'm', 'y')"));
}

TEST_CASE("apply names the nested path of a result of the wrong shape and of a missing key", "[unit][key_chain]") {
  TensorDict td = nested_td();
  CHECK_THROWS_WITH(td.apply([](const at::Tensor& x) { return x.sum(); }), Catch::Contains("key 'a'"));
  TensorDict only_n = nested_td();
  only_n.erase("a");
  CHECK_THROWS_WITH(only_n.apply([](const at::Tensor& x) { return x.sum(); }),
                    Catch::Contains("the result for key ('n', 'm', 'x') has shape"));
  TensorDict other = nested_td();
  other.erase({"n", "m", "y"});
  CHECK_THROWS_WITH(td.apply([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, other),
                    Catch::Contains("key ('n', 'm', 'y') not found in the tensordict #1"));
  // named_apply still hands the callable the full key.
  std::vector<NestedKey> seen;
  td.named_apply(
      [&](const NestedKey& k, const at::Tensor& x) {
        seen.push_back(k);
        return x;
      },
      /*nested_keys=*/true);
  CHECK((seen == std::vector<NestedKey>{NestedKey("a"), NestedKey({"n", "m", "x"}), NestedKey({"n", "m", "y"})}));
}

TEST_CASE("apply_ names the nested path of a missing or mistyped other entry", "[unit][key_chain]") {
  TensorDict td = nested_td();
  TensorDict other = nested_td();
  other.erase({"n", "m", "y"});
  CHECK_THROWS_WITH(td.apply_([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, other),
                    Catch::Contains("key ('n', 'm', 'y') not found as a tensor in the tensordict #1 passed to apply_"));
  TensorDict flat = nested_td();
  flat.erase("n");
  flat.set("n", at::zeros({2, 3}));
  CHECK_THROWS_WITH(td.apply_([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, flat),
                    Catch::Contains("key 'n' not found as a TensorDict in the tensordict #1 passed to apply_"));
  // A failing kernel names its leaf too; the leaf written before it keeps its write.
  int calls = 0;
  CHECK_THROWS_WITH(td.apply_([&](const at::Tensor& x) { return ++calls == 2 ? x.view({-1, 7}) : x.add_(1); }),
                    Catch::Contains("apply_ failed for key ('n', 'm', 'x')"));
  CHECK(at::equal(td.get("a"), at::ones({2, 3})));
  TensorDict ok = nested_td();
  ok.apply_([](const at::Tensor& x, const at::Tensor& y) { return x + y + 1; }, nested_td());
  CHECK(at::equal(ok.get({"n", "m", "y"}), at::ones({2, 3})));
}

TEST_CASE("stack and cat name the nested path of a mismatched entry", "[unit][key_chain]") {
  TensorDict a = nested_td();
  TensorDict b = nested_td();
  b.erase({"n", "m", "x"});
  b.set({"n", "m", "x", "z"}, at::zeros({2, 3}));
  CHECK_THROWS_WITH(stack({a, b}, 0), Catch::Contains("cannot stack key ('n', 'm', 'x')"));
  TensorDict c = nested_td();
  c.set({"n", "m", "y"}, at::zeros({2, 4}));
  CHECK_THROWS_WITH(stack({a, c}, 0), Catch::Contains("for key ('n', 'm', 'y')"));
  CHECK_THROWS_WITH(cat({a, c}, 0), Catch::Contains("for key ('n', 'm', 'y')"));
}

TEST_CASE("index_put_ names the nested path of the entry it cannot write", "[unit][key_chain]") {
  TensorDict td = nested_td();
  TensorDict value = nested_td().index({0});
  value.erase({"n", "m", "x"});
  value.set({"n", "m", "x", "z"}, at::zeros({3}));
  CHECK_THROWS_WITH(td.index_put_({0}, value), Catch::Contains("('n', 'm', 'x')"));
  TensorDict wide = nested_td().index({0});
  wide.set({"n", "m", "y"}, at::zeros({4}));
  CHECK_THROWS_WITH(td.index_put_({0}, wide), Catch::Contains("into ('n', 'm', 'y')[(0)]"));
  TensorDict flat({}, {2});
  flat.set({"n", "m", "x"}, at::zeros({2, 3}));
  CHECK_THROWS_WITH(flat.index_put_({0}, at::zeros({5})), Catch::Contains("cannot write into ('n', 'm', 'x')[(0)]"));
}

namespace {
struct CallableError : std::runtime_error {
  using std::runtime_error::runtime_error;
};
}  // namespace

TEST_CASE("a leaf's LibTorch error is named whether LibTorch raised c10::Error or std::runtime_error",
          "[unit][key_chain]") {
  TensorDict td = nested_td();
  // LibTorch 1.13 raises view's shape errors as a plain std::runtime_error, not c10::Error.
  CHECK_THROWS_WITH(td.apply([](const at::Tensor& x) { return x.view({-1, 7}); }),
                    Catch::Contains("apply failed for key 'a': shape '[-1, 7]' is invalid"));
  CHECK_THROWS_AS(td.apply([](const at::Tensor& x) { return x.view({-1, 7}); }), RuntimeError);
  CHECK_THROWS_WITH(td.apply([](const at::Tensor& x) { return x.mm(x); }),
                    Catch::Contains("apply failed for key 'a'"));
  // A plain std::runtime_error is wrapped wherever it came from, and stays a std::runtime_error.
  CHECK_THROWS_WITH(td.apply([](const at::Tensor&) -> at::Tensor { throw std::runtime_error("plain"); }),
                    Catch::Equals("apply failed for key 'a': plain"));
  CHECK_THROWS_AS(td.apply([](const at::Tensor&) -> at::Tensor { throw std::runtime_error("plain"); }),
                  std::runtime_error);
  // A tensordict error keeps its type; the callable's own exception type passes through untouched.
  TensorDict other = nested_td();
  CHECK_THROWS_AS(td.apply([&](const at::Tensor& x) { return other.get({"n", "missing"}) + x; }), KeyError);
  CHECK_THROWS_AS(td.apply([](const at::Tensor&) -> at::Tensor { throw CallableError("mine"); }), CallableError);
  CHECK_THROWS_WITH(td.apply([](const at::Tensor&) -> at::Tensor { throw CallableError("mine"); }),
                    Catch::Equals("mine"));
  CHECK_THROWS_AS(td.apply_([](const at::Tensor&) -> at::Tensor { throw CallableError("mine"); }), CallableError);
  CHECK_THROWS_WITH(td.apply_([](const at::Tensor& x) { return x.reshape({-1, 5}); }),
                    Catch::Contains("apply_ failed for key 'a': shape '[-1, 5]' is invalid"));
}
