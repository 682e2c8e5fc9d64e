// Writing: what memmap writes is checked by an independent reader (check_written.py, json +
// numpy), and the memmap operations and options behave as Python tensordict's.

#include "support/catch_torch.h"

#include <fstream>

// support.h (ATen) before Catch: c10/util/logging defines its own CHECK macro, which must
// not replace Catch's.
#include "backends/memmap/support.h"
#include "support/dim_names_string.h"

using namespace tensordict;
using namespace memmap_test;

namespace {

json::Value int_list(c10::IntArrayRef v) {
  json::Array a;
  for (int64_t x : v) a.emplace_back(x);
  return json::Value(std::move(a));
}

json::Value flat_values(const at::Tensor& t) {
  json::Array out;
  at::Tensor c = t.contiguous();
  if (at::isComplexType(t.scalar_type())) {
    at::Tensor parts = t.scalar_type() == at::kComplexHalf ? c.view(at::kHalf).to(at::kDouble).flatten()
                                                           : at::view_as_real(c).to(at::kDouble).flatten();
    for (int64_t i = 0; i < parts.numel(); ++i) out.emplace_back(parts[i].item<double>());
  } else if (at::isFloatingType(t.scalar_type())) {
    at::Tensor d = c.to(at::kDouble).flatten();
    for (int64_t i = 0; i < d.numel(); ++i) out.emplace_back(d[i].item<double>());
  } else {
    at::Tensor d = c.to(at::kLong).flatten();
    for (int64_t i = 0; i < d.numel(); ++i) out.emplace_back(d[i].item<int64_t>());
  }
  return json::Value(std::move(out));
}

// The tree check_written.py prints, computed from the C++ tensordict.
json::Value canonical(const TensorDict& td) {
  json::Array leaves, colls;
  td.impl()->for_each([&](const std::string& key, const Entry& e) {
    if (e.is_tensor()) {
      const at::Tensor& t = e.tensor();
      leaves.emplace_back(json::Array{json::Value(key), json::Value(json::Object{
          {"kind", "tensor"}, {"dtype", torch_dtype_name(t.scalar_type())}, {"shape", int_list(t.sizes())},
          {"values", flat_values(t)}})});
    } else if (e.is_tensordict()) {
      colls.emplace_back(json::Array{json::Value(key), canonical(e.tensordict())});
    } else {
      const NonTensorData& d = e.non_tensor();
      colls.emplace_back(json::Array{json::Value(key), json::Value(json::Object{
          {"kind", d.is_stack() ? "stack" : "non_tensor"}, {"data", d.tolist()}})});
    }
  });
  for (auto& c : colls) leaves.push_back(std::move(c));
  return json::Value(json::Object{{"kind", "td"}, {"batch", int_list(td.batch_size())},
                                  {"entries", json::Value(std::move(leaves))}});
}

std::pair<int, json::Value> independent_read(const std::string& dir) {
  auto [code, out] = run("/usr/bin/python3 " + quoted(script("check_written.py")) + " " + quoted(dir) + " 2>&1");
  if (code != 0) {
    FAIL_CHECK("check_written.py: " << out);
    return {code, json::Value()};
  }
  return {code, json::parse(out, "check_written.py output")};
}

// A tensordict using every feature of the format.
TensorDict rich_tensordict() {
  TensorDict td({}, {2});
  td.set("f32", at::arange(6, at::kFloat).view({2, 3}) / 4);
  td.set("i64", at::arange(2, at::kLong) - 5);
  td.set("bf16", at::tensor({1.5f, -2.0f}).to(at::kBFloat16));
  td.set("f16", at::tensor({0.25f, 8.0f}).to(at::kHalf));
  td.set("b", at::tensor({1, 0}).to(at::kBool));
  td.set("u8", at::tensor({3, 250}, at::kByte));
  td.set("i8", at::tensor({-3, 7}, at::kChar));
  td.set("i16", at::tensor({-300, 7}, at::kShort));
  td.set("i32", at::tensor({-70000, 7}, at::kInt));
  td.set("f64", at::tensor({1e-300, -2.5}, at::kDouble));
  td.set("c64", at::complex(at::tensor({1.f, 2.f}), at::tensor({-1.f, 0.5f})));
  td.set("c128", at::complex(at::tensor({1., 2.}, at::kDouble), at::tensor({3., 4.}, at::kDouble)));
  td.set("expanded", at::arange(3, at::kFloat).expand({2, 3}));  // written in full
  td.set("transposed", at::arange(6, at::kInt).view({3, 2}).t());
  td.set("empty", at::empty({2, 0}, at::kFloat));
  td.set({"nested", "x"}, at::ones({2, 4}));
  td.set({"nested", "deeper", "y"}, at::zeros({2}, at::kLong));
  td.set_non_tensor("text", json::Value("h\xc3\xa9llo \"q\" \\ \n"));
  td.set_non_tensor({"nested", "cfg"}, json::parse(R"({"lr": 0.1, "l": [1, null, true]})"));
  td.set("stack", NonTensorData::from_list(json::parse(R"(["a", "b"])"), {2}));
  td.set("a/b", at::ones({2}));
  td.set("../escape", at::ones({2}));
  td.set("", at::ones({2}));
  td.set("..", at::ones({2}));
  td.set({"sub dir/x", "k:y"}, at::ones({2}));
  TensorDict scalars;
  scalars.set("s", at::scalar_tensor(3.5));
  td.set("scalars", scalars.expand({2}).clone());
  return td;
}

}  // namespace

