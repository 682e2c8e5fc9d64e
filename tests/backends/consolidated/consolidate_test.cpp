// consolidate(): one storage, views, metadata, one-copy device moves and the bytes round trip.

#include "support/catch_torch.h"

#include <cstring>

// support.h (ATen) before Catch: c10/util/logging defines its own CHECK macro, which must
// not replace Catch's.
#include "backends/memmap/support.h"

#include <tensordict/backends/lazy_stack.h>
#include <torch/csrc/autograd/forward_grad.h>

#include "support/dim_names_string.h"

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
  // Every leaf is the same view of the moved storage as of the original: dtype, shape, strides
  // and byte offset; non-tensors, batch sizes and dim names come along.
  const at::Tensor storage = consolidated_storage(c);
  const at::Tensor moved_storage = consolidated_storage(moved);
  for (const NestedKey& k : c.keys(true, true)) {
    INFO(k.repr());
    const at::Tensor from = c.get(k);
    const at::Tensor to = moved.get(k);
    CHECK(to.scalar_type() == from.scalar_type());
    CHECK(to.sizes() == from.sizes());
    CHECK(to.strides() == from.strides());
    CHECK(to.is_alias_of(moved_storage));
    CHECK(to.storage_offset() * to.element_size() - moved_storage.storage_offset() ==
          static_cast<const char*>(from.data_ptr()) - static_cast<const char*>(storage.data_ptr()));
  }
  CHECK(moved.get_non_tensor("s").value() == json::Value("a string!"));
  CHECK((moved.get_tensordict("b").batch_size() == c10::IntArrayRef{2}));
  TensorDict named = sample();
  named.set_names({std::string("env")});
  CHECK(consolidate(named).to(at::Device(at::kMeta)).names() == named.names());
  // A dtype conversion is not a move: leaves are converted one by one.
  TensorDict cast = c.to(at::kDouble);
  CHECK_FALSE(is_consolidated(cast));
  CHECK(cast.get("h").scalar_type() == at::kDouble);
}

TEST_CASE("to(device) of a consolidated tensordict whose leaf autograd tracks moves leaf by leaf",
          "[consolidate]") {
  TensorDict c = consolidate(sample());
  at::Tensor a = c.get("a");
  uint64_t dual_level = UINT64_MAX;
  SECTION("a leaf that requires grad") { a.requires_grad_(); }
  SECTION("a forward-mode dual level open") { dual_level = torch::autograd::ForwardADLevel::get_next_idx(); }
  // A copy of the storage would leave the moved leaves out of the graph (or without tangents);
  // per-leaf copies keep them in it.
  TensorDict moved = c.to(at::Device(at::kMeta));
  CHECK_FALSE(is_consolidated(moved));
  CHECK(moved.get("a").device().type() == at::kMeta);
  CHECK(moved.get("a").requires_grad() == a.requires_grad());
  if (dual_level != UINT64_MAX) torch::autograd::ForwardADLevel::release_idx(dual_level);
  CHECK(is_consolidated(c.to(at::Device(at::kMeta))) == !a.requires_grad());
}

TEST_CASE("consolidate(pin_memory) packs into pinned memory where CUDA is, one async copy to the GPU",
          "[consolidate]") {
  ConsolidateOptions pinned;
  pinned.pin_memory = true;
  TensorDict td = sample();
  TensorDict c = consolidate(td, pinned);
  REQUIRE(is_consolidated(c));
  CHECK(at::equal(c.get({"b", "d"}), td.get({"b", "d"})));
  // Without CUDA there is no pinned allocator: ordinary memory, as pin_memory() does.
  CHECK(consolidated_storage(c).is_pinned() == at::hasCUDA());
  if (at::hasCUDA()) {
    TensorDict on_gpu = c.to(at::Device(at::kCUDA), /*non_blocking=*/true);
    REQUIRE(is_consolidated(on_gpu));
    TensorDict back = on_gpu.to(at::Device(at::kCPU));
    for (const NestedKey& k : td.keys(true, true)) CHECK(at::equal(back.get(k), td.get(k)));
    // Back from the GPU as one copy into pinned memory, still consolidated.
    REQUIRE(is_consolidated(back));
    CHECK(consolidated_storage(back).is_pinned());
    CHECK_FALSE(is_consolidated(on_gpu.to(at::Device(at::kCPU), at::kDouble)));  // a cast: per leaf
  }
}

