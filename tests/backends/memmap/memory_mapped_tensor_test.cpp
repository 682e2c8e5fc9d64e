// MemoryMappedTensor: file-backed CPU tensors and the key/dtype naming helpers of the format.

#include "support/catch_torch.h"

#include <sys/stat.h>
#include <unistd.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

// support.h (ATen) before Catch: c10/util/logging defines its own CHECK macro, which must
// not replace Catch's.
#include "backends/memmap/support.h"

using namespace tensordict;
using namespace memmap_test;

TEST_CASE("MemoryMappedTensor::from_tensor writes the raw bytes and maps them shared", "[memmap][mmt]") {
  TempDir dir;
  at::Tensor src = at::arange(6, at::kInt).view({2, 3}).t();  // non-contiguous: written in C order
  MemoryMappedTensor mmt = MemoryMappedTensor::from_tensor(src, dir / "t.memmap");
  CHECK(mmt.filename() == dir / "t.memmap");
  CHECK(mmt.is_shared());
  CHECK(at::equal(mmt.tensor(), src));
  CHECK(fs::file_size(dir / "t.memmap") == 24);
  CHECK(MemoryMappedTensor::filename_of(mmt).value() == dir / "t.memmap");
  CHECK_FALSE(MemoryMappedTensor::filename_of(mmt.tensor()[0]).has_value());  // a view is not the file
  mmt.tensor().fill_(4);
  CHECK(at::equal(MemoryMappedTensor::from_filename(dir / "t.memmap", at::kInt, {3, 2}).tensor(),
                  at::full({3, 2}, 4, at::kInt)));
}

TEST_CASE("MemoryMappedTensor::zeros and empty create zero-filled files", "[memmap][mmt]") {
  TempDir dir;
  auto z = MemoryMappedTensor::zeros({4, 2}, at::kDouble, dir / "z.memmap");
  CHECK(at::equal(z.tensor(), at::zeros({4, 2}, at::kDouble)));
  CHECK(fs::file_size(dir / "z.memmap") == 64);
  auto e = MemoryMappedTensor::empty({3}, at::kBFloat16, dir / "e.memmap");
  CHECK(e.tensor().scalar_type() == at::kBFloat16);
  CHECK(fs::file_size(dir / "e.memmap") == 6);
  REQUIRE_THROWS_AS(MemoryMappedTensor::zeros({3}, at::kFloat, dir / "e.memmap", /*existsok=*/false), StorageError);
}

TEST_CASE("a read-only file maps copy-on-write: writes do not reach it", "[memmap][mmt]") {
  TempDir dir;
  MemoryMappedTensor::from_tensor(at::ones({4}), dir / "ro.memmap");
  ::chmod((dir / "ro.memmap").c_str(), 0444);
  if (::geteuid() == 0) SUCCEED("root ignores file permissions; nothing to check");
  else {
    auto ro = MemoryMappedTensor::from_filename(dir / "ro.memmap", at::kFloat, {4});
    CHECK_FALSE(ro.is_shared());
    ro.tensor().fill_(7);
    CHECK(at::equal(MemoryMappedTensor::from_filename(dir / "ro.memmap", at::kFloat, {4}).tensor(), at::ones({4})));
  }
  auto forced = MemoryMappedTensor::from_filename(dir / "ro.memmap", at::kFloat, {4}, /*writable=*/false);
  CHECK_FALSE(forced.is_shared());
}

TEST_CASE("opening a missing or short file is a StorageError naming it", "[memmap][mmt]") {
  TempDir dir;
  REQUIRE_THROWS_WITH(MemoryMappedTensor::from_filename(dir / "none.memmap", at::kFloat, {2}),
                      Catch::Contains(dir / "none.memmap") && Catch::Contains("missing"));
  MemoryMappedTensor::from_tensor(at::ones({2}), dir / "two.memmap");
  REQUIRE_THROWS_AS(MemoryMappedTensor::from_filename(dir / "two.memmap", at::kFloat, {3}), StorageError);
}

