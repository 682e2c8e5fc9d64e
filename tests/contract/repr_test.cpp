// Contract: printing in Python tensordict's layout (semantics.md 1.15 and 1.17). Each expected
// text is what Python tensordict v0.14 prints for the same tensordict.
#include <optional>
#include <sstream>

#include "support/catch_torch.h"

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;

TEMPLATE_LIST_TEST_CASE("repr of a nested tensordict with a string matches Python (1.17)", "[contract][repr]",
                        ContractBackends) {
  TensorDict td = TestType::make(TensorDict(
      {{"a", at::zeros({4, 3})}, {"nested", {{"b", at::zeros({4}, at::kLong)}}}, {"s", "hello"}}, {4}));
  const std::string expected =
      "TensorDict(\n"
      "    fields={\n"
      "        a: Tensor(shape=torch.Size([4, 3]), device=cpu, dtype=torch.float32, is_shared=False),\n"
      "        nested: TensorDict(\n"
      "            fields={\n"
      "                b: Tensor(shape=torch.Size([4]), device=cpu, dtype=torch.int64, is_shared=False)},\n"
      "            batch_size=torch.Size([4]),\n"
      "            device=None,\n"
      "            is_shared=False),\n"
      "        s: NonTensorData(data=hello, batch_size=torch.Size([4]), device=None)},\n"
      "    batch_size=torch.Size([4]),\n"
      "    device=None,\n"
      "    is_shared=False)";
  CHECK(td.repr() == contract::for_backend<TestType>(expected));
  std::ostringstream os;
  os << td;
  CHECK(os.str() == td.repr());
}

TEMPLATE_LIST_TEST_CASE("repr of an empty tensordict", "[contract][repr]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict());
  const std::string body =
      "(\n"
      "    fields={\n"
      "    },\n"
      "    batch_size=torch.Size([]),\n"
      "    device=None,\n"
      "    is_shared=False)";
  // Without batch dims, the lazy backend keeps the reference in memory.
  CHECK(td.repr() == std::string(td.type_name()) + contract::for_backend<TestType>(body, /*lazy=*/false));
}

TEST_CASE("repr sorts fields by their text, not by insertion order", "[repr]") {
  TensorDict td({{"z", at::zeros({2}, at::kBool)}, {"b", at::zeros({2, 1}, at::kDouble)}}, {2});
  const std::string expected =
      "TensorDict(\n"
      "    fields={\n"
      "        b: Tensor(shape=torch.Size([2, 1]), device=cpu, dtype=torch.float64, is_shared=False),\n"
      "        z: Tensor(shape=torch.Size([2]), device=cpu, dtype=torch.bool, is_shared=False)},\n"
      "    batch_size=torch.Size([2]),\n"
      "    device=None,\n"
      "    is_shared=False)";
  CHECK(td.repr() == expected);
}

TEST_CASE("repr of a non-tensor stack", "[repr][non_tensor]") {
  TensorDict td = stack({TensorDict({{"s", "a"}}), TensorDict({{"s", "b"}})});
  const std::string expected =
      "TensorDict(\n"
      "    fields={\n"
      "        s: NonTensorStack(\n"
      "            ['a', 'b'],\n"
      "            batch_size=torch.Size([2]),\n"
      "            device=None)},\n"
      "    batch_size=torch.Size([2]),\n"
      "    device=None,\n"
      "    is_shared=False)";
  CHECK(td.repr() == expected);
}

TEST_CASE("repr shows the tensordict device, leaf devices, numbers and nested empties", "[repr][device]") {
  TensorDict td({{"e", TensorDict({}, {3})}, {"i", 3}}, {}, at::Device(at::kCPU));
  td.set_non_tensor("k", json::Value(json::Object{{"x", 1.5}, {"y", true}}));
  const std::string expected =
      "TensorDict(\n"
      "    fields={\n"
      "        e: TensorDict(\n"
      "            fields={\n"
      "            },\n"
      "            batch_size=torch.Size([3]),\n"
      "            device=cpu,\n"
      "            is_shared=False),\n"
      "        i: Tensor(shape=torch.Size([]), device=cpu, dtype=torch.int64, is_shared=False),\n"
      "        k: NonTensorData(data={'x': 1.5, 'y': True}, batch_size=torch.Size([]), device=cpu)},\n"
      "    batch_size=torch.Size([]),\n"
      "    device=cpu,\n"
      "    is_shared=False)";
  CHECK(td.repr() == expected);

  TensorDict meta({{"m", at::zeros({2}, at::TensorOptions().device(at::kMeta).dtype(at::kHalf))}}, {2});
  CHECK_THAT(meta.repr(), Catch::Contains(
                              "m: Tensor(shape=torch.Size([2]), device=meta, dtype=torch.float16, is_shared=False)},"));
  CHECK_THAT(meta.repr(), Catch::Contains("    device=None,\n"));
}