TEST_CASE("consolidate refuses sub-tensordict keys that collide with metadata fields", "[consolidate]") {
  TensorDict td({{"leaves", {{"x", at::ones({2})}}}}, {2});
  REQUIRE_THROWS_AS(consolidate(td), ValueError);
  REQUIRE_THROWS_WITH(consolidate(td), Catch::Contains("'leaves'"));
}

namespace {
// Two members with a ragged leaf ("r": 3 then 5 columns) and an exclusive key each.
LazyStackedTensorDict ragged_stack(int64_t stack_dim = 0) {
  TensorDict m0({{"x", at::arange(4, at::kFloat).view({2, 2})}, {"r", at::ones({2, 3}, at::kInt)},
                 {"only0", at::full({2}, 7, at::kLong)}},
                {2});
  TensorDict m1({{"x", at::arange(4, 8, at::kFloat).view({2, 2})}, {"r", at::zeros({2, 5}, at::kInt)},
                 {"n", {{"y", at::ones({2}, at::kHalf)}}}},
                {2});
  m1.set_non_tensor("tag", json::Value("one"));
  return lazy_stack({m0, m1}, stack_dim);
}

json::Value metadata_of(const std::string& bytes) {
  int64_t m = 0;
  std::memcpy(&m, bytes.data() + bytes.size() - 8, 8);
  return json::parse(std::string_view(bytes).substr(bytes.size() - 8 - static_cast<size_t>(m), static_cast<size_t>(m)));
}

void check_same_members(const LazyStackedTensorDict& back, const LazyStackedTensorDict& ls) {
  REQUIRE(back.num_members() == ls.num_members());
  CHECK(back.stack_dim() == ls.stack_dim());
  for (int64_t i = 0; i < ls.num_members(); ++i) {
    INFO("member " << i);
    TensorDict a = back.member(i);
    TensorDict b = ls.member(i);
    CHECK(a.keys(true, true) == b.keys(true, true));
    for (auto& [key, entry] : b.items(true, true)) {
      if (entry.is_tensor()) CHECK(at::equal(a.get(key), entry.tensor()));
    }
  }
}
}  // namespace

TEST_CASE("consolidate of a lazy stack keeps it lazy, members viewing one storage", "[consolidate][lazy]") {
  LazyStackedTensorDict ls = ragged_stack(1);
  TensorDict c = consolidate(ls);
  REQUIRE(LazyStackedTensorDict::is_lazy_stack(c));
  LazyStackedTensorDict lc = LazyStackedTensorDict::from(c);
  check_same_members(lc, ls);
  CHECK(lc.is_locked());
  CHECK((lc.batch_size() == c10::IntArrayRef{2, 2}));
  CHECK(lc.member(1).get_non_tensor("tag").value() == json::Value("one"));
  // Every leaf of every member is a view of the same storage; the source is untouched.
  const at::Tensor first = lc.member(0).get("x");
  CHECK(first.is_alias_of(lc.member(1).get("r")));
  CHECK(first.is_alias_of(lc.member(1).get({"n", "y"})));
  CHECK_FALSE(first.is_alias_of(ls.member(0).get("x")));
  CHECK_FALSE(is_consolidated(c));  // no dense root holds the storage
}