TEST_CASE("an independent reader reads exactly what memmap wrote, as Python tensordict would",
          "[memmap][write][interop]") {
  TempDir dir;
  TensorDict td = rich_tensordict();
  TensorDict mm = memmap(td, dir / "td");
  auto [code, tree] = independent_read(dir / "td");
  REQUIRE(code == 0);
  // Leaves first, then collections: the reader's (Python's) load order matches ours.
  CHECK(tree == canonical(load_memmap(dir / "td")));
  CHECK(tree == canonical(mm));
  // The reader's values equal the source's.
  TensorDict reloaded = load_memmap(dir / "td");
  for (auto& [key, entry] : td.items(true, true)) {
    INFO(key.repr());
    CHECK(at::equal(reloaded.get(key), entry.tensor().contiguous()));
  }
}

TEST_CASE("a 0-dim tensordict and a stored scalar round-trip", "[memmap][write]") {
  TempDir dir;
  TensorDict td({{"s", at::scalar_tensor(2.5)}, {"n", at::scalar_tensor(7, at::kLong)}});
  memmap(td, dir / "s");
  auto [code, tree] = independent_read(dir / "s");
  REQUIRE(code == 0);
  CHECK(tree == canonical(td));
  TensorDict back = load_memmap(dir / "s");
  CHECK(back.get("s").dim() == 0);
  CHECK(back.get("n").item<int64_t>() == 7);
}

TEST_CASE("memmap locks - set of a new key fails, set_ and index_put_ write through to the files",
          "[memmap][write]") {
  TempDir dir;
  TensorDict td({{"x", at::zeros({4, 2})}, {"n", {{"y", at::zeros({4}, at::kLong)}}}}, {4});
  TensorDict mm = memmap(td, dir / "td");
  CHECK(mm.is_memmap());
  CHECK(mm.is_locked());
  CHECK(mm.device() == at::Device(at::kCPU));
  REQUIRE_THROWS_AS(mm.set("new", at::zeros({4})), LockedError);
  REQUIRE_THROWS_WITH(mm.set({"n", "new"}, at::zeros({4})), Catch::Contains("Cannot modify locked TensorDict"));
  mm.set_("x", at::ones({4, 2}));
  mm.index_put_({at::indexing::Slice(0, 2)}, TensorDict({{"n", {{"y", at::full({2}, 9, at::kLong)}}}}, {2}));
  TensorDict back = load_memmap(dir / "td");
  CHECK(at::equal(back.get("x"), at::ones({4, 2})));
  CHECK(at::equal(back.get({"n", "y"}), at::tensor({9, 9, 0, 0}, at::kLong)));
  // The source is untouched by memmap().
  CHECK(at::equal(td.get("x"), at::zeros({4, 2})));
  CHECK_FALSE(td.is_locked());
}

