// PersistentTensorDict (issue 14): HDF5 files as a live backend, checked against h5py (Debian's
// python3-h5py) and h5dump in both directions.

#include "support/catch_torch.h"

#include <fstream>

#include <ATen/ATen.h>
#include <hdf5.h>

#include <tensordict/backends/persistent.h>
#include <tensordict/json.h>

#include "backends/hdf5/h5py_support.h"

using namespace tensordict;
using h5_test::h5py_read;
using h5_test::h5py_write;
using memmap_test::quoted;
using memmap_test::run;
using memmap_test::TempDir;
using at::indexing::None;
using at::indexing::Slice;

namespace {

// at::tensor has no bool overload in LibTorch 1.13.
at::Tensor bools(std::initializer_list<int> values) {
  return at::tensor(std::vector<int64_t>(values.begin(), values.end())).to(at::kBool);
}

TensorDict sample() {
  TensorDict td({{"obs", at::arange(24, at::kFloat).view({4, 6})},
                 {"done", bools({1, 0, 0, 1})},
                 {"n", {{"a", at::arange(4 * 3 * 2, at::kLong).view({4, 3, 2})}, {"h", at::ones({4, 3}, at::kHalf)}}}},
                {4});
  td.get_tensordict("n").set_batch_size({4, 3});
  td.set_non_tensor("name", json::Value("run 1"));
  return td;
}

}  // namespace

TEST_CASE("to_h5 and from_h5 round-trip every dtype, nesting, batch sizes and non-tensors", "[h5]") {
  TempDir dir;
  TensorDict td = sample();
  td.set("i8", at::arange(4, at::kChar));
  td.set("u8", at::arange(4, at::kByte));
  td.set("i16", at::arange(4, at::kShort));
  td.set("i32", at::arange(4, at::kInt));
  td.set("f64", at::randn({4, 2}, at::kDouble));
  td.set("bf", at::randn({4}).to(at::kBFloat16));
  td.set("c64", at::randn({4}, at::kComplexFloat));
  td.set("c128", at::randn({4, 1}, at::kComplexDouble));
  td.set("scalar_row", at::randn({4}));
  td.set_non_tensor("count", json::Value(int64_t{3}));
  td.set_non_tensor("scale", json::Value(0.25));
  td.set_non_tensor("flag", json::Value(true));
  td.set_non_tensor("meta", json::parse(R"({"a": [1, 2], "b": null})"));

  PersistentTensorDict::to_h5(td, dir / "all.h5").close();
  PersistentTensorDict back = PersistentTensorDict::from_h5(dir / "all.h5");
  CHECK(back.mode() == "r");
  CHECK((back.batch_size() == c10::IntArrayRef{4}));
  CHECK((back.get_tensordict("n").batch_size() == c10::IntArrayRef{4, 3}));  // stored, not re-inferred
  for (auto& [key, entry] : td.items(true, true)) {
    INFO(key.repr());
    if (!entry.is_tensor()) continue;
    at::Tensor got = back.get(key);
    CHECK(got.scalar_type() == entry.tensor().scalar_type());
    CHECK(at::equal(got, entry.tensor()));
  }
  CHECK(back.get_non_tensor("name").value() == json::Value("run 1"));  // a string, not bytes
  CHECK(back.get_non_tensor("count").value() == json::Value(int64_t{3}));
  CHECK(back.get_non_tensor("scale").value() == json::Value(0.25));
  CHECK(back.get_non_tensor("flag").value() == json::Value(true));
  CHECK(back.get_non_tensor("meta").value() == json::parse(R"({"a": [1, 2], "b": null})"));
  // Groups C++ creates track link creation order: keys come back in the order they were set.
  CHECK(back.keys() == td.keys());
}

