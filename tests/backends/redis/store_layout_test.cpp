// The key layout and metadata codec of TensorDictStore (Python tensordict v0.14's), and the
// typed errors for metadata another program wrote wrong.
#include "support/catch_torch.h"

#include <string>

#include <tensordict/errors.h>

#include <tensordict/entry.h>

#include "backends/redis/store_layout.h"
#include "backends/redis/store_level.h"

using namespace tensordict;
using namespace tensordict::redis;

TEST_CASE("store keys are Python's, with the id in hash-tag braces", "[redis][layout]") {
  const StoreKeys keys("tensordict", "0b6c");
  CHECK(keys.batch_size() == "tensordict:{0b6c}:__batch_size__");
  CHECK(keys.device() == "tensordict:{0b6c}:__device__");
  CHECK(keys.keys() == "tensordict:{0b6c}:__keys__");
  CHECK(keys.data("next.obs") == "tensordict:{0b6c}:d:next.obs");
  CHECK(keys.meta("obs") == "tensordict:{0b6c}:m:obs");
  CHECK(StoreKeys("rb", "x").data("a") == "rb:{x}:d:a");
}

TEST_CASE("new store ids are version-4 UUIDs", "[redis][layout]") {
  const std::string a = new_td_id(), b = new_td_id();
  CHECK(a != b);
  REQUIRE(a.size() == 36);
  CHECK(a[8] == '-');
  CHECK(a[13] == '-');
  CHECK(a[14] == '4');
  CHECK(std::string("89ab").find(a[19]) != std::string::npos);
}

TEST_CASE("nested keys join with dots and every key reads back as written", "[redis][layout]") {
  CHECK(leaf_path(NestedKey{"next", "obs"}) == "next.obs");
  CHECK(split_path("next.obs") == NestedKey({"next", "obs"}));
  // Dots, percent signs and empty parts are escaped; Python would split "a.b" into nesting.
  CHECK(leaf_path(NestedKey("a.b")) == "a%2Eb");
  CHECK(leaf_path(NestedKey{"x", "", "100%"}) == "x.%.100%25");
  for (const NestedKey& key : {NestedKey("a.b"), NestedKey{"x", "", "100%"}, NestedKey("%2E"), NestedKey{"", ""}})
    CHECK(split_path(leaf_path(key)) == key);
}

TEST_CASE("shapes are JSON lists as Python writes them", "[redis][layout]") {
  CHECK(shape_json({10, 3}) == "[10, 3]");
  CHECK(shape_json({}) == "[]");
  CHECK(parse_shape("[10, 3]", "k") == std::vector<int64_t>{10, 3});
  CHECK(parse_shape("[]", "k").empty());
  CHECK_THROWS_WITH(parse_shape("[1, -2]", "tensordict:{x}:__batch_size__"),
                    Catch::StartsWith("tensordict:{x}:__batch_size__: expected a JSON list of sizes >= 0"));
  CHECK_THROWS_AS(parse_shape("[1.5]", "k"), StorageError);
  CHECK_THROWS_AS(parse_shape("not json", "k"), StorageError);
  CHECK_THROWS_AS(parse_shape("{\"a\": 1}", "k"), StorageError);
  // Found by store_metadata_fuzzer (fuzz/regressions/store_metadata/): sizes whose product
  // overflows int64 reached LibTorch when a value was broadcast to them.
  CHECK_THROWS_WITH(parse_shape("[4611686018427387904, 4]", "k"), Catch::Contains("int64"));
  std::string many = "[2";
  for (int i = 0; i < 70; ++i) many += ", 2";
  CHECK_THROWS_AS(parse_shape(many + "]", "k"), StorageError);
}

TEST_CASE("leaf metadata is checked: missing fields and bad values are StorageErrors naming the key",
          "[redis][layout]") {
  const std::string key = "tensordict:{x}:m:obs";
  const LeafMetadata tensor = parse_metadata({{"shape", "[10, 3]"}, {"dtype", "torch.float32"}}, key);
  CHECK_FALSE(tensor.is_non_tensor);
  CHECK(tensor.shape == std::vector<int64_t>{10, 3});
  CHECK(tensor.dtype == at::kFloat);
  const LeafMetadata text = parse_metadata({{"is_non_tensor", "1"}, {"encoding", "json"}}, key);
  CHECK(text.is_non_tensor);
  CHECK(text.encoding == "json");

  CHECK_THROWS_WITH(parse_metadata({{"shape", "[10]"}}, key),
                    key + ": tensor metadata without a 'dtype' field");
  CHECK_THROWS_WITH(parse_metadata({{"dtype", "torch.int64"}}, key),
                    key + ": tensor metadata without a 'shape' field");
  CHECK_THROWS_WITH(parse_metadata({}, key), key + ": the leaf's metadata hash is missing");
  CHECK_THROWS_WITH(parse_metadata({{"is_non_tensor", "1"}}, key),
                    key + ": non-tensor metadata without an 'encoding' field");
  CHECK_THROWS_WITH(parse_metadata({{"shape", "[2]"}, {"dtype", "torch.float128"}}, key),
                    key + ": unknown dtype 'torch.float128'");
  CHECK_THROWS_WITH(parse_metadata({{"shape", "[9223372036854775807, 4]"}, {"dtype", "torch.float32"}}, key),
                    Catch::Contains("holds more bytes than int64 can count"));
}

TEST_CASE("a json_array broadcast to a batch no memory can hold is a StorageError", "[redis][layout]") {
  // Found by store_metadata_fuzzer (fuzz/regressions/store_metadata/json-array-huge-batch): one
  // value per row of dim 0, broadcast over a batch of 2 x 2e13, failed in LibTorch's allocator.
  const LeafMetadata meta = parse_metadata({{"is_non_tensor", "1"}, {"encoding", "json_array"}}, "m:x");
  const std::vector<int64_t> batch{2, 20000000000002};
  CHECK_THROWS_WITH(decode_leaf(meta, "[\"a\", \"b\"]", "d:x", batch, std::nullopt),
                    Catch::Contains("d:x") && Catch::Contains("cannot hold"));
  // And 2 x 4.8e8 (fuzz/regressions/store_metadata/json-array-large-broadcast): 7.7 GB of ids
  // for two values.
  CHECK_THROWS_WITH(decode_leaf(meta, "[\"a\", \"b\"]", "d:x", std::vector<int64_t>{2, 482809304}, std::nullopt),
                    Catch::Contains("2^27"));
  CHECK(decode_leaf(meta, "[\"a\", \"b\"]", "d:x", std::vector<int64_t>{2, 3}, std::nullopt).is_non_tensor());
}