TEST_CASE("per-row strings written into a memmapped buffer are on disk in v0.14's NonTensorStack layout",
          "[memmap][write][interop][non_tensor]") {
  TempDir dir;
  TensorDict td({{"x", at::zeros({4})}, {"obs", {{"info", "none"}}}}, {4});
  td.set_non_tensor("info", json::Value("none"));
  TensorDict mm = memmap(td, dir / "buf");
  mm.index_put_({at::tensor({2, 0}, at::kLong)},
                TensorDict({{"info", NonTensorData::from_list(json::parse(R"(["two", "zero"])"), {2})},
                            {"obs", {{"info", "o"}}},
                            {"x", at::ones({2})}},
                           {2}));
  // Python's loader (the independent reader) sees the stacks, with the exact compact meta.json.
  auto [code, tree] = independent_read(dir / "buf");
  REQUIRE(code == 0);
  TensorDict back = load_memmap(dir / "buf");
  CHECK(tree == canonical(back));
  CHECK(back.get_non_tensor("info").tolist().python_str() == "['zero', 'none', 'two', 'none']");
  CHECK(back.get_non_tensor({"obs", "info"}).tolist().python_str() == "['o', 'none', 'o', 'none']");
  CHECK(at::equal(back.get("x"), at::tensor({1.f, 0.f, 1.f, 0.f})));
  CHECK(read_file(dir / "buf/info/meta.json") ==
        R"({"_type":"<class 'tensordict.tensorclass.NonTensorStack'>","stack_dim":0,"device":null,)"
        R"("data":["zero","none","two","none"]})");
  CHECK(read_file(dir / "buf/meta.json").find(R"("info": {"type": "NonTensorStack"})") != std::string::npos);
  // The whole range written with one value: stored as one NonTensorData again.
  mm.index_put_({at::indexing::Slice()}, TensorDict({{"info", "same"}}, {4}));
  CHECK(independent_read(dir / "buf").first == 0);
  CHECK(load_memmap(dir / "buf").get_non_tensor("info").value() == json::Value("same"));
  CHECK(read_file(dir / "buf/meta.json").find(R"("info": {"type": "NonTensorData"})") != std::string::npos);
  // A copy-on-write mapping keeps the change in memory and leaves the directory alone.
  LoadMemmapOptions private_map;
  private_map.writable = false;
  TensorDict cow = load_memmap(dir / "buf", private_map);
  cow.index_put_({1}, TensorDict({{"info", "mine"}}));
  CHECK(cow.get_non_tensor("info").tolist().python_str() == "['same', 'mine', 'same', 'same']");
  CHECK(load_memmap(dir / "buf").get_non_tensor("info").value() == json::Value("same"));
}

TEST_CASE("update_ on a memmapped tensordict writes through to the files and refuses unknown keys",
          "[memmap][write]") {
  TempDir dir;
  TensorDict td({{"x", at::zeros({3})}, {"n", {{"y", at::zeros({3, 2})}}}}, {3});
  TensorDict mm = memmap(td, dir / "td");
  mm.update_(TensorDict({{"x", at::full({3}, 2.0)}, {"n", {{"y", at::ones({3, 2})}}}}, {3}));
  TensorDict back = load_memmap(dir / "td");
  CHECK(at::equal(back.get("x"), at::full({3}, 2.0)));
  CHECK(at::equal(back.get({"n", "y"}), at::ones({3, 2})));
  REQUIRE_THROWS_AS(mm.update_(TensorDict({{"zz", at::zeros({3})}}, {3})), KeyError);
  CHECK(at::equal(load_memmap(dir / "td").get("x"), at::full({3}, 2.0)));  // nothing written
}