TEST_CASE("a lazy stack's consolidated metadata is Python's LazyStackedTensorDict level", "[consolidate][lazy]") {
  const json::Value m = metadata_of(to_bytes(ragged_stack(1)));
  CHECK(m.find("cls")->as_string() == "LazyStackedTensorDict");
  CHECK(m.find("cls_metadata")->dump() == R"({"stack_dim":1,"stack_dim_name":null,"is_locked":false})");
  CHECK(m.find("leaves")->dump() == "{}");
  CHECK(m.find("non_tensors")->dump() == "{}");
  // Members are the children "0", "1" in order, each a TensorDict level with its own batch.
  const json::Value* m0 = m.find("0");
  const json::Value* m1 = m.find("1");
  REQUIRE(m0 != nullptr);
  REQUIRE(m1 != nullptr);
  CHECK(m0->find("cls")->as_string() == "TensorDict");
  // Each dtype's leaves together, in the order the dtypes first appear (Note [Dtype groups]):
  // both members' float32 leaves, their int32 ones, member 0's int64 one, member 1's float16 one.
  CHECK(m0->find("leaves")->find("x")->dump() == R"(["torch.float32",[2,2],0,16,0])");
  CHECK(m1->find("leaves")->find("x")->dump() == R"(["torch.float32",[2,2],16,32,0])");
  CHECK(m0->find("leaves")->find("r")->dump() == R"(["torch.int32",[2,3],32,56,0])");
  CHECK(m1->find("leaves")->find("r")->dump() == R"(["torch.int32",[2,5],56,96,0])");
  CHECK(m0->find("leaves")->find("only0")->dump() == R"(["torch.int64",[2],96,112,0])");
  CHECK(m1->find("n")->find("leaves")->find("y")->dump() == R"(["torch.float16",[2],112,120,4])");
  CHECK(m1->find("non_tensors")->find("tag")->dump() == R"(["one",[2],null])");
  CHECK(m.find("2") == nullptr);
}

TEST_CASE("lazy stacks round-trip through bytes and files, also nested in a tensordict", "[consolidate][lazy]") {
  TempDir dir;
  LazyStackedTensorDict ls = ragged_stack();
  check_same_members(LazyStackedTensorDict::from(from_bytes(to_bytes(ls))), ls);

  // Nested: the root stays a consolidated TensorDict whose "envs" entry is a lazy stack.
  TensorDict td({{"envs", ls}, {"w", at::ones({2}, at::kDouble)}}, {2});
  ConsolidateOptions opts;
  opts.filename = dir / "nested.bin";
  TensorDict c = consolidate(td, opts);
  CHECK(is_consolidated(c));
  CHECK(LazyStackedTensorDict::is_lazy_stack(c.get_tensordict("envs")));
  TensorDict back = from_consolidated(dir / "nested.bin");
  REQUIRE(is_consolidated(back));
  check_same_members(LazyStackedTensorDict::from(back.get_tensordict("envs")), ls);
  CHECK(consolidated_metadata(back).find("envs")->find("cls")->as_string() == "LazyStackedTensorDict");
  // The nested members' leaves view the root's storage, so a device move is still one copy.
  const at::Tensor storage = consolidated_storage(back);
  CHECK(LazyStackedTensorDict::from(back.get_tensordict("envs")).member(1).get("r").is_alias_of(storage));
  TensorDict moved = back.to(at::Device(at::kMeta));
  CHECK(is_consolidated(moved));
  CHECK(LazyStackedTensorDict::is_lazy_stack(moved.get_tensordict("envs")));
}

