// Hostile memmap directories (issue 17): byte counts that overflow int64, nesting deeper than
// any real tensordict, keys that try to leave the directory and symbolic links out of it. Each
// is a StorageError naming the file, with nothing allocated, mapped or read from elsewhere.

#include "support/catch_torch.h"

#include <fstream>
#include <string>
#include <vector>

// support.h (ATen) before Catch's macros are used: see memmap_safety_test.cpp.
#include "backends/memmap/support.h"

using namespace tensordict;
using namespace memmap_test;

namespace {

void write_text(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

std::string leaf_meta(const std::string& key, const std::string& shape) {
  return "{\"" + key + "\": {\"device\": \"cpu\", \"shape\": " + shape +
         ", \"dtype\": \"torch.float32\", \"is_nested\": false}, \"shape\": [4], \"device\": \"cpu\", "
         "\"_type\": \"<class 'tensordict._td.TensorDict'>\"}";
}

}  // namespace

TEST_CASE("shapes whose byte count overflows int64 are refused before anything is mapped", "[memmap][bad_input]") {
  TempDir dir;
  const std::string td = dir / "td";
  fs::create_directories(td);
  write_text(td + "/x.memmap", std::string(64, '\0'));
  for (const std::string shape : {"[4, 4611686018427387904]", "[4, 1099511627776, 1099511627776]",
                                  "[4, 9223372036854775807]"}) {
    INFO(shape);
    write_text(td + "/meta.json", leaf_meta("x", shape));
    REQUIRE_THROWS_AS(load_memmap(td), StorageError);
    CHECK_THROWS_WITH(load_memmap(td), Catch::Contains(td + "/meta.json") && Catch::Contains("int64"));
  }
  // In range but more than the file holds: the file is named, nothing is mapped.
  write_text(td + "/meta.json", leaf_meta("x", "[4, 1073741824]"));
  CHECK_THROWS_WITH(load_memmap(td), Catch::Contains(td + "/x.memmap") && Catch::Contains("truncated"));
}

TEST_CASE("meta.json nested 100000 levels deep is a StorageError, not a stack overflow", "[memmap][bad_input]") {
  TempDir dir;
  const std::string td = dir / "td";
  fs::create_directories(td);
  const int depth = 100000;
  std::string text;
  for (int i = 0; i < depth; ++i) text += "{\"a\": ";
  text += "1";
  text += std::string(depth, '}');
  write_text(td + "/meta.json", text);
  REQUIRE_THROWS_AS(load_memmap(td), StorageError);
  CHECK_THROWS_WITH(load_memmap(td), Catch::Contains("meta.json") && Catch::Contains("too deep"));
  // Arrays too, straight through the parser.
  CHECK_THROWS_AS(json::parse(std::string(depth, '[') + std::string(depth, ']')), ValueError);
}

TEST_CASE("keys naming paths outside the directory never read there", "[memmap][bad_input]") {
  TempDir dir;
  const std::string td = dir / "td";
  fs::create_directories(td);
  // A file the hostile keys aim at, next to the directory and at an absolute path.
  write_text(dir / "outside.memmap", std::string(16, '\7'));
  for (const std::string& key :
       std::vector<std::string>{"../outside", dir / "outside", "..", "a\\u0000b", "sub/../../outside"}) {
    INFO(key);
    write_text(td + "/meta.json", leaf_meta(key, "[4]"));
    try {
      const TensorDict loaded = load_memmap(td);
      FAIL("loaded a leaf for key " << key);
    } catch (const StorageError& e) {
      const std::string message = e.what();
      CHECK_THAT(message, Catch::Contains("missing"));  // looked for inside the prefix only
      CHECK_THAT(message, Catch::Contains(td + "/"));
    }
  }
}

TEST_CASE("symbolic links below the prefix are refused unless allowed", "[memmap][bad_input]") {
  TempDir dir;
  memmap(TensorDict({{"x", at::arange(4, at::kFloat)}, {"n", {{"y", at::arange(4, at::kLong)}}}}, {4}), dir / "td");
  const std::string td = dir / "td";
  // A leaf file replaced by a link to a file elsewhere (same size, so only the link is wrong).
  fs::rename(td + "/x.memmap", dir / "elsewhere.memmap");
  fs::create_symlink(dir / "elsewhere.memmap", td + "/x.memmap");
  REQUIRE_THROWS_AS(load_memmap(td), StorageError);
  CHECK_THROWS_WITH(load_memmap(td), Catch::Contains(td + "/x.memmap") && Catch::Contains("symbolic link"));
  LoadMemmapOptions follow;
  follow.allow_symlinks = true;
  CHECK(at::equal(load_memmap(td, follow).get("x"), at::arange(4, at::kFloat)));
  // A nested directory, and a meta.json, linked from elsewhere.
  fs::remove(td + "/x.memmap");
  fs::rename(dir / "elsewhere.memmap", td + "/x.memmap");
  fs::rename(td + "/n", dir / "n_elsewhere");
  fs::create_directory_symlink(dir / "n_elsewhere", td + "/n");
  CHECK_THROWS_WITH(load_memmap(td), Catch::Contains(td + "/n") && Catch::Contains("symbolic link"));
  CHECK(at::equal(load_memmap(td, follow).get({"n", "y"}), at::arange(4, at::kLong)));
  fs::remove(td + "/n");
  fs::rename(dir / "n_elsewhere", td + "/n");
  fs::rename(td + "/meta.json", dir / "meta_elsewhere.json");
  fs::create_symlink(dir / "meta_elsewhere.json", td + "/meta.json");
  CHECK_THROWS_WITH(load_memmap(td), Catch::Contains(td + "/meta.json") && Catch::Contains("symbolic link"));
}