TEST_CASE("key encoding follows Python's robust key rules and decodes back", "[memmap][keys]") {
  CHECK(encode_key_for_filesystem("a/b% c") == "a%2Fb%25%20c");
  CHECK(encode_key_for_filesystem("../outside") == "..%2Foutside");
  CHECK(encode_key_for_filesystem("key:colon") == "key%3Acolon");
  CHECK(encode_key_for_filesystem("a.b") == "a.b");
  CHECK(encode_key_for_filesystem("") == "%");
  CHECK(encode_key_for_filesystem(".") == "%2E");
  CHECK(encode_key_for_filesystem("..") == "%2E%2E");
  CHECK(encode_key_for_filesystem(std::string("a\0\x7f\t", 4)) == "a%00%7F%09");
  CHECK(encode_key_for_filesystem("<>\"|?*\\") == "%3C%3E%22%7C%3F%2A%5C");
  CHECK(encode_key_for_filesystem("\xc3\xbc") == "\xc3\xbc");
  for (std::string k : {"a/b% c", "", ".", "..", "%", "\\", "x%y", "\xc3\xbc z"}) {
    CHECK(decode_key_from_filesystem(encode_key_for_filesystem(k)) == k);
  }
  CHECK(decode_key_from_filesystem("50%zz") == "50%zz");  // invalid escapes stay literal
}

TEST_CASE("a dtype name reads back as its dtype - any other byte string as none or its own dtype", "[memmap][dtypes]") {
  // The lookup compares names in word loads: every byte of a name, its length and its prefix count.
  std::vector<std::pair<std::string, at::ScalarType>> names;
  for (int i = 0; i < static_cast<int>(at::ScalarType::NumOptions); ++i) {
    const auto dtype = static_cast<at::ScalarType>(i);
    if (is_storable_dtype(dtype)) names.emplace_back(torch_dtype_name(dtype), dtype);
  }
  REQUIRE(names.size() >= 13);
  auto expected = [&](const std::string& name) -> std::optional<at::ScalarType> {
    for (const auto& [n, d] : names)
      if (n == name) return d;
    return std::nullopt;
  };
  size_t tried = 0;
  for (const auto& [name, dtype] : names) {
    CHECK(dtype_from_torch_name(name) == dtype);
    for (size_t i = 0; i < name.size(); ++i) {
      for (char c : {'x', '4', '.', '\0'}) {
        std::string changed = name;
        if (changed[i] == c) continue;
        changed[i] = c;
        CHECK(dtype_from_torch_name(changed) == expected(changed));
        ++tried;
      }
      CHECK(dtype_from_torch_name(name.substr(0, i)) == expected(name.substr(0, i)));
    }
    CHECK_FALSE(dtype_from_torch_name(name + "0").has_value());
    CHECK_FALSE(dtype_from_torch_name(name.substr(6)).has_value());  // without "torch."
  }
  CHECK(tried > 400);
}

TEST_CASE("dtype names are canonical torch names - unloadable dtypes are refused", "[memmap][dtypes]") {
  CHECK(torch_dtype_name(at::kFloat) == "torch.float32");
  CHECK(torch_dtype_name(at::kLong) == "torch.int64");
  CHECK(torch_dtype_name(at::kBFloat16) == "torch.bfloat16");
  CHECK(torch_dtype_name(at::kComplexHalf) == "torch.complex32");
  CHECK(short_dtype_name(at::kDouble) == "float64");
  CHECK(dtype_from_torch_name("torch.bool") == at::kBool);
  CHECK_FALSE(dtype_from_torch_name("torch.float").has_value());  // only canonical names are written
  CHECK_FALSE(dtype_from_torch_name("float32").has_value());
  CHECK_FALSE(dtype_from_torch_name("torch.float8_e5m2").has_value());
  CHECK(is_storable_dtype(at::kComplexFloat));
  CHECK_FALSE(is_storable_dtype(at::kQInt8));
  CHECK(torch_dtype_name(at::kQInt8) == "torch.qint8");
  TempDir dir;
  TensorDict td({{"q", at::quantize_per_tensor(at::ones({2}), 0.1, 0, at::kQInt8)}}, {2});
  REQUIRE_THROWS_WITH(memmap(td, dir / "td"), Catch::Contains("cannot be stored") && Catch::Contains("'q'"));
}
