// Reading memmap directories written by Python tensordict (its own artifact) and by
// make_fixtures.py, an independent writer of the documented format.

// support.h (ATen) before Catch: c10/util/logging defines its own CHECK macro, which must
// not replace Catch's.
#include "support/catch_torch.h"

#include "backends/memmap/support.h"

using namespace tensordict;
using namespace memmap_test;

TEST_CASE("Python tensordict's mmap_example loads with keys, shapes, dtypes and values", "[memmap][read]") {
  TensorDict td = load_memmap(std::string(TENSORDICT_SOURCE_DIR) + "/tests/data/python-tensordict/mmap_example");
  CHECK(td.is_memmap());
  CHECK(td.is_locked());
  CHECK((td.batch_size() == c10::IntArrayRef{2, 1}));
  REQUIRE(td.keys().size() == 1);
  TensorDict nested = td.get_tensordict("nested");
  CHECK((nested.batch_size() == c10::IntArrayRef{2, 1}));
  // Python's load order: leaves first (in meta.json order), then sub-collections.
  auto keys = nested.keys();
  REQUIRE(keys.size() == 3);
  CHECK(keys[0] == NestedKey("int64"));
  CHECK(keys[1] == NestedKey("bfloat16"));
  CHECK(keys[2] == NestedKey("string"));
  at::Tensor i = td.get({"nested", "int64"});
  CHECK(i.scalar_type() == at::kLong);
  CHECK(at::equal(i, at::tensor({1, 2}, at::kLong).view({2, 1})));
  at::Tensor b = td.get({"nested", "bfloat16"});
  CHECK(b.scalar_type() == at::kBFloat16);
  CHECK((b.sizes() == c10::IntArrayRef{2, 1}));
  CHECK(at::equal(b.to(at::kFloat), at::ones({2, 1})));
  // The artifact stores the list ["a string!"] as the data (what Python's json.loads returns).
  CHECK(td.get_non_tensor({"nested", "string"}).value() == json::Value(json::Array{json::Value("a string!")}));
}

TEST_CASE("every dtype loads with its values, from stdlib and orjson style meta.json", "[memmap][read]") {
  const std::pair<const char*, at::ScalarType> dtypes[] = {
      {"bool", at::kBool},       {"uint8", at::kByte},         {"int8", at::kChar},
      {"int16", at::kShort},     {"int32", at::kInt},          {"int64", at::kLong},
      {"float16", at::kHalf},    {"float32", at::kFloat},      {"float64", at::kDouble},
      {"bfloat16", at::kBFloat16}, {"complex32", at::kComplexHalf}, {"complex64", at::kComplexFloat},
      {"complex128", at::kComplexDouble}};
  for (const char* style : {"stdlib", "orjson"}) {
    INFO(style);
    TensorDict td = load_memmap(fixtures() + "/all_dtypes_" + style);
    CHECK(td.keys().size() == 13);
    for (const auto& [name, dtype] : dtypes) {
      INFO(name);
      CHECK(leaf_matches(td.get(name), dtype, {2, 3}));
    }
  }
}

TEST_CASE("nested collections load with their batch sizes, leaves before sub-collections", "[memmap][read]") {
  TensorDict td = load_memmap(fixtures() + "/nested");
  auto keys = td.keys();
  REQUIRE(keys.size() == 3);
  CHECK(keys[0] == NestedKey("x"));
  CHECK(keys[1] == NestedKey("a"));
  CHECK(keys[2] == NestedKey("sub"));
  TensorDict sub = td.get_tensordict("sub");
  CHECK((sub.batch_size() == c10::IntArrayRef{3, 4}));
  CHECK(sub.keys()[0] == NestedKey("y"));
  CHECK(sub.keys()[1] == NestedKey("w"));
  CHECK(sub.keys()[2] == NestedKey("deep"));
  CHECK((td.get_tensordict({"sub", "deep"}).batch_size() == c10::IntArrayRef{3, 4}));
  CHECK(leaf_matches(td.get("x"), at::kFloat, {3, 2}));
  CHECK(leaf_matches(td.get("a"), at::kByte, {3}));
  CHECK(leaf_matches(td.get({"sub", "y"}), at::kLong, {3, 4}));
  CHECK(leaf_matches(td.get({"sub", "w"}), at::kShort, {3, 4, 2}));
  CHECK(leaf_matches(td.get({"sub", "deep", "z"}), at::kDouble, {3, 4, 5}));
}