TEST_CASE("key repr in error messages follows Python's str repr, control bytes escaped", "[repr][errors]") {
  CHECK(NestedKey("it's").repr() == "\"it's\"");
  CHECK(NestedKey("a'b\"c").repr() == "'a\\'b\"c'");
  CHECK(NestedKey(std::string("tab\there\r\n", 10)).repr() == "'tab\\there\\r\\n'");
  CHECK(NestedKey(std::string("nul\0end\x7f", 8)).repr() == "'nul\\x00end\\x7f'");
  CHECK(NestedKey({"a", "b\x01"}).repr() == "('a', 'b\\x01')");
  // The message names the whole key: it no longer stops at the NUL byte.
  const std::string nul_key("k\0x", 3);
  REQUIRE_THROWS_WITH(TensorDict({{nul_key, at::zeros({1})}, {nul_key, at::zeros({1})}}, {1}),
                      Catch::Contains("duplicate key 'k\\x00x' in TensorDict constructor"));
}

namespace {

// An episode of `n` steps with a per-row string.
TensorDict episode(int64_t n, const std::string& prefix) {
  json::Array labels;
  for (int64_t i = 0; i < n; ++i) labels.emplace_back(prefix + std::to_string(i));
  return TensorDict({{"r", at::zeros({n})}, {"s", NonTensorData::from_list(json::Value(labels), {n})}}, {n});
}

// The tensordicts of the contract suite's shapes: every kind of entry, batch and nesting.
std::vector<std::pair<std::string, TensorDict>> print_fixtures() {
  return {
      {"plain", TensorDict({{"a", at::zeros({4, 3})}}, {4})},
      {"nested with a string", TensorDict({{"a", at::zeros({4, 3})}, {"n", {{"b", at::zeros({4}, at::kLong)}}}, {"s", "hi"}}, {4})},
      {"empty", TensorDict()},
      {"no batch dims", TensorDict({{"x", at::zeros({})}, {"y", at::ones({2})}})},
      {"per-row strings", episode(4, "s")},
      {"zero-size dim", TensorDict({{"a", at::zeros({0, 2})}}, {0, 2})},
      {"empty nested level", TensorDict({{"a", at::zeros({3})}, {"e", TensorDict({}, {3})}}, {3})},
      {"dtypes", TensorDict({{"b", at::zeros({2}, at::kBool)}, {"i", at::zeros({2}, at::kInt)},
                             {"d", at::zeros({2, 2}, at::kDouble)}, {"h", at::zeros({2}, at::kHalf)}}, {2})},
  };
}

void check_prints(const TensorDict& td, const std::string& what) {
  INFO(what);
  std::string text;
  REQUIRE_NOTHROW(text = td.repr());
  std::ostringstream os;
  REQUIRE_NOTHROW(os << td);
  CHECK(os.str() == text);
  CHECK_THAT(text, Catch::Contains("batch_size=torch.Size(["));
  CHECK_THAT(text, !Catch::Contains("<unreadable"));
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("printing never throws: every fixture, and ragged lazy stacks of the backend's tensordicts",
                        "[contract][repr]", ContractBackends) {
  for (const auto& [name, reference] : print_fixtures()) {
    TensorDict td;
    try {
      td = TestType::make(reference);
    } catch (const tensordict::Error&) {
      continue;  // a backend that cannot hold it says so when it is made (tested elsewhere)
    }
    check_prints(td, name);
  }
  // Episodes of 5 and 8 steps held by this backend, stacked lazily: ragged, with per-row or
  // per-member strings, and with a key only one member holds.
  auto made = [](const TensorDict& td) -> std::optional<TensorDict> {
    try {
      return TestType::make(td);
    } catch (const tensordict::Error&) {
      return std::nullopt;
    }
  };
  if (auto e5 = made(episode(5, "a")), e8 = made(episode(8, "b")); e5 && e8) {
    check_prints(lazy_stack({*e5, *e8}), "ragged, per-row strings");
    check_prints(lazy_stack({lazy_stack({*e5, *e8}), lazy_stack({*e8, *e5})}), "lazy stack of ragged stacks");
  }
  TensorDict x5({{"r", at::zeros({5})}, {"s", "x"}, {"only_here", at::ones({5})}}, {5});
  TensorDict y8({{"r", at::zeros({8})}, {"s", "y"}}, {8});
  if (auto a = made(x5), b = made(y8); a && b) {
    const TensorDict ls = lazy_stack({*a, *b});
    check_prints(ls, "ragged, one string per member, an exclusive key");
    CHECK_THAT(ls.repr(), Catch::Contains("batch_size=torch.Size([2, -1])"));
    CHECK_THAT(ls.repr(), !Catch::Contains("torch.Size([2, 5])"));
  }
}

TEST_CASE("an entry that cannot be read prints the reason instead of throwing", "[repr]") {
  // Member 1 holds "x" as a tensordict where member 0 holds a tensor: reading it is a TypeError.
  TensorDict a({{"x", at::zeros({2})}}, {2});
  TensorDict b({{"x", TensorDict({}, {2})}}, {2});
  TensorDict ls = lazy_stack({a, b});
  REQUIRE_THROWS(ls.get_entry("x"));
  std::string text;
  REQUIRE_NOTHROW(text = ls.repr());
  CHECK_THAT(text, Catch::Contains("<unreadable: "));
}