TEST_CASE("memmap_ replaces the leaves in place by file mappings", "[memmap][write]") {
  TempDir dir;
  TensorDict td({{"x", at::arange(4, at::kFloat)}, {"n", {{"y", at::arange(4, at::kLong)}}}}, {4});
  TensorDict other_handle = td;
  memmap_(td, dir / "td");
  CHECK(td.is_memmap());
  CHECK(td.is_locked());
  CHECK(other_handle.is_locked());
  CHECK(MemoryMappedTensor::filename_of(td.get("x")).value() == dir / "td/x.memmap");
  CHECK(MemoryMappedTensor::filename_of(other_handle.get({"n", "y"})).value() == dir / "td/n/y.memmap");
  other_handle.get("x").fill_(5);
  CHECK(at::equal(load_memmap(dir / "td").get("x"), at::full({4}, 5.f)));
  // memmap_ again at the same place, when told to overwrite, reuses the files (no copy).
  MemmapOptions again;
  again.overwrite = true;
  memmap_(td, dir / "td", again);
  CHECK(at::equal(td.get("x"), at::full({4}, 5.f)));
}

TEST_CASE("memmap and memmap_like refuse a directory that holds a tensordict unless told to overwrite",
          "[memmap][write][errors]") {
  TempDir dir;
  TensorDict td({{"x", at::arange(3, at::kFloat)}}, {3});
  memmap(td, dir / "buf");
  // The data a user filled must not be zero-filled by a second memmap_like.
  REQUIRE_THROWS_AS(memmap_like(td, dir / "buf"), StorageError);
  REQUIRE_THROWS_WITH(memmap_like(td, dir / "buf"),
                      Catch::Contains("already holds a tensordict") && Catch::Contains("overwrite"));
  REQUIRE_THROWS_AS(memmap(td, dir / "buf"), StorageError);
  TensorDict same = td;
  REQUIRE_THROWS_AS(memmap_(same, dir / "buf"), StorageError);
  CHECK_FALSE(same.is_memmap());
  CHECK(at::equal(load_memmap(dir / "buf").get("x"), at::arange(3, at::kFloat)));
  MemmapOptions overwrite;
  overwrite.overwrite = true;
  memmap_like(td, dir / "buf", overwrite);
  CHECK(at::equal(load_memmap(dir / "buf").get("x"), at::zeros({3})));
}

TEST_CASE("memmap_like writes the tree with zero-filled files and copies non-tensor data", "[memmap][write]") {
  TempDir dir;
  TensorDict td({{"x", at::ones({3, 2})}, {"n", {{"y", at::ones({3}, at::kInt)}}}}, {3});
  td.set_non_tensor("t", json::Value("keep"));
  TensorDict like = memmap_like(td, dir / "like");
  CHECK(at::equal(like.get("x"), at::zeros({3, 2})));
  TensorDict back = load_memmap(dir / "like");
  CHECK(at::equal(back.get({"n", "y"}), at::zeros({3}, at::kInt)));
  CHECK(back.get_non_tensor("t").value() == json::Value("keep"));
  CHECK(std::filesystem::file_size(dir / "like/x.memmap") == 24);
}

TEST_CASE("existsok=false refuses an existing leaf file", "[memmap][write][errors]") {
  TempDir dir;
  TensorDict td({{"x", at::ones({2})}}, {2});
  memmap(td, dir / "td");
  MemmapOptions opts;
  opts.existsok = false;
  opts.overwrite = true;  // past the directory check, to the per-file one
  REQUIRE_THROWS_AS(memmap(td, dir / "td", opts), StorageError);
  REQUIRE_THROWS_WITH(memmap(td, dir / "td", opts), Catch::Contains("already exists") && Catch::Contains("x.memmap"));
}