TEST_CASE("a consolidated lazy stack written by Python loads as a lazy stack", "[consolidate][lazy]") {
  // The layout Python v0.14 writes for LazyStackedTensorDict(td0, td1, stack_dim=1), where
  // td0 = {a: zeros(3, 2) float32} and td1 = {a: ones(3, 2) float32, b: arange(3) int64}.
  std::string storage(24 + 24 + 24, '\0');
  std::vector<float> ones(6, 1.0F);
  std::vector<int64_t> range{0, 1, 2};
  std::memcpy(&storage[24], ones.data(), 24);
  std::memcpy(&storage[48], range.data(), 24);
  const std::string meta =
      R"({"cls": "LazyStackedTensorDict", "non_tensors": {}, "leaves": {},)"
      R"( "cls_metadata": {"stack_dim": 1, "stack_dim_name": null, "is_locked": false},)"
      R"( "0": {"cls": "TensorDict", "non_tensors": {}, "leaves": {"a": ["torch.float32", [3, 2], 0, 24, 0]},)"
      R"( "cls_metadata": {"device": null, "names": [null], "batch_size": [3], "is_locked": false}},)"
      R"( "1": {"cls": "TensorDict", "non_tensors": {}, "leaves": {"a": ["torch.float32", [3, 2], 24, 48, 0],)"
      R"( "b": ["torch.int64", [3], 48, 72, 0]},)"
      R"( "cls_metadata": {"device": null, "names": [null], "batch_size": [3], "is_locked": false}}})";
  const int64_t m = static_cast<int64_t>(meta.size());
  std::string blob = storage + meta + std::string(8, '\0');
  std::memcpy(&blob[blob.size() - 8], &m, 8);

  LazyStackedTensorDict ls = LazyStackedTensorDict::from(from_bytes(blob));
  CHECK(ls.stack_dim() == 1);
  CHECK((ls.batch_size() == c10::IntArrayRef{3, 2}));
  CHECK(at::equal(ls.get("a"), at::stack({at::zeros({3, 2}), at::ones({3, 2})}, 1)));
  CHECK(ls.exclusive_keys() == std::vector<std::string>{"b"});
  CHECK(at::equal(ls.member(1).get("b"), at::arange(3)));
}

TEST_CASE("malformed lazy stack levels raise StorageError naming the problem", "[consolidate][lazy][errors]") {
  const std::string good = to_bytes(ragged_stack());
  const json::Value meta = metadata_of(good);
  const int64_t m = static_cast<int64_t>(meta.dump().size());
  auto with_meta = [&](const std::string& text) {
    const int64_t n = static_cast<int64_t>(text.size());
    std::string blob = good.substr(0, good.size() - 8 - static_cast<size_t>(m)) + text + std::string(8, '\0');
    std::memcpy(&blob[blob.size() - 8], &n, 8);
    return blob;
  };
  auto replace = [&](std::string text, const std::string& from, const std::string& to) {
    const size_t at = text.find(from);
    REQUIRE(at != std::string::npos);
    return text.replace(at, from.size(), to);
  };
  const std::string text = meta.dump();
  REQUIRE_THROWS_WITH(from_bytes(with_meta(replace(text, R"("stack_dim":0)", R"("stack_dim":"0")"))),
                      Catch::Contains("no integer cls_metadata.stack_dim"));
  REQUIRE_THROWS_WITH(from_bytes(with_meta(replace(text, R"("1":{)", R"("7":{)"))),
                      Catch::Contains("no member \"1\""));
  REQUIRE_THROWS_WITH(from_bytes(with_meta(replace(text, R"("stack_dim":0)", R"("stack_dim":5)"))),
                      Catch::Contains("do not stack"));
  REQUIRE_THROWS_WITH(from_bytes(with_meta(replace(text, R"("leaves":{},)", R"("leaves":{"z":1},)"))),
                      Catch::Contains("leaves of its own"));
  REQUIRE_THROWS_AS(from_bytes(with_meta(replace(text, R"("cls":"LazyStackedTensorDict")", R"("cls":"Lazy")"))),
                    StorageError);
}

TEST_CASE("consolidate keeps batch-dim names in the metadata, as v0.14 writes them", "[consolidated][names]") {
  TensorDict td({{"a", at::ones({2, 3})}, {"n", {{"x", at::zeros({2, 3, 4})}}}}, {2, 3}, std::nullopt,
                {"env", std::nullopt});
  td.get_tensordict("n").set_batch_size({2, 3, 4});
  td.get_tensordict("n").set_names({"env", std::nullopt, "f"});
  TensorDict c = consolidate(td);
  CHECK(c.names() == td.names());
  CHECK(consolidated_metadata(c).find("cls_metadata")->find("names")->dump_stdlib() == R"(["env", null])");
  TensorDict back = from_bytes(to_bytes(td));
  CHECK(back.names() == td.names());
  CHECK(back.get_tensordict("n").names() == td.get_tensordict("n").names());
}

