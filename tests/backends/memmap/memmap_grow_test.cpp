// New leaves in a memory-mapped tensordict (make_memmap, make_memmap_from_tensor) and loading a
// directory into an existing tensordict (load_memmap_, load_), checked by the independent reader
// as Python v0.14 would read them.
#include "support/catch_torch.h"

#include <tensordict/backends/memmap.h>

#include "backends/memmap/support.h"

using namespace tensordict;
using namespace memmap_test;

namespace {
bool python_reads(const std::string& dir) {
  auto [code, out] = run("/usr/bin/python3 " + quoted(script("check_written.py")) + " " + quoted(dir) + " 2>&1");
  if (code != 0) FAIL_CHECK("check_written.py: " << out);
  return code == 0;
}
}  // namespace

TEST_CASE("make_memmap adds zero-filled leaves to a memory-mapped tensordict, on disk", "[memmap][make_memmap]") {
  TempDir dir;
  TensorDict mm = memmap(TensorDict({{"a", at::ones({3})}}, {3}), dir / "td");
  at::Tensor b = make_memmap(mm, "b", {3, 2});
  CHECK(b.scalar_type() == at::kFloat);
  b.fill_(7);  // the returned tensor maps the new file
  at::Tensor c = make_memmap(mm, {"sub", "c"}, {3}, at::kLong);  // a missing level is created
  c.copy_(at::arange(3));
  make_memmap_from_tensor(mm, "d", at::full({3, 4}, 2.5, at::kDouble));
  make_memmap_from_tensor(mm, "e", at::full({3}, 9, at::kInt), /*copy_data=*/false);
  CHECK(mm.is_locked());  // still locked: the new keys bypass the lock, as in Python
  REQUIRE(python_reads(dir / "td"));
  TensorDict back = load_memmap(dir / "td");
  CHECK(at::equal(back.get("b"), at::full({3, 2}, 7.f)));
  CHECK(at::equal(back.get({"sub", "c"}), at::arange(3)));
  CHECK(at::equal(back.get("d"), at::full({3, 4}, 2.5, at::kDouble)));
  CHECK(at::equal(back.get("e"), at::zeros({3}, at::kInt)));
  CHECK(back.get_tensordict("sub").batch_size() == c10::IntArrayRef({3}));
}

TEST_CASE("make_memmap refuses a tensordict that is not memory-mapped, an existing key and a wrong shape",
          "[memmap][make_memmap]") {
  TempDir dir;
  TensorDict plain({{"a", at::ones({3})}}, {3});
  CHECK_THROWS_WITH(make_memmap(plain, "b", {3}), Catch::Contains("Can only make a memmap tensor within a memory-mapped tensordict."));
  TensorDict mm = memmap(plain, dir / "td");
  CHECK_THROWS_WITH(make_memmap(mm, "a", {3}), Catch::Contains("already exists within the target tensordict"));
  CHECK_THROWS_AS(make_memmap(mm, "b", {4}), ShapeError);
  CHECK_FALSE(fs::exists(dir / "td/b.memmap"));  // checked before anything is written
  CHECK(read_file(dir / "td/meta.json").find("\"b\"") == std::string::npos);
}

TEST_CASE("load_memmap_ loads a directory into a tensordict, keeping its other keys and batch size",
          "[memmap][load_memmap_]") {
  TempDir dir;
  memmap(TensorDict({{"a", at::full({2}, 3.f)}, {"n", {{"x", at::ones({2, 2})}}}}, {2}), dir / "saved");
  TensorDict td({{"a", at::zeros({2})}, {"keep", at::zeros({2})}, {"n", {{"y", at::zeros({2})}}}}, {2});
  TensorDictBase* nested = td.get_tensordict("n").impl();
  load_memmap_(td, dir / "saved");
  CHECK(at::equal(td.get("a"), at::full({2}, 3.f)));
  CHECK(td.contains("keep"));
  CHECK(td.get_tensordict("n").impl() == nested);  // loaded into, not replaced
  CHECK(at::equal(td.get({"n", "x"}), at::ones({2, 2})));
  CHECK(td.contains({"n", "y"}));
  TensorDict wrong_batch({}, {5});
  CHECK_THROWS_AS(load_(wrong_batch, dir / "saved"), ShapeError);
  TensorDict locked = TensorDict({}, {2}).lock_();
  CHECK_THROWS_AS(load_memmap_(locked, dir / "saved"), LockedError);
  // A memory-mapped tensordict gets the values copied into its own files.
  TensorDict mm = memmap(TensorDict({{"a", at::zeros({2})}, {"n", {{"x", at::zeros({2, 2})}}}}, {2}), dir / "own");
  load_memmap_(mm, dir / "saved");
  CHECK(at::equal(load_memmap(dir / "own").get("a"), at::full({2}, 3.f)));
}

TEST_CASE("make_memmap_from_storage records a storage mapped from the leaf's own file", "[memmap][make_memmap]") {
  TempDir dir;
  TensorDict mm = memmap(TensorDict({{"a", at::ones({3})}}, {3}), dir / "td");
  // A storage mapped from <dir>/b.memmap, as Python's MemoryMappedTensor.from_filename gives.
  MemoryMappedTensor file = MemoryMappedTensor::from_tensor(at::arange(6, at::kFloat), dir / "td/b.memmap");
  at::Tensor b = make_memmap_from_storage(mm, "b", file.tensor().storage(), {3, 2});
  CHECK(b.data_ptr() == file.tensor().data_ptr());  // the same mapping, nothing written
  REQUIRE(python_reads(dir / "td"));
  CHECK(at::equal(load_memmap(dir / "td").get("b"), at::arange(6, at::kFloat).view({3, 2})));
  // A storage from anywhere else is refused, as in Python.
  CHECK_THROWS_WITH(make_memmap_from_storage(mm, "c", at::zeros({3}).storage(), {3}),
                    Catch::Contains("is not mapped from") && Catch::Contains("c.memmap"));
}