TEST_CASE("copy_existing: a leaf mapped from another file is copied only on request", "[memmap][write]") {
  TempDir dir;
  TensorDict mm = memmap(TensorDict({{"x", at::arange(3, at::kFloat)}}, {3}), dir / "a");
  REQUIRE_THROWS_AS(memmap(mm, dir / "b"), StorageError);
  REQUIRE_THROWS_WITH(memmap(mm, dir / "b"), Catch::Contains("already has a file associated"));
  MemmapOptions opts;
  opts.copy_existing = true;
  TensorDict copy = memmap(mm, dir / "b", opts);
  CHECK(MemoryMappedTensor::filename_of(copy.get("x")).value() == dir / "b/x.memmap");
  CHECK(at::equal(load_memmap(dir / "b").get("x"), at::arange(3, at::kFloat)));
}

namespace {
// Installs a progress callback in `options` that checks the byte count only grows and keeps the
// last call's figures.
struct ProgressLog {
  explicit ProgressLog(MemmapOptions& options) {
    options.progress = [this](int64_t done, int64_t all) {
      CHECK(done > last);
      last = done;
      total = all;
    };
  }
  int64_t last = 0, total = 0;
};
}  // namespace

TEST_CASE("num_threads writes the same files as a sequential write", "[memmap][write]") {
  TempDir dir;
  TensorDict td = rich_tensordict();
  memmap(td, dir / "seq");
  MemmapOptions opts;
  opts.num_threads = 4;
  ProgressLog progress(opts);
  memmap(td, dir / "par", opts);
  CHECK(progress.last == progress.total);
  CHECK(progress.total > 0);
  CHECK(independent_read(dir / "seq").second == independent_read(dir / "par").second);
}

TEST_CASE("leaves larger than a part are written in parts by several threads, byte for byte", "[memmap][write]") {
  TempDir dir;
  // 8 MiB parts: 'big' is 2 parts and a remainder, 'exact' exactly 2 parts; 'small' one task.
  TensorDict td({{"big", at::randn({(size_t{20} << 20) / 4 + 3})},
                 {"exact", at::arange((int64_t{16} << 20) / 8, at::kLong)},
                 {"small", at::randn({5})}},
                {});
  td.set({"nested", "t"}, at::randn({3, (int64_t{9} << 20) / 12}).t());  // not contiguous
  MemmapOptions parallel;
  parallel.num_threads = 3;
  ProgressLog progress(parallel);
  TensorDict mm = memmap(td, dir / "par", parallel);
  CHECK(progress.last == progress.total);
  MemmapOptions sequential;
  sequential.num_threads = 1;
  memmap(td, dir / "seq", sequential);
  for (const char* file : {"big.memmap", "exact.memmap", "small.memmap", "nested/t.memmap", "meta.json",
                           "nested/meta.json"}) {
    INFO(file);
    CHECK(read_file(dir / (std::string("par/") + file)) == read_file(dir / (std::string("seq/") + file)));
  }
  TensorDict back = load_memmap(dir / "par");
  for (const auto& key : td.keys(true, true)) CHECK(at::equal(back.get(key), td.get(key)));
  CHECK(std::filesystem::file_size(dir / "par/big.memmap") == (size_t{20} << 20) + 12);
  // Overwriting a longer file in parts leaves it exactly the new length.
  MemmapOptions again = parallel;
  again.overwrite = true;
  again.progress = nullptr;
  TensorDict shorter({{"big", at::ones({(size_t{17} << 20) / 4})}}, {});
  memmap(shorter, dir / "par", again);
  CHECK(std::filesystem::file_size(dir / "par/big.memmap") == (size_t{17} << 20));
  CHECK(at::equal(load_memmap(dir / "par").get("big"), shorter.get("big")));
}