namespace {
// `blob` (to_bytes' layout) with its storage replaced by `storage` and its metadata by `text`.
std::string with_storage_and_meta(const std::string& storage, const std::string& text) {
  const int64_t m = static_cast<int64_t>(text.size());
  std::string blob = storage + text + std::string(8, '\0');
  std::memcpy(&blob[blob.size() - 8], &m, 8);
  return blob;
}
std::string storage_of(const std::string& blob) {
  int64_t m = 0;
  std::memcpy(&m, blob.data() + blob.size() - 8, 8);
  return blob.substr(0, blob.size() - 8 - static_cast<size_t>(m));
}
std::string replaced(std::string text, const std::string& from, const std::string& to) {
  const size_t at = text.find(from);
  REQUIRE(at != std::string::npos);
  return text.replace(at, from.size(), to);
}
}  // namespace

TEST_CASE("a key naming two entries of one level raises StorageError naming it", "[consolidate][errors]") {
  // At the root and in a nested level: a leaf and a nested level under one key.
  TensorDict td({{"x", at::ones({2})}, {"n", {{"y", at::zeros({2})}, {"m", {{"z", at::ones({2})}}}}}}, {2});
  const std::string good = to_bytes(td);
  const std::string text = metadata_of(good).dump();
  const std::string storage = storage_of(good);
  REQUIRE_THROWS_WITH(from_bytes(with_storage_and_meta(storage, replaced(text, R"("n":{)", R"("x":{)"))),
                      Catch::Contains("malformed consolidated metadata: the key 'x' names two entries of one level"));
  REQUIRE_THROWS_WITH(from_bytes(with_storage_and_meta(storage, replaced(text, R"("m":{)", R"("y":{)"))),
                      Catch::Contains("the key 'y' names two entries of one level"));
  CHECK(from_bytes(with_storage_and_meta(storage, text)).num_keys() == 2);
}

TEST_CASE("leaves aligned to their element, not to 8 bytes, load (Python's layout for one dtype)",
          "[consolidate][interop]") {
  // Python v0.14 pads leaves to 8 bytes only when dtypes differ: two float32 leaves of 3 elements
  // sit at bytes 0 and 12. Ours pads: the same metadata with b moved to 12 and no padding.
  const at::Tensor a = at::arange(3, at::kFloat), b = at::arange(3, 6, at::kFloat);
  const std::string good = to_bytes(TensorDict({{"a", a}, {"b", b}}, {}));
  const json::Value meta = metadata_of(good);
  const std::string a_spec = meta.find("leaves")->find("a")->dump(), b_spec = meta.find("leaves")->find("b")->dump();
  REQUIRE(b_spec == R"(["torch.float32",[3],16,32,4])");
  std::string text = replaced(meta.dump(), a_spec, R"(["torch.float32",[3],0,12,0])");
  text = replaced(text, b_spec, R"(["torch.float32",[3],12,24,0])");
  std::string storage(24, '\0');
  std::memcpy(&storage[0], a.data_ptr(), 12);
  std::memcpy(&storage[12], b.data_ptr(), 12);
  TensorDict back = from_bytes(with_storage_and_meta(storage, text));
  CHECK(at::equal(back.get("a"), a));
  CHECK(at::equal(back.get("b"), b));
  CHECK(at::equal((from_bytes(with_storage_and_meta(storage, text)) * 2).get("b"), b * 2));
  // A leaf off its element's alignment is still refused.
  REQUIRE_THROWS_AS(from_bytes(with_storage_and_meta(storage, replaced(text, R"([3],12,24,0])", R"([3],10,22,0])"))),
                    StorageError);
}

