// consolidate(): one storage, views, metadata, one-copy device moves and the bytes round trip.

#include "support/catch_torch.h"

#include <cstring>

// support.h (ATen) before Catch: c10/util/logging defines its own CHECK macro, which must
// not replace Catch's.
#include "backends/memmap/support.h"

using namespace tensordict;
using namespace memmap_test;

namespace {
TensorDict sample() {
  TensorDict td({{"a", at::arange(2, at::kFloat)},                               // 8 bytes
                 {"h", at::tensor({1.5f, 2.5f, 3.5f}).view({1, 3}).expand({2, 3}).to(at::kHalf)},  // 12 + 4
                 {"b", {{"c", at::tensor({1, 0}).to(at::kBool)}, {"d", at::arange(4, at::kDouble).view({2, 2})}}}},
                {2});
  td.set_non_tensor("s", json::Value("a string!"));
  return td;
}

bool views_storage(const at::Tensor& leaf, const at::Tensor& storage) {
  const auto* base = static_cast<const char*>(storage.data_ptr());
  const auto* p = static_cast<const char*>(leaf.data_ptr());
  return p >= base && p + leaf.numel() * leaf.element_size() <= base + storage.numel();
}
}  // namespace

TEST_CASE("consolidate packs every leaf, 8-byte aligned, into one storage of views", "[consolidate]") {
  TensorDict td = sample();
  TensorDict c = consolidate(td);
  REQUIRE(is_consolidated(c));
  CHECK(c.is_locked());
  at::Tensor storage = consolidated_storage(c);
  CHECK(storage.scalar_type() == at::kByte);
  CHECK(storage.dim() == 1);
  CHECK(storage.numel() == 8 + 16 + 8 + 32);  // a, h (12 + 4 pad), c (2 + 6 pad), d
  for (auto& [key, entry] : c.items(true, true)) {
    INFO(key.repr());
    CHECK(views_storage(entry.tensor(), storage));
    CHECK(at::equal(entry.tensor(), td.get(key)));
    CHECK(reinterpret_cast<uintptr_t>(entry.tensor().data_ptr()) % 8 == 0);
  }
  CHECK(c.get_non_tensor("s").value() == json::Value("a string!"));
  // The leaves are views: writing the storage changes them.
  storage.zero_();
  CHECK(at::equal(c.get({"b", "d"}), at::zeros({2, 2}, at::kDouble)));
}

TEST_CASE("consolidated metadata has Python's layout", "[consolidate]") {
  TensorDict c = consolidate(sample());
  const json::Value& m = consolidated_metadata(c);
  CHECK(m.find("cls")->as_string() == "TensorDict");
  CHECK(m.find("leaves")->find("a")->dump() == R"(["torch.float32",[2],0,8,0])");
  CHECK(m.find("leaves")->find("h")->dump() == R"(["torch.float16",[2,3],8,24,4])");
  CHECK(m.find("non_tensors")->find("s")->dump() == R"(["a string!",[2],null])");
  CHECK(m.find("b")->find("leaves")->find("c")->dump() == R"(["torch.bool",[2],24,32,6])");
  CHECK(m.find("cls_metadata")->dump() == R"({"device":null,"names":[null],"batch_size":[2],"is_locked":false})");
}

TEST_CASE("to_bytes / from_bytes round-trips in the file layout", "[consolidate]") {
  TensorDict td = sample();
  std::string bytes = to_bytes(td);
  int64_t m = 0;
  std::memcpy(&m, bytes.data() + bytes.size() - 8, 8);
  CHECK(static_cast<int64_t>(bytes.size()) == 64 + m + 8);
  CHECK(json::parse(std::string_view(bytes).substr(64, m)) == consolidated_metadata(consolidate(td)));
  TensorDict back = from_bytes(bytes);
  for (auto& [key, entry] : td.items(true, true)) CHECK(at::equal(back.get(key), entry.tensor()));
  CHECK(back.get_non_tensor("s").value() == json::Value("a string!"));
  REQUIRE_THROWS_AS(from_bytes(bytes.substr(0, 5)), StorageError);
  std::string bad = bytes;
  bad[64] = '#';
  REQUIRE_THROWS_WITH(from_bytes(bad), Catch::Contains("malformed consolidated metadata"));
}

TEST_CASE("consolidate to a file writes storage, metadata and length, and maps it", "[consolidate]") {
  TempDir dir;
  TensorDict td = sample();
  ConsolidateOptions opts;
  opts.filename = dir / "td.bin";
  TensorDict c = consolidate(td, opts);
  CHECK(fs::file_size(dir / "td.bin") == to_bytes(td).size());
  TensorDict back = from_consolidated(dir / "td.bin");
  CHECK(at::equal(back.get({"b", "d"}), td.get({"b", "d"})));
  CHECK(at::equal(c.get("h"), td.get("h")));
}

TEST_CASE("to(device) of a consolidated tensordict moves the storage once", "[consolidate]") {
  TensorDict c = consolidate(sample());
  TensorDict moved = c.to(at::Device(at::kMeta));
  REQUIRE(is_consolidated(moved));
  CHECK(consolidated_storage(moved).device().type() == at::kMeta);
  CHECK(moved.get({"b", "d"}).device().type() == at::kMeta);
  CHECK((moved.get("h").sizes() == c10::IntArrayRef{2, 3}));
  CHECK(moved.is_locked());
  // A dtype conversion is not a move: leaves are converted one by one.
  TensorDict cast = c.to(at::kDouble);
  CHECK_FALSE(is_consolidated(cast));
  CHECK(cast.get("h").scalar_type() == at::kDouble);
}

TEST_CASE("consolidate refuses sub-tensordict keys that collide with metadata fields", "[consolidate]") {
  TensorDict td({{"leaves", {{"x", at::ones({2})}}}}, {2});
  REQUIRE_THROWS_AS(consolidate(td), ValueError);
  REQUIRE_THROWS_WITH(consolidate(td), Catch::Contains("'leaves'"));
}