TEST_CASE("h5py reads what C++ writes, value for value, with h5py's types", "[h5][interop]") {
  TempDir dir;
  TensorDict td = sample();
  td.set("c64", at::tensor({1.0, 2.0}).view({1, 2}).expand({4, 2}).contiguous().to(at::kComplexFloat) * c10::complex<float>(1, 2));
  td.set("bf", at::tensor({1.5, -2.0, 0.25, 8.0}).to(at::kBFloat16));
  H5Options options;
  options.gzip_level = 4;
  PersistentTensorDict::to_h5(td, dir / "cpp.h5", options).close();
  json::Value seen = h5py_read(dir / "cpp.h5");
  auto ds = [&](const char* name) -> const json::Value& {
    const json::Value* v = seen.find(name);
    INFO(name);
    REQUIRE(v != nullptr);
    return *v;
  };
  CHECK(ds("obs").find("dtype")->as_string() == "float32");
  REQUIRE(ds("obs").find("value")->as_array().size() == 24);
  CHECK(ds("obs").find("value")->as_array()[23].as_double() == 23.0);
  CHECK(ds("done").find("dtype")->as_string() == "bool");
  CHECK(ds("done").find("value")->dump() == "[true,false,false,true]");
  CHECK(ds("n/h").find("dtype")->as_string() == "float16");
  CHECK(ds("n/a").find("shape")->dump() == "[4,3,2]");
  CHECK(ds("c64").find("dtype")->as_string() == "complex64");
  CHECK(ds("c64").find("value")->as_array()[1].dump() == "[2.0,4.0]");
  // bfloat16: h5py sees the uint16 bits and the attribute naming the dtype.
  CHECK(ds("bf").find("dtype")->as_string() == "uint16");
  CHECK(ds("bf").find("attrs")->find("tensordict_dtype")->as_string() == "torch.bfloat16");
  CHECK(ds("name").find("value")->as_string() == "run 1");
  // Compression on every dataset but scalars and strings (where h5py refuses filters).
  CHECK(ds("obs").find("compression")->as_string() == "gzip");
  CHECK(ds("n/a").find("compression")->as_string() == "gzip");
  CHECK(ds("name").find("compression")->is_null());
  // Batch sizes and devices are group attributes (Python ignores them).
  CHECK(ds("/").find("attrs")->find("tensordict_batch_size")->as_string() == "[4]");
  CHECK(ds("n").find("attrs")->find("tensordict_batch_size")->as_string() == "[4 3]");  // numpy int64 arrays

  auto [code, dump] = run("h5dump -H " + quoted(dir / "cpp.h5"));
  REQUIRE(code == 0);
  CHECK_THAT(dump, Catch::Contains("GROUP \"n\"") && Catch::Contains("DATASET \"obs\"") &&
                       Catch::Contains("\"FALSE\"            0;") && Catch::Contains("H5T_IEEE_F32LE \"r\";") &&
                       Catch::Contains("CSET H5T_CSET_UTF8;"));
}

TEST_CASE("files written by h5py load, every value checked", "[h5][interop]") {
  TempDir dir;
  h5py_write("mixed", dir / "py.h5");
  PersistentTensorDict td = PersistentTensorDict::from_h5(dir / "py.h5");
  CHECK((td.batch_size() == c10::IntArrayRef{2}));  // Python's inference: common leading dims
  CHECK(td.keys().front() == NestedKey("b"));       // h5py's groups: keys by name, as Python lists them
  CHECK(td.keys().back() == NestedKey("u8"));
  CHECK(at::equal(td.get("b"), bools({1, 0, 1, 0, 0, 1}).view({2, 3})));
  CHECK(at::equal(td.get("i8"), at::arange(6, at::kChar).view({2, 3})));
  CHECK(at::equal(td.get("i64"), at::arange(2, at::kLong) * int64_t{1000000000000}));
  CHECK(at::equal(td.get("u8"), at::tensor({1, 2, 255, 0, 7, 9}, at::kByte).view({2, 3})));
  CHECK(at::equal(td.get("f16"), at::tensor({0.5, -2.0}).to(at::kHalf)));
  CHECK(at::allclose(td.get("f64"), at::linspace(0, 1, 6, at::kDouble).view({2, 3})));
  CHECK(at::equal(td.get("c64"), at::complex(at::arange(2, at::kFloat), at::arange(2, 4, at::kFloat))));
  CHECK(at::equal(td.get("cube"), at::arange(24, at::kFloat).view({2, 3, 4})));
  CHECK(at::equal(td.get("gz"), at::arange(200, at::kInt).view({2, 100})));
  CHECK(td.get_non_tensor("s").value() == json::Value("a string!"));
  CHECK(td.get_non_tensor("oi").value() == json::Value(int64_t{7}));
  CHECK(td.get_non_tensor("of").value() == json::Value(2.5));
  CHECK(td.get_non_tensor("ob").value() == json::Value(true));
  CHECK(at::equal(td.get({"nested", "x"}), at::ones({2, 5})));
  CHECK(at::equal(td.get({"nested", "deeper", "y"}), at::full({2}, 3, at::kShort)));
  // nested/x is [2, 5] and nested/deeper/y [2]: their common prefix.
  CHECK((td.get_tensordict("nested").batch_size() == c10::IntArrayRef{2}));

  h5py_write("auto_batch", dir / "auto.h5");
  PersistentTensorDict ab = PersistentTensorDict::from_h5(dir / "auto.h5");
  CHECK((ab.batch_size() == c10::IntArrayRef{3, 4}));
  CHECK((ab.get_tensordict("b").batch_size() == c10::IntArrayRef{3, 4, 5}));
  // An explicit batch size: checked against every dataset, inherited by the groups.
  PersistentTensorDict given = PersistentTensorDict::from_h5(dir / "auto.h5", "r", std::vector<int64_t>{3});
  CHECK((given.get_tensordict("b").batch_size() == c10::IntArrayRef{3}));
  REQUIRE_THROWS_WITH(PersistentTensorDict::from_h5(dir / "auto.h5", "r", std::vector<int64_t>{3, 5}),
                      Catch::Contains("batch size and array size mismatch") && Catch::Contains("auto.h5"));
}