TEST_CASE("memmap_refresh_ picks up entries another writer added", "[memmap][write]") {
  TempDir dir;
  TensorDict mm = memmap(TensorDict({{"x", at::ones({2})}}, {2}), dir / "td");
  MemmapOptions overwrite;
  overwrite.overwrite = true;
  memmap(TensorDict({{"x", at::ones({2})}, {"y", at::full({2}, 3.f)}}, {2}), dir / "td", overwrite);
  CHECK_FALSE(mm.contains("y"));
  memmap_refresh_(mm);
  CHECK(at::equal(mm.get("y"), at::full({2}, 3.f)));
  CHECK(mm.is_locked());
  TensorDict plain;
  REQUIRE_THROWS_AS(memmap_refresh_(plain), ValueError);
}

TEST_CASE("save and load are memmap and load_memmap", "[memmap][write]") {
  TempDir dir;
  save(TensorDict({{"x", at::ones({2})}}, {2}), dir / "td");
  CHECK(at::equal(load(dir / "td").get("x"), at::ones({2})));
}

TEST_CASE("load_memmap with a device moves the leaves after mapping", "[memmap][read]") {
  TempDir dir;
  save(TensorDict({{"x", at::ones({2})}}, {2}), dir / "td");
  LoadMemmapOptions opts;
  opts.device = at::Device(at::kMeta);
  TensorDict td = load_memmap(dir / "td", opts);
  CHECK(td.get("x").device().type() == at::kMeta);
}

TEST_CASE("dropping a memmapped tensordict unmaps its files, nested levels included", "[memmap][write]") {
  TempDir dir;
  auto mapped = [&](const std::string& file) {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    while (std::getline(maps, line)) {
      if (line.find(file) != std::string::npos) return true;
    }
    return false;
  };
  {
    TensorDict mm = memmap(TensorDict({{"a", {{"b", {{"x", at::ones({2, 1024})}}}}}}, {2}), dir / "td");
    CHECK(mapped(dir / "td/a/b/x.memmap"));
    TensorDict back = load_memmap(dir / "td");
    CHECK(at::equal(back.get({"a", "b", "x"}), at::ones({2, 1024})));
  }
  CHECK_FALSE(mapped(dir / "td/a/b/x.memmap"));
}

TEST_CASE("batch-dim names are stored in meta.json where Python v0.14's loader skips them", "[memmap][write][names]") {
  TempDir dir;
  TensorDict td({{"a", at::zeros({2, 3})}, {"n", {{"x", at::ones({2, 3, 4})}}}}, {2, 3}, std::nullopt,
                {"env", std::nullopt});
  td.get_tensordict("n").set_batch_size({2, 3, 4});
  td.get_tensordict("n").set_names({"env", std::nullopt, "feature"});
  TensorDict mm = memmap(td, dir / "td");
  CHECK(mm.names() == td.names());
  // A list, not an object: v0.14 skips every meta.json value that is not a dict.
  CHECK(read_file(dir / "td/meta.json").find(R"("_type": "<class 'tensordict._td.TensorDict'>", "names": ["env", null]})") !=
        std::string::npos);
  auto [code, tree] = independent_read(dir / "td");
  REQUIRE(code == 0);
  CHECK(tree == canonical(td));
  TensorDict back = load_memmap(dir / "td");
  CHECK(back.names() == DimNames{"env", std::nullopt});
  CHECK(back.get_tensordict("n").names() == DimNames{"env", std::nullopt, "feature"});
  // A leaf named "names" wins: the names are then not stored.
  TensorDict clash({{"names", at::zeros({2})}}, {2}, std::nullopt, {"env"});
  CHECK(load_memmap(memmap_path(memmap(clash, dir / "clash"))).names() == DimNames{std::nullopt});
  // A malformed list is a StorageError naming the file.
  std::ofstream(dir / "td/meta.json") << R"({"shape": [2, 3], "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>", "names": ["a"]})";
  CHECK_THROWS_AS(load_memmap(dir / "td"), StorageError);
  CHECK_THROWS_WITH(load_memmap(dir / "td"), Catch::Contains("meta.json") && Catch::Contains("\"names\" has 1 names for 2 batch dims"));
}
