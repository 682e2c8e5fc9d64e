// Bad input and safety: keys never write outside the prefix; malformed directories raise a
// StorageError naming the file and the problem, and a failed load changes nothing.

#include "support/catch_torch.h"

#include <fstream>
#include <set>
#include <sstream>

// support.h (ATen) before Catch: c10/util/logging defines its own CHECK macro, which must
// not replace Catch's.
#include "backends/memmap/support.h"

using namespace tensordict;
using namespace memmap_test;

namespace {

std::set<std::string> listing(const std::string& dir) {
  std::set<std::string> out;
  for (const auto& e : fs::recursive_directory_iterator(dir)) out.insert(e.path().string());
  return out;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

// A small valid directory to corrupt.
std::string make_valid(const TempDir& dir) {
  memmap(TensorDict({{"x", at::arange(4, at::kFloat)}, {"n", {{"y", at::arange(4, at::kLong)}}}}, {4}),
         dir / "td");
  return dir / "td";
}

}  // namespace

TEST_CASE("keys with '..', '/', absolute paths, empty strings and NUL bytes stay inside the prefix",
          "[memmap][safety]") {
  TempDir dir;
  const std::string prefix = dir / "inner/td";
  fs::create_directories(prefix);
  auto outside_before = listing(dir.path());
  const std::string nul_key("a\0b", 3);
  std::vector<std::string> keys = {"..", "../..", "../../outside", "/etc/passwd_td_test", "", ".",
                                   "a/../../b", nul_key, "..\\win", "C:evil"};
  TensorDict td({}, {2});
  for (const auto& k : keys) td.set(k, at::ones({2}));
  td.set({"../sub", "../x"}, at::ones({2}));
  memmap(td, prefix);
  // Everything new lies under the prefix.
  for (const auto& p : listing(dir.path())) {
    if (outside_before.count(p)) continue;
    INFO(p);
    CHECK(p.rfind(prefix + "/", 0) == 0);
  }
  CHECK_FALSE(fs::exists("/etc/passwd_td_test.memmap"));
  CHECK(fs::exists(prefix + "/a%00b.memmap"));
  CHECK(fs::exists(prefix + "/..%2Fsub/..%2Fx.memmap"));
  TensorDict back = load_memmap(prefix);
  for (const auto& k : keys) {
    INFO(k);
    CHECK(at::equal(back.get(k), at::ones({2})));
  }
}

TEST_CASE("keys Python would lose at a memmap level are refused before anything is written",
          "[memmap][safety]") {
  TempDir dir;
  for (const char* key : {"shape", "device", "_type"}) {
    TensorDict td({{"a", at::ones({2})}, {"n", {{key, at::ones({2})}}}}, {2});
    REQUIRE_THROWS_AS(memmap(td, dir / "td"), ValueError);
    REQUIRE_THROWS_WITH(memmap(td, dir / "td"), Catch::Contains(key) && Catch::Contains("reserved"));
    CHECK_FALSE(fs::exists(dir / "td"));
  }
  // A collection named meta.json would clash with the level's own meta.json.
  TensorDict clash({{"meta.json", {{"x", at::ones({2})}}}}, {2});
  REQUIRE_THROWS_WITH(memmap(clash, dir / "td"), Catch::Contains("meta.json"));
}

TEST_CASE("writing through a symlinked leaf file or directory is refused", "[memmap][safety]") {
  TempDir dir;
  fs::create_directories(dir / "td");
  write(dir / "target", "keep");
  fs::create_symlink(dir / "target", dir / "td/x.memmap");
  REQUIRE_THROWS_WITH(memmap(TensorDict({{"x", at::ones({2})}}, {2}), dir / "td"),
                      Catch::Contains("Refusing to write") && Catch::Contains("symlink"));
  CHECK(slurp(dir / "target") == "keep");
  fs::create_directories(dir / "elsewhere");
  fs::create_directories(dir / "td2");
  fs::create_directory_symlink(dir / "elsewhere", dir / "td2/n");
  REQUIRE_THROWS_WITH(memmap(TensorDict({{"n", {{"x", at::ones({2})}}}}, {2}), dir / "td2"),
                      Catch::Contains("symlink"));
  CHECK(fs::is_empty(dir / "elsewhere"));
}

TEST_CASE("a missing or malformed meta.json is a StorageError naming the file", "[memmap][safety]") {
  TempDir dir;
  REQUIRE_THROWS_AS(load_memmap(dir / "nothing"), StorageError);
  REQUIRE_THROWS_WITH(load_memmap(dir / "nothing"), Catch::Contains(dir / "nothing/meta.json") &&
                                                        Catch::Contains("missing"));
  std::string td = make_valid(dir);
  write(td + "/n/meta.json", "{\"y\": {\"device\": \"cpu\",\n \"shape\": [4, }");
  REQUIRE_THROWS_AS(load_memmap(td), StorageError);
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains(td + "/n/meta.json:2:") && Catch::Contains("malformed"));
  write(td + "/n/meta.json", "[1, 2]");
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains("expected an object"));
  write(td + "/n/meta.json", R"({"shape": [4], "device": "cpu"})");
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains("_type"));
  write(td + "/n/meta.json", R"({"y": {"device": "cpu", "shape": [4], "dtype": "torch.int64", "is_nested": false},)"
                              R"( "shape": "four", "device": "cpu", "_type": "<class 'tensordict._td.TensorDict'>"})");
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains("\"shape\" must be a list"));
  write(td + "/n/meta.json", R"({"_type": "<class '__main__.MyClass'>"})");
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains("unsupported stored class") && Catch::Contains("MyClass"));
}