TEST_CASE("indexed views read only the selection, for every index kind", "[h5][index]") {
  TempDir dir;
  TensorDict td = sample();
  PersistentTensorDict f = PersistentTensorDict::to_h5(td, dir / "idx.h5");
  const at::Tensor unsorted = at::tensor({3, 0, 3, 1}, at::kLong);
  const at::Tensor mask = bools({1, 0, 1, 1});
  using Index = std::vector<at::indexing::TensorIndex>;
  // Over the root (batch [4]) and over the nested level (batch [4, 3]).
  std::vector<std::pair<std::string, Index>> cases = {
      {"", {0}}, {"", {-1}}, {"", {Slice(1, 3)}}, {"", {Slice(None, None, 2)}}, {"", {unsorted}}, {"", {mask}},
      {"", {None, Slice(0, 2)}}, {"", {at::tensor({2}, at::kLong)}}, {"", {Slice(2, 2)}}, {"", {true}},
      {"n", {Slice(), 1}}, {"n", {unsorted, Slice(0, 3, 2)}}, {"n", {2, at::tensor({2, 0, 2}, at::kLong)}},
      {"n", {Slice(1, 3), bools({0, 1, 1})}}, {"n", {at::indexing::Ellipsis, 0}}};
  for (const auto& [level, idx] : cases) {
    TensorDict source = level.empty() ? TensorDict(f) : f.get_tensordict(level);
    TensorDict reference = level.empty() ? td : td.get_tensordict(level);
    TensorDict view = source.index(idx);
    TensorDict expected = reference.index(idx);
    INFO(level << " " << BatchIndex(idx, reference.batch_size()).repr());
    CHECK(PersistentTensorDict::is_persistent(view));
    CHECK(view.batch_size() == expected.batch_size());
    for (auto& [key, entry] : expected.items(true, true)) {
      INFO(key.repr());
      if (entry.is_tensor()) CHECK(at::equal(view.get(key), entry.tensor()));
    }
  }
  // Several index tensors (numpy's pairing rules) read the dataset and index it in memory.
  TensorDict pairs = f.get_tensordict("n").index({at::tensor({0, 3}, at::kLong), at::tensor({2, 1}, at::kLong)});
  CHECK(at::equal(pairs.get("a"), td.get({"n", "a"}).index({at::tensor({0, 3}, at::kLong), at::tensor({2, 1}, at::kLong)})));
}

TEST_CASE("writes go to the file: set, set_, index_put_, set_at_, in-place math, erase, rename", "[h5][write]") {
  TempDir dir;
  const std::string path = dir / "w.h5";
  {
    PersistentTensorDict f = PersistentTensorDict::to_h5(sample(), path);
    f.set("new", at::full({4, 2}, 5.0));                      // a new dataset
    f.set("obs", at::zeros({4, 1}, at::kInt));                // replaced: recreated
    f.set_("done", bools({0, 0, 1, 1}));   // in place
    f.index_put_({at::tensor({3, 1, 3})}, TensorDict({{"new", at::full({3, 2}, 7.0)}}, {3}));
    f.set_at_("new", at::full({2}, -1.0), {0});
    f.get_tensordict("n").set_at_("a", at::full({3, 2}, 9, at::kLong), {2});
    f.index({Slice(2, 4)}).set_("new", at::full({2, 2}, 1.5));
    f.apply_([](const at::Tensor& x) { return x.is_floating_point() ? x * 2 : x; });
    f.erase({"n", "h"});
    f.rename_key_("new", "renamed");
    f.set({"g", "x"}, at::ones({4, 3}));  // a new group on the fly
  }
  PersistentTensorDict back = PersistentTensorDict::from_h5(path);
  CHECK_FALSE(back.contains("new"));
  // new: 5, rows 1 and 3 put to 7, row 0 set to -1, rows 2:4 set to 1.5, then doubled.
  CHECK(at::equal(back.get("renamed"), at::tensor({-2.0F, -2.0F, 14.0F, 14.0F, 3.0F, 3.0F, 3.0F, 3.0F}).view({4, 2})));
  CHECK(at::equal(back.get("obs"), at::zeros({4, 1}, at::kInt)));
  CHECK(at::equal(back.get("done"), bools({0, 0, 1, 1})));
  CHECK(at::equal(back.get({"n", "a"}).select(0, 2), at::full({3, 2}, 9, at::kLong)));
  CHECK_FALSE(back.contains({"n", "h"}));
  CHECK(at::equal(back.get({"g", "x"}), at::ones({4, 3})));
  CHECK((back.get_tensordict("g").batch_size() == c10::IntArrayRef{4}));
}