TEST_CASE("what consolidate cannot store raises naming the key path", "[consolidate][errors]") {
  // A dtype with no stored form, two levels down.
  TensorDict quantized({{"n", {{"m", {{"q", at::quantize_per_tensor(at::ones({2}), 0.1, 0, at::kQInt8)}}}}}}, {2});
  REQUIRE_THROWS_AS(consolidate(quantized), NotImplementedError);
  REQUIRE_THROWS_WITH(consolidate(quantized), Catch::Contains("the dtype torch.qint8 of ('n', 'm', 'q') cannot be stored"));
  // A non-tensor stack (one value per row) in a nested level.
  TensorDict stacked({{"n", {{"x", at::ones({2})}}}}, {2});
  const NonTensorData rows =
      NonTensorData::stack({NonTensorData(json::Value("a")), NonTensorData(json::Value("b"))}, 0, {});
  REQUIRE(rows.is_stack());
  stacked.set(NestedKey({"n", "s"}), EntryInit(rows));
  REQUIRE_THROWS_AS(consolidate(stacked), NotImplementedError);
  REQUIRE_THROWS_WITH(consolidate(stacked), Catch::Contains("the non-tensor stack at ('n', 's') is not supported"));
  // A nested level named as a field of a level's metadata.
  TensorDict clash({{"n", {{"leaves", {{"x", at::ones({2})}}}}}}, {2});
  REQUIRE_THROWS_AS(consolidate(clash), ValueError);
  REQUIRE_THROWS_WITH(consolidate(clash), Catch::Contains("the sub-tensordict key ('n', 'leaves') collides"));
}

TEST_CASE("a lazy stack's members are its children 0..n-1, in any order, each number once", "[consolidate][lazy][errors]") {
  // Many members: each reads back at its index (the reader finds them in one pass).
  std::vector<TensorDict> members;
  for (int i = 0; i < 300; ++i) members.push_back(TensorDict({{"i", at::full({1}, i, at::kLong)}}, {}));
  const TensorDict big = LazyStackedTensorDict(members, 0);
  const TensorDict back = from_bytes(to_bytes(big));
  CHECK(at::equal(back.get("i"), at::arange(300, at::kLong).view({300, 1})));
  const TensorDict c = consolidate(big);
  CHECK(at::equal(c.get("i"), at::arange(300, at::kLong).view({300, 1})));

  TensorDict three = LazyStackedTensorDict(
      {TensorDict({{"x", at::zeros({1})}}, {}), TensorDict({{"x", at::ones({1})}}, {}),
       TensorDict({{"x", at::full({1}, 2.0f)}}, {})},
      0);
  const std::string good = to_bytes(three);
  const std::string text = metadata_of(good).dump();
  const std::string storage = storage_of(good);
  // Listed in another order, the members still read back by number.
  const json::Value meta = json::parse(text);
  json::Object reordered;
  for (const char* key : {"cls", "non_tensors", "leaves", "cls_metadata", "2", "0", "1"})
    reordered.emplace_back(key, *meta.find(key));
  const TensorDict shuffled = from_bytes(with_storage_and_meta(storage, json::Value(reordered).dump()));
  CHECK(at::equal(shuffled.get("x"), at::arange(3, at::kFloat).view({3, 1})));
  // A number written otherwise ("01", "+1", "1.0") or another key is not a member's: the member
  // it leaves missing is named.
  for (const char* other : {"01", "+1", "1.0", "one", ""}) {
    INFO(other);
    REQUIRE_THROWS_AS(from_bytes(with_storage_and_meta(storage, replaced(text, R"("1":{)", "\"" + std::string(other) + "\":{"))),
                      StorageError);
    REQUIRE_THROWS_WITH(from_bytes(with_storage_and_meta(storage, replaced(text, R"("1":{)", "\"" + std::string(other) + "\":{"))),
                        Catch::Contains("has 3 children but no member \"1\""));
  }
  // A number past the last member's.
  REQUIRE_THROWS_WITH(from_bytes(with_storage_and_meta(storage, replaced(text, R"("2":{)", R"("3":{)"))),
                      Catch::Contains("has 3 children but no member \"2\""));
}