TEST_CASE("0-dim leaves load as scalars", "[memmap][read]") {
  TensorDict td = load_memmap(fixtures() + "/scalars");
  CHECK(td.batch_size().empty());
  CHECK(td.get("f").dim() == 0);
  CHECK(leaf_matches(td.get("f"), at::kFloat, {}));
  CHECK(leaf_matches(td.get("i"), at::kLong, {}));
  CHECK(leaf_matches(td.get("b"), at::kBool, {}));
}

TEST_CASE("empty leaves have no file and load from meta.json", "[memmap][read]") {
  TensorDict td = load_memmap(fixtures() + "/empty");
  CHECK((td.get("e").sizes() == c10::IntArrayRef{2, 0}));
  CHECK(td.get("e").scalar_type() == at::kLong);
  CHECK(leaf_matches(td.get("g"), at::kFloat, {2, 3}));
  CHECK((td.get_tensordict("zero").batch_size() == c10::IntArrayRef{2, 0}));
  CHECK((td.get({"zero", "h"}).sizes() == c10::IntArrayRef{2, 0, 4}));
}

TEST_CASE("non-tensor data and stacks load with their JSON values", "[memmap][read]") {
  TensorDict td = load_memmap(fixtures() + "/non_tensor");
  CHECK(td.keys()[0] == NestedKey("t"));
  CHECK(td.get_non_tensor("text").value() == json::Value("h\xc3\xa9llo \xf0\x9f\x98\x80"));
  const json::Value& cfg = td.get_non_tensor("cfg").value();
  REQUIRE(cfg.is_object());
  CHECK(cfg.find("lr")->as_double() == 0.5);
  CHECK(cfg.find("layers")->as_array().size() == 2);
  CHECK(cfg.find("ok")->as_bool());
  CHECK(td.get_non_tensor("none").value().is_null());
  NonTensorData names = td.get_non_tensor("names");
  CHECK(names.is_stack());
  CHECK(names.tolist() == json::parse(R"(["a", "b"])"));
}

TEST_CASE("encoded key names load back to the original keys", "[memmap][read]") {
  TensorDict td = load_memmap(fixtures() + "/encoded_keys");
  for (const char* key : {"a/b", "../outside", "", ".", "..", "%", "key:colon", "sp ace", "tab\tx",
                          "\xc3\xbc" "n\xc3\xaf" "code", "a.b"}) {
    INFO(key);
    REQUIRE(td.contains(key));
    CHECK(leaf_matches(td.get(key), at::kInt, {2}));
  }
  CHECK(leaf_matches(td.get({"sub/dir", ".."}), at::kInt, {2}));
}

TEST_CASE("legacy raw file and directory names load through the fallback", "[memmap][read]") {
  TensorDict td = load_memmap(fixtures() + "/legacy");
  CHECK(leaf_matches(td.get("my key"), at::kLong, {2}));
  CHECK(leaf_matches(td.get({"old dir", "v x"}), at::kFloat, {2}));
}

TEST_CASE("extra bytes after a leaf's data are ignored", "[memmap][read]") {
  TensorDict td = load_memmap(fixtures() + "/tails");
  CHECK(leaf_matches(td.get("x"), at::kLong, {2}));
  CHECK(leaf_matches(td.get("y"), at::kBFloat16, {2}));
}

TEST_CASE("load_memmap maps lazily and subpath selects a sub-collection", "[memmap][read]") {
  LoadMemmapOptions opts;
  opts.subpath = {"sub"};
  TensorDict sub = load_memmap(fixtures() + "/nested", opts);
  CHECK((sub.batch_size() == c10::IntArrayRef{3, 4}));
  CHECK(leaf_matches(sub.get("y"), at::kLong, {3, 4}));
  // The leaves are file mappings, not copies.
  CHECK(MemoryMappedTensor::filename_of(sub.get("y")).value() == fixtures() + "/nested/sub/y.memmap");
  CHECK(memmap_path(sub) == fixtures() + "/nested/sub");
}

TEST_CASE("a LazyStackedTensorDict directory loads as a lazy stack of its elements", "[memmap][read]") {
  TensorDict td = load_memmap(fixtures() + "/lazy_stack");
  CHECK(LazyStackedTensorDict::is_lazy_stack(td));
  CHECK(LazyStackedTensorDict::from(td).member(0).is_memmap());
  CHECK((td.batch_size() == c10::IntArrayRef{3, 2}));
  at::Tensor element = expected_leaf(at::kLong, {3, 2});
  CHECK(at::equal(td.get("x"), at::stack({element, element}, 1)));
}

TEST_CASE("PersistentTensorDict output without is_nested and the 'None' device load", "[memmap][read]") {
  TensorDict td = load_memmap(fixtures() + "/persistent");
  CHECK_FALSE(td.device().has_value());
  CHECK(leaf_matches(td.get("x"), at::kFloat, {2}));
}