TEST_CASE("a write that selects no row still refuses a value of another shape, naming the file", "[h5][write][errors]") {
  // Nothing is written either way, but LibTorch's `leaf[index] = value` refuses the value, and
  // so does every other backend: a file must not take it silently.
  TempDir dir;
  PersistentTensorDict f = PersistentTensorDict::to_h5(sample(), dir / "e.h5");
  TensorDict none = f.index({Slice(0, 0)});
  REQUIRE_THROWS_AS(none.set("obs", at::zeros({0, 6, 5})), ShapeError);  // a set through the view
  REQUIRE_THROWS_WITH(none.set("obs", at::zeros({0, 6, 5})), Catch::Contains("e.h5") && Catch::Contains("[0, 6]"));
  REQUIRE_THROWS_AS(f.index_put_({Slice(0, 0)}, at::zeros({5})), ShapeError);
  none.set("obs", at::zeros({0, 6}));  // a value of the selected shape writes nothing, as before
  CHECK(at::equal(f.get("obs"), sample().get("obs")));
}

TEST_CASE("a file opened read-only refuses every write, naming the file", "[h5][errors]") {
  TempDir dir;
  PersistentTensorDict::to_h5(sample(), dir / "ro.h5").close();
  PersistentTensorDict ro = PersistentTensorDict::from_h5(dir / "ro.h5", "r");
// (a macro: Catch's combined matchers point at their parts, which must outlive the check)
#define TD_READ_ONLY Catch::Contains("ro.h5") && Catch::Contains("read-only")
  REQUIRE_THROWS_WITH(ro.set("x", at::ones({4})), TD_READ_ONLY);
  REQUIRE_THROWS_WITH(ro.set_("obs", at::ones({4, 6})), TD_READ_ONLY);
  REQUIRE_THROWS_WITH(ro.index_put_({0}, 1.0), TD_READ_ONLY);
  REQUIRE_THROWS_WITH(ro.erase("obs"), TD_READ_ONLY);
  REQUIRE_THROWS_WITH(ro.rename_key_("obs", "o"), TD_READ_ONLY);
#undef TD_READ_ONLY
  CHECK(at::equal(PersistentTensorDict::from_h5(dir / "ro.h5").get("obs"), sample().get("obs")));
  // close(): later reads raise instead of touching a closed file.
  ro.close();
  CHECK_FALSE(ro.is_open());
  REQUIRE_THROWS_WITH(ro.get("obs"), Catch::Contains("closed"));
}