TEST_CASE("a missing or truncated leaf file, a bad shape or an unknown dtype is a StorageError",
          "[memmap][safety]") {
  TempDir dir;
  std::string td = make_valid(dir);
  const std::string meta = slurp(td + "/meta.json");

  fs::remove(td + "/x.memmap");
  REQUIRE_THROWS_AS(load_memmap(td), StorageError);
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains(td + "/x.memmap") && Catch::Contains("missing"));

  write(td + "/x.memmap", std::string(10, '\0'));  // 16 bytes needed
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains(td + "/x.memmap") && Catch::Contains("truncated") &&
                                           Catch::Contains("10 bytes") && Catch::Contains("16 bytes"));

  write(td + "/x.memmap", std::string(16, '\0'));
  std::string bigger = meta;
  bigger.replace(bigger.find("[4]"), 3, "[4, 3]");
  write(td + "/meta.json", bigger);
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains("truncated") && Catch::Contains("48 bytes"));

  std::string bad_batch = meta;
  bad_batch.replace(bad_batch.find("[4]"), 3, "[5]");
  write(td + "/meta.json", bad_batch);
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains("does not start with the batch size"));

  std::string bad_dtype = meta;
  bad_dtype.replace(bad_dtype.find("torch.float32"), 13, "torch.float8_e4m3fn");
  write(td + "/meta.json", bad_dtype);
  REQUIRE_THROWS_AS(load_memmap(td), StorageError);
  REQUIRE_THROWS_WITH(load_memmap(td), Catch::Contains(td + "/meta.json") && Catch::Contains("unknown dtype") &&
                                           Catch::Contains("torch.float8_e4m3fn"));

  std::string negative = meta;
  negative.replace(negative.find("[4]"), 3, "[-4]");
  write(td + "/meta.json", negative);
  REQUIRE_THROWS_AS(load_memmap(td), StorageError);
}

TEST_CASE("pickle sidecars are refused with the field named", "[memmap][safety]") {
  TempDir dir;
  fs::create_directories(dir / "td/obj");
  write(dir / "td/meta.json", R"({"obj": {"type": "NonTensorData"}, "shape": [], "device": "cpu", )"
                              R"("_type": "<class 'tensordict._td.TensorDict'>"})");
  write(dir / "td/obj/meta.json", R"({"_type": "<class 'tensordict.tensorclass.NonTensorData'>", "_metadata": null})");
  write(dir / "td/obj/other.pickle", "\x80\x04pickled");
  REQUIRE_THROWS_AS(load_memmap(dir / "td"), StorageError);
  REQUIRE_THROWS_WITH(load_memmap(dir / "td"), Catch::Contains("\"data\"") && Catch::Contains("other.pickle") &&
                                                   Catch::Contains("refused"));
  write(dir / "td/meta.json", R"({"obj": {"type": "NonTensorStack"}, "shape": [2], "device": "cpu", )"
                              R"("_type": "<class 'tensordict._td.TensorDict'>"})");
  write(dir / "td/obj/meta.json", R"({"_type":"<class 'tensordict.tensorclass.NonTensorStack'>","stack_dim":0,"device":null,"data":"pickle.pkl"})");
  REQUIRE_THROWS_WITH(load_memmap(dir / "td"), Catch::Contains("pickle.pkl") && Catch::Contains("refused"));
}

TEST_CASE("a failed load writes nothing and a failed refresh leaves the tensordict as it was",
          "[memmap][safety]") {
  TempDir dir;
  std::string td = make_valid(dir);
  TensorDict mm = load_memmap(td);
  const std::string x_before = slurp(td + "/x.memmap");
  const std::string meta_before = slurp(td + "/meta.json");
  write(td + "/n/y.memmap", "short");
  REQUIRE_THROWS_AS(memmap_refresh_(mm), StorageError);
  CHECK(slurp(td + "/x.memmap") == x_before);
  CHECK(slurp(td + "/meta.json") == meta_before);
  CHECK(mm.keys().size() == 2);
  CHECK(at::equal(mm.get("x"), at::arange(4, at::kFloat)));
}
