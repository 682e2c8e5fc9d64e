// Creating a file (issue 30): to_h5 and from_schema refuse a path where a file is unless
// H5Options::overwrite, and from_schema preallocates non-tensor leaves as h5py reads them.
#include <filesystem>
#include <fstream>

#include <ATen/ATen.h>

#include <tensordict/backends/persistent.h>
#include <tensordict/json.h>

#include "backends/hdf5/h5py_support.h"
#include "core/file_io.h"

using namespace tensordict;
using h5_test::h5py_read;
using memmap_test::TempDir;

namespace {

H5Options replacing() {
  H5Options options;
  options.overwrite = true;
  return options;
}

float reward_sum(const std::string& path) {
  return PersistentTensorDict::from_h5(path, "r").get("reward").sum().item<float>();
}

std::string list_of(const TensorDict& td, const NestedKey& key) { return td.get_non_tensor(key).tolist().python_str(); }
// One value for every row (what a uniform non-tensor entry holds), as Python's repr prints it.
std::string uniform_of(const TensorDict& td, const NestedKey& key) {
  const NonTensorData value = td.get_non_tensor(key);
  return value.is_uniform() ? value.value().python_repr() : "not uniform: " + value.tolist().python_str();
}

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("to_h5 and from_schema refuse an existing file unless overwrite is set", "[h5]") {
  TempDir dir;
  const std::string path = dir / "buffer.h5";
  PersistentTensorDict::to_h5(TensorDict({{"reward", at::ones({4})}}, {4}), path).close();
  // (A macro: Catch's combined matchers keep references to their parts, so one cannot be stored.)
#define NAMES_IT Catch::Contains(path) && Catch::Contains("already exists") && Catch::Contains("H5Options::overwrite")
  CHECK_THROWS_AS(PersistentTensorDict::to_h5(TensorDict({{"reward", at::zeros({4})}}, {4}), path), StorageError);
  CHECK_THROWS_WITH(PersistentTensorDict::to_h5(TensorDict({{"reward", at::zeros({4})}}, {4}), path), NAMES_IT);
  CHECK_THROWS_WITH(PersistentTensorDict::from_schema({{"reward", {{}, at::kFloat}}}, {4}, path), NAMES_IT);
  CHECK(reward_sum(path) == 4.f);
  CHECK(entries(dir.path()) == std::vector<std::string>{"buffer.h5"});  // no temporary left

  // Any file there counts, not only HDF5 ones.
  const std::string text = dir / "notes.h5";
  std::ofstream(text) << "keep me";
#undef NAMES_IT
  CHECK_THROWS_WITH(PersistentTensorDict::from_schema({{"reward", {{}, at::kFloat}}}, {4}, text),
                    Catch::Contains(text) && Catch::Contains("already exists"));
  std::ifstream kept(text);
  CHECK(std::string(std::istreambuf_iterator<char>(kept), {}) == "keep me");

  // overwrite: replaced whole.
  PersistentTensorDict::to_h5(TensorDict({{"reward", at::full({4}, 2.f)}, {"old", at::ones({4})}}, {4}), path,
                              replacing())
      .close();
  CHECK(reward_sum(path) == 8.f);
  PersistentTensorDict::from_schema({{"reward", {{}, at::kFloat}}}, {2}, path, replacing()).close();
  CHECK(reward_sum(path) == 0.f);
  CHECK_FALSE(PersistentTensorDict::from_h5(path, "r").contains("old"));
}

TEST_CASE("a new file is moved into place only where nothing is, in one step", "[h5]") {
  TempDir dir;
  const std::string from = dir / "new", to = dir / "there";
  std::ofstream(from) << "new";
  std::ofstream(to) << "old";
  // What a writer racing another sees at its rename: refused, both files kept as they were.
  CHECK_FALSE(tensordict::detail::move_new_file(from, to));
  std::ifstream old(to);
  CHECK(std::string(std::istreambuf_iterator<char>(old), {}) == "old");
  CHECK(std::filesystem::exists(from));
  std::filesystem::remove(to);
  CHECK(tensordict::detail::move_new_file(from, to));
  CHECK_FALSE(std::filesystem::exists(from));
  CHECK_THROWS_AS(tensordict::detail::move_new_file(dir / "missing", dir / "elsewhere"), StorageError);
}

TEST_CASE("from_schema preallocates non-tensor leaves as h5py reads them", "[h5]") {
  TempDir dir;
  const std::string path = dir / "mixed.h5";
  const NonTensorData per_row = NonTensorData::from_list(json::parse(R"(["a", "b", "c"])"), {3});
  PersistentTensorDict file = PersistentTensorDict::from_schema(
      {{"obs", {{2}, at::kFloat}}, {{"info", "task"}, ""}, {{"info", "note"}, nullptr}, {"name", per_row}}, {3}, path);
  CHECK(uniform_of(file, {"info", "task"}) == "''");
  CHECK(uniform_of(file, {"info", "note"}) == "None");
  CHECK(list_of(file, "name") == "['a', 'b', 'c']");
  // The writer's first batched write of per-row strings lands in its rows only.
  file.index_put_({at::indexing::Slice(1, 3)},
                  TensorDict({{"info", TensorDict({{"task", NonTensorData::from_list(json::parse(R"(["walk", "run"])"),
                                                                                     {2})}},
                                                  {2})}},
                             {2}));
  file.close();

  PersistentTensorDict back = PersistentTensorDict::from_h5(path, "r");
  CHECK(list_of(back, {"info", "task"}) == "['', 'walk', 'run']");
  CHECK(back.get("obs").sum().item<float>() == 0.f);
  back.close();
  const json::Value seen = h5py_read(path);
  REQUIRE(seen.find("info/task") != nullptr);
  CHECK(seen.find("info/task")->find("value")->python_str() == "['', 'walk', 'run']");
  REQUIRE(seen.find("name") != nullptr);
  CHECK(seen.find("name")->find("value")->python_str() == "['a', 'b', 'c']");
}

TEST_CASE("a malformed from_schema is refused before a file is written, naming the key", "[h5]") {
  TempDir dir;
  const std::string path = dir / "bad.h5";
  auto refused = [&](const LeafSpecs& schema, const std::string& what) {
    INFO(what);
    CHECK_THROWS_WITH(PersistentTensorDict::from_schema(schema, {4}, path), Catch::Contains(what) && Catch::Contains(path));
    CHECK(entries(dir.path()).empty());
  };
  refused({{"a", {{2}, at::kFloat}}, {"a", {{3}, at::kFloat}}}, "'a' is given twice");
  refused({{"a", {{2}, at::kFloat}}, {{"a", "b"}, {{3}, at::kFloat}}}, "is a leaf and a level of");
  refused({{"a", {{-1}, at::kFloat}}}, "every dim must be a size");
  refused({{"a", NonTensorData::from_list(json::parse(R"(["x", "y"])"), {2})}}, "not of the batch torch.Size([4])");
  CHECK_THROWS_AS(PersistentTensorDict::from_schema({{"a", {{-1}, at::kFloat}}}, {4}, path), ValueError);
}