TEST_CASE("bad files get a typed error naming the file and the object", "[h5][errors]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(PersistentTensorDict::from_h5(dir / "missing.h5"),
                      Catch::Contains("missing.h5") && Catch::Contains("no such file"));
  dir.write("text.h5", "not an hdf5 file at all");
  REQUIRE_THROWS_AS(PersistentTensorDict::from_h5(dir / "text.h5"), StorageError);
  REQUIRE_THROWS_WITH(PersistentTensorDict::from_h5(dir / "text.h5"), Catch::Contains("not an HDF5 file"));
  // A truncated file: the first 2 KiB of a real one.
  PersistentTensorDict::to_h5(sample(), dir / "full.h5").close();
  std::string bytes = memmap_test::read_file(dir / "full.h5");
  dir.write("cut.h5", bytes.substr(0, 2048));
  REQUIRE_THROWS_AS(PersistentTensorDict::from_h5(dir / "cut.h5"), StorageError);
  h5py_write("uint16", dir / "u16.h5");
  PersistentTensorDict u = PersistentTensorDict::from_h5(dir / "u16.h5");
  REQUIRE_THROWS_WITH(u.get("u16"), Catch::Contains("u16.h5:/u16") && Catch::Contains("uint16"));
  // Stored batch sizes that datasets or groups contradict: the file opens (the root's batch is
  // read alone), and reaching the bad object raises, naming it.
  h5py_write("bad_batch", dir / "bad_batch.h5");
  PersistentTensorDict bb = PersistentTensorDict::from_h5(dir / "bad_batch.h5");
  CHECK((bb.batch_size() == c10::IntArrayRef{4}));
  CHECK((bb.get("ok").sizes() == c10::IntArrayRef{4, 2}));
  REQUIRE_THROWS_AS(bb.get("short"), ValueError);
  REQUIRE_THROWS_WITH(bb.get("short"), Catch::Contains("bad_batch.h5:/short") &&
                                           Catch::Contains("batch size and array size mismatch"));
  REQUIRE_THROWS_WITH(bb.get("g"), Catch::Contains("bad_batch.h5:/g") && Catch::Contains("does not extend"));
  // A stored batch size that is not one: refused at open, naming the file and the attribute.
  for (const char* kind : {"attr_negative", "attr_float", "attr_text"}) {
    INFO(kind);
    const std::string bad = dir / (std::string(kind) + ".h5");
    h5py_write(kind, bad);
    REQUIRE_THROWS_AS(PersistentTensorDict::from_h5(bad), StorageError);
    REQUIRE_THROWS_WITH(PersistentTensorDict::from_h5(bad),
                        Catch::Contains(std::string(kind) + ".h5:/") && Catch::Contains("tensordict_batch_size"));
  }
  REQUIRE_THROWS_AS(PersistentTensorDict::from_h5(dir / "x.h5", "q"), ValueError);
  PersistentTensorDict::to_h5(sample(), dir / "exists.h5").close();
  REQUIRE_THROWS_WITH(PersistentTensorDict::from_h5(dir / "exists.h5", "w-"), Catch::Contains("file exists"));
}

TEST_CASE("from_schema preallocates zeros without writing data", "[h5]") {
  TempDir dir;
  PersistentTensorDict::from_schema({{"obs", {{84, 84}, at::kByte}}, {{"next", "reward"}, {{}, at::kFloat}}}, {1000},
                                    dir / "schema.h5")
      .close();
  // Nothing was written: the file is far smaller than the data it describes.
  CHECK(std::filesystem::file_size(dir / "schema.h5") < 100000);
  PersistentTensorDict f = PersistentTensorDict::from_h5(dir / "schema.h5", "r+");
  CHECK((f.batch_size() == c10::IntArrayRef{1000}));
  CHECK((f.get("obs").sizes() == c10::IntArrayRef{1000, 84, 84}));
  CHECK(f.get({"next", "reward"}).sum().item<float>() == 0.0F);
  f.index_put_({5}, TensorDict({{"obs", at::ones({84, 84}, at::kByte)}}, {}));
  CHECK(f.index({5}).get("obs").sum().item<int64_t>() == 84 * 84);
  CHECK(f.index({4}).get("obs").sum().item<int64_t>() == 0);
}

namespace {
// Bytes this process has read through read(2)/pread(2) so far (/proc/self/io's rchar): HDF5's
// default driver reads with pread, so the difference around a call is what it read.
int64_t bytes_read_so_far() {
  std::ifstream io("/proc/self/io");
  std::string name;
  int64_t value = 0;
  while (io >> name >> value) {
    if (name == "rchar:") return value;
  }
  return -1;
}
}  // namespace

TEST_CASE("an indexed read reads the selected rows' bytes, not the dataset", "[h5][index][io]") {
  TempDir dir;
  const std::string path = dir / "big.h5";
  // 64 MiB: 16384 rows of 4 KiB.
  constexpr int64_t kRows = 16384, kCols = 1024, kRowBytes = kCols * 4;
  {
    TensorDict f = PersistentTensorDict::from_schema({{"obs", {{kCols}, at::kFloat}}}, {kRows}, path);
    for (int64_t r = 0; r < kRows; r += 4096) f.index({Slice(r, r + 4096)}).set_("obs", at::full({4096, kCols}, 1.0));
  }
  REQUIRE(std::filesystem::file_size(path) >= static_cast<uintmax_t>(kRows * kRowBytes));
  PersistentTensorDict f = PersistentTensorDict::from_h5(path, "r");
  REQUIRE(bytes_read_so_far() >= 0);
  auto cost = [&](const std::vector<at::indexing::TensorIndex>& idx, int64_t rows) {
    const int64_t before = bytes_read_so_far();
    at::Tensor t = f.index(idx).get("obs");
    const int64_t read = bytes_read_so_far() - before;
    CHECK(t.size(0) == rows);
    CHECK(t.sum().item<double>() == static_cast<double>(rows * kCols));
    return read;
  };
  // Rows 0..9: about 10 rows (40 KiB) plus HDF5's metadata, far from the 64 MiB.
  const int64_t slice = cost({Slice(0, 10)}, 10);
  CHECK(slice >= 10 * kRowBytes);
  CHECK(slice < 10 * kRowBytes + 64 * 1024);
  // Unsorted, repeated rows far apart: each distinct row once, read alone (a read-only file's
  // rows come straight from the file, not through HDF5's 64 KiB sieve buffer).
  const int64_t picked = cost({at::tensor({9000, 5, 9000, 16000}, at::kLong)}, 4);
  CHECK(picked >= 3 * kRowBytes);
  CHECK(picked < 3 * kRowBytes + 4096);
  // A mask selecting 3 rows.
  at::Tensor mask = at::zeros({kRows}, at::kBool);
  mask.index_put_({at::tensor({1, 100, 10000}, at::kLong)}, true);
  CHECK(cost({mask}, 3) < 3 * kRowBytes + 4096);
  // Opened for writing, the same rows go through HDF5, which reads at most its 64 KiB sieve
  // buffer per piece.
  f.close();
  f = PersistentTensorDict::from_h5(path, "r+");
  constexpr int64_t kSieve = 64 * 1024;
  CHECK(cost({at::tensor({9000, 5, 9000, 16000}, at::kLong)}, 4) <= 3 * kSieve + 4096);
}

TEST_CASE("rows of contiguous datasets are read straight from the file, other layouts and types through HDF5",
          "[h5][index][io]") {
  TempDir dir;
  const std::string path = dir / "layouts.h5";
  h5py_write("layouts", path);
  PersistentTensorDict f = PersistentTensorDict::from_h5(path, "r");
  REQUIRE((f.batch_size() == c10::IntArrayRef{6, 5}));
  const at::Tensor values = at::arange(30, at::kFloat).view({6, 5});
  const std::vector<std::pair<std::string, at::Tensor>> datasets = {
      {"contiguous", values},
      {"big_endian", values},
      {"chunked", values},
      {"compact", values},
      {"external", values},
      {"unwritten", at::zeros({6, 5})},
      {"flags", values.to(at::kLong).remainder(3).eq(0)},
      {"short", values.to(at::kShort) - 7},
      {"complex", at::complex(values, -values)}};
  using Index = std::vector<at::indexing::TensorIndex>;
  const std::vector<Index> indices = {{Slice(1, 4)},        {2},
                                      {Slice()},            {Slice(0, 6, 2)},
                                      {Slice(), Slice(1, 3)}, {2, Slice(1, 3)},
                                      {Slice(1, 3), 4},     {-1, -1},
                                      {Slice(5, 6)},        {at::tensor({4, 1, 1}, at::kLong)},
                                      {at::tensor({5, 0, 2, 3}, at::kLong)},
                                      {at::tensor({4, 1, 1}, at::kLong), Slice(1, 3)},
                                      {Slice(), at::tensor({3, 0}, at::kLong)},
                                      {2, at::tensor({4, 0, 3}, at::kLong)}};
  for (const auto& [key, expected] : datasets) {
    INFO(key);
    CHECK(at::equal(f.get(key), expected));
    for (const Index& idx : indices) {
      INFO(BatchIndex(idx, f.batch_size()).repr());
      CHECK(at::equal(f.index(idx).get(key), expected.index(idx)));
    }
  }
  // A slice of rows of a contiguous dataset reads exactly its bytes (HDF5's own read would
  // fill its sieve buffer with the whole 120-byte dataset).
  (void)f.index({Slice(1, 3)}).get("contiguous");  // the dataset's object header is cached now
  // Reading /proc/self/io counts too: what two readings in a row differ by.
  const int64_t first = bytes_read_so_far(), own = bytes_read_so_far() - first;
  const int64_t before = bytes_read_so_far();
  CHECK(at::equal(f.index({Slice(1, 3)}).get("contiguous"), values.slice(0, 1, 3)));
  CHECK(bytes_read_so_far() - before - own == 2 * 5 * 4);
}

TEST_CASE("a file some handle can write is read through HDF5, which holds the latest writes", "[h5][io][write]") {
  TempDir dir;
  const std::string path = dir / "shared.h5";
  PersistentTensorDict::to_h5(TensorDict({{"x", at::zeros({8, 4})}}, {8}), path).close();
  {
    // Other code of the process writes two rows with the HDF5 C API and keeps the dataset open:
    // HDF5 holds the small write in the dataset's sieve buffer, not yet in the file. A
    // read-only handle opened next to it shares the file and must see the write.
    const hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDWR, H5P_DEFAULT);
    REQUIRE(file >= 0);
    const hid_t ds = H5Dopen2(file, "/x", H5P_DEFAULT);
    const hid_t space = H5Dget_space(ds);
    const hsize_t start[2] = {2, 0}, count[2] = {2, 4};
    H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
    const hid_t mem = H5Screate_simple(2, count, nullptr);
    const float ones[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    REQUIRE(H5Dwrite(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, ones) >= 0);
    PersistentTensorDict reader = PersistentTensorDict::from_h5(path, "r");
    CHECK(at::equal(reader.index({Slice(0, 5)}).get("x").sum(1), at::tensor({0.f, 0.f, 4.f, 4.f, 0.f})));
    reader.close();
    H5Sclose(mem);
    H5Sclose(space);
    H5Dclose(ds);
    H5Fclose(file);
  }
  // The other way round, HDF5 refuses a writer while a read-only handle is open: a handle that
  // reads straight from the file never misses a write of its own process.
  PersistentTensorDict reader = PersistentTensorDict::from_h5(path, "r");
  CHECK(reader.index({Slice(2, 3)}).get("x").sum().item<float>() == 4.f);
  REQUIRE_THROWS_AS(PersistentTensorDict::from_h5(path, "r+"), StorageError);
}

TEST_CASE("rows read from a file truncated after it was opened raise, naming the dataset", "[h5][errors][io]") {
  TempDir dir;
  const std::string path = dir / "cut_later.h5";
  PersistentTensorDict::to_h5(TensorDict({{"obs", at::ones({1024, 256})}}, {1024}), path).close();
  PersistentTensorDict f = PersistentTensorDict::from_h5(path, "r");
  CHECK(f.index({Slice(0, 2)}).get("obs").sum().item<float>() == 512.f);
  std::filesystem::resize_file(path, 512 * 1024);
  REQUIRE_THROWS_AS(f.index({Slice(1000, 1010)}).get("obs"), StorageError);
  REQUIRE_THROWS_WITH(f.index({Slice(1000, 1010)}).get("obs"),
                      Catch::Contains("cut_later.h5:/obs") && Catch::Contains("truncated"));
}

TEST_CASE("per-element strings are string arrays h5py reads, written row by row in place", "[h5][non_tensor][interop]") {
  TempDir dir;
  const std::string path = dir / "s.h5";
  {
    PersistentTensorDict f = PersistentTensorDict::to_h5(
        TensorDict({{"x", at::zeros({4})}, {"note", "none"}, {"last", at::ones({4})}}, {4}), path);
    f.index_put_({1}, TensorDict({{"note", "one"}}));
    f.index_put_({at::tensor({3, 0}, at::kLong)},
                 TensorDict({{"note", NonTensorData::from_list(json::parse(R"(["three", "zero"])"), {2})}}, {2}));
    f.index({2}).set_non_tensor_("note", NonTensorData("two"));  // through a view
    // Values that are not all strings are stored as JSON text per element.
    f.set("mixed", NonTensorData::from_list(json::parse(R"([1, "b", null, [2]])"), {4}));
    CHECK((f.keys() == std::vector<NestedKey>{"x", "note", "last", "mixed"}));  // written in place
  }
  PersistentTensorDict back = PersistentTensorDict::from_h5(path, "r");
  CHECK(back.get_non_tensor("note").tolist().python_str() == "['zero', 'one', 'two', 'three']");
  CHECK(back.get_non_tensor("mixed").tolist().python_str() == "[1, 'b', None, [2]]");
  CHECK(back.index({Slice(1, 3)}).get_non_tensor("note").tolist().python_str() == "['one', 'two']");
  CHECK(back.index({2}).get_non_tensor("note").value().as_string() == "two");
  const json::Value seen = h5py_read(path);
  // (find() returns nullptr for a missing name: the REQUIREs keep the reads safe)
  const json::Value* note = seen.find("note");
  const json::Value* mixed = seen.find("mixed");
  REQUIRE(note != nullptr);
  REQUIRE(mixed != nullptr);
  CHECK(note->find("dtype")->as_string() == "object");
  CHECK(note->find("value")->dump() == R"(["zero","one","two","three"])");
  CHECK(mixed->find("attrs")->find("tensordict_encoding")->as_string() == "json");

  // h5py's string arrays (str and fixed-length bytes) load as per-row strings.
  h5py_write("strings", dir / "py.h5");
  PersistentTensorDict py = PersistentTensorDict::from_h5(dir / "py.h5", "r");
  CHECK((py.batch_size() == c10::IntArrayRef{3}));
  CHECK(py.get_non_tensor("tags").tolist().python_str() == "['a', 'bb', 'a']");
  CHECK(py.get_non_tensor("codes").tolist().python_str() == "['x', 'yy', 'z']");
  CHECK(py.index({at::tensor({2, 0}, at::kLong)}).get_non_tensor("tags").value().as_string() == "a");
}

TEST_CASE("select_, rename and replace keep groups and key positions in the file", "[h5][write][keys]") {
  TempDir dir;
  const std::string path = dir / "k.h5";
  PersistentTensorDict f = PersistentTensorDict::to_h5(
      TensorDict({{"a", at::zeros({2})}, {"b", {{"c", at::ones({2})}, {"d", at::ones({2})}}}, {"e", at::ones({2})}},
                 {2}),
      path);
  f.rename_key_("a", "z");
  CHECK((f.keys() == std::vector<NestedKey>{"z", "b", "e"}));
  f.set("z", at::ones({2, 3}));  // another shape: recreated where it was
  CHECK((f.keys() == std::vector<NestedKey>{"z", "b", "e"}));
  // select_ narrows the group in the file and orders what it keeps as asked.
  f.select_({"e", {"b", "d"}});
  PersistentTensorDict back = PersistentTensorDict::from_h5(path, "r");
  CHECK((back.keys() == std::vector<NestedKey>{"e", "b"}));
  CHECK((back.keys(true, true) == std::vector<NestedKey>{"e", {"b", "d"}}));
  CHECK(at::equal(back.get({"b", "d"}), at::ones({2})));
}

TEST_CASE("the device is stored with the file, and from() names what it got", "[h5][errors]") {
  TempDir dir;
  const at::Device cpu(at::kCPU);
  PersistentTensorDict f = PersistentTensorDict::to_h5(TensorDict({{"a", at::ones({2})}}, {2}, cpu), dir / "d.h5");
  CHECK(f.device() == cpu);
  CHECK(f.to(cpu).is_same(f));
  CHECK(PersistentTensorDict::from_h5(dir / "d.h5", "r").device() == cpu);
  REQUIRE_THROWS_AS(PersistentTensorDict::from(TensorDict({{"a", at::ones({2})}}, {2})), TypeError);
  REQUIRE_THROWS_WITH(PersistentTensorDict::from(TensorDict({{"a", at::ones({2})}}, {2})),
                      Catch::Contains("expected a PersistentTensorDict, got a TensorDict"));
}

TEST_CASE("index tensors with hundreds of separate runs read and write one run at a time", "[h5][index][write]") {
  TempDir dir;
  at::manual_seed(3);
  // 300 scattered rows (more runs than one union selection takes), unsorted, some repeated.
  const at::Tensor rows = at::cat({at::randperm(1000, at::kLong).slice(0, 0, 300), at::tensor({7, 7, 999}, at::kLong)});
  TensorDict td({{"x", at::randn({1000, 3})}, {"n", {{"y", at::arange(1000 * 600, at::kInt).view({1000, 600})}}}},
                {1000});
  td.get_tensordict("n").set_batch_size({1000, 600});
  PersistentTensorDict f = PersistentTensorDict::to_h5(td, dir / "runs.h5");
  CHECK(at::equal(f.index({rows}).get("x"), td.get("x").index({rows})));
  // Runs on the second dim of a nested level.
  const at::Tensor cols = at::randperm(600, at::kLong).slice(0, 0, 250);
  CHECK(at::equal(f.get_tensordict("n").index({Slice(2, 5), cols}).get("y"),
                  td.get({"n", "y"}).index({Slice(2, 5), cols})));
  // Writes: the file and an in-memory copy given the same index_put_ agree.
  const at::Tensor distinct = at::randperm(1000, at::kLong).slice(0, 0, 400);
  const at::Tensor distinct_values = at::randn({400, 3});
  f.index_put_({distinct}, TensorDict({{"x", distinct_values}}, {400}));
  at::Tensor expected = td.get("x").clone();
  expected.index_put_({distinct}, distinct_values);
  CHECK(at::equal(f.get("x"), expected));
  f.get_tensordict("n").index_put_({Slice(0, 2), cols}, TensorDict({{"y", at::full({2, 250}, -1, at::kInt)}}, {2, 250}));
  at::Tensor expected_y = td.get({"n", "y"}).clone();
  expected_y.index_put_({Slice(0, 2), cols}, -1);
  CHECK(at::equal(f.get({"n", "y"}), expected_y));
}
