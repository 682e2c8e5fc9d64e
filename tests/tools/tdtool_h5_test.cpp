// tdtool on HDF5 files: info, and convert between memmap directories and .h5 files.

#include "support/catch_torch.h"

#include <fstream>

#include <tensordict/backends/persistent.h>

#include "backends/memmap/support.h"

using namespace tensordict;
using namespace memmap_test;

namespace {
std::pair<int, std::string> run_tdtool(const std::string& args) {
  return run(quoted(TDTOOL_PATH) + " " + args + " 2>&1");
}

// Same keys (in order), batch sizes, leaves and non-tensor values.
void check_same_tree(const TensorDict& a, const TensorDict& b) {
  CHECK(a.keys(true) == b.keys(true));
  CHECK(a.batch_size() == b.batch_size());
  for (auto& [key, entry] : a.items(true)) {
    INFO(key.join("."));
    if (entry.is_tensor()) {
      CHECK(at::equal(b.get(key), entry.tensor()));
    } else if (entry.is_tensordict()) {
      CHECK(b.get_tensordict(key).batch_size() == entry.tensordict().batch_size());
    } else {
      CHECK(b.get_non_tensor(key) == entry.non_tensor());
    }
  }
}
}  // namespace

TEST_CASE("tdtool converts memmap directories to .h5 files and back", "[tdtool][hdf5]") {
  TempDir dir;
  for (const char* fixture : {"nested", "non_tensor", "scalars"}) {
    INFO(fixture);
    const std::string src = fixtures() + "/" + fixture;
    const std::string h5 = dir / (std::string(fixture) + ".h5");
    auto [code, out] = run_tdtool("convert " + quoted(src) + " " + quoted(h5));  // by the .h5 name
    REQUIRE(code == 0);
    CHECK(out.empty());
    const TensorDict original = load_memmap(src);
    check_same_tree(original, PersistentTensorDict::from_h5(h5, "r"));

    const std::string back = dir / (std::string(fixture) + "_back");
    std::tie(code, out) = run_tdtool("convert " + quoted(h5) + " " + quoted(back));  // a directory
    REQUIRE(code == 0);
    check_same_tree(original, load_memmap(back));
  }
  // --to names the format whatever the destination's name.
  const std::string plain = dir / "plain";
  auto [code, out] = run_tdtool("convert " + quoted(fixtures() + "/nested") + " " + quoted(plain) + " --to h5");
  REQUIRE(code == 0);
  CHECK(PersistentTensorDict::is_persistent(PersistentTensorDict::from_h5(plain, "r")));
}

TEST_CASE("tdtool info reads .h5 files, nested batch sizes included", "[tdtool][hdf5]") {
  TempDir dir;
  const std::string path = dir / "data.h5";
  TensorDict td({{"obs", at::arange(6, at::kFloat).view({3, 2})}, {"n", {{"x", at::ones({3, 4}, at::kLong)}}}}, {3});
  td.get_tensordict("n").set_batch_size({3, 4});
  PersistentTensorDict::to_h5(td, path).close();
  auto [code, out] = run_tdtool("info " + quoted(path) + " --stats");
  CHECK(code == 0);
  CHECK_THAT(out, Catch::StartsWith(PersistentTensorDict::from_h5(path, "r").repr() + "\n"));
  CHECK_THAT(out, Catch::Contains("PersistentTensorDict(") && Catch::Contains("batch_size=torch.Size([3, 4])"));
  CHECK_THAT(out, Catch::Contains("stats:\n  obs: sum=15, min=0, max=5\n  n.x: sum=12, min=1, max=1\n"));
}

TEST_CASE("tdtool reports bad .h5 input on one line", "[tdtool][hdf5][errors]") {
  TempDir dir;
  const std::string fake = dir / "fake.h5";
  std::ofstream(fake) << "not an HDF5 file";
  auto [code, out] = run_tdtool("info " + quoted(fake));
  CHECK(code == 1);
  CHECK_THAT(out, Catch::Contains("fake.h5") && Catch::Contains("not a stored tensordict"));
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);

  // A file cut short after its signature: HDF5 cannot open it, and the error names the file.
  const std::string good = dir / "good.h5";
  PersistentTensorDict::to_h5(TensorDict({{"a", at::ones({64, 64})}}, {64}), good).close();
  const std::string cut = dir / "cut.h5";
  fs::copy_file(good, cut);
  fs::resize_file(cut, 600);
  std::tie(code, out) = run_tdtool("info " + quoted(cut));
  CHECK(code == 1);
  CHECK_THAT(out, Catch::StartsWith("tdtool: error: ") && Catch::Contains("cut.h5"));
  CHECK(std::count(out.begin(), out.end(), '\n') == 1);

  // Keys HDF5 cannot name ('a/b', '..'): refused, naming the key, and nothing is left behind.
  std::tie(code, out) = run_tdtool("convert " + quoted(fixtures() + "/encoded_keys") + " " + quoted(dir / "keys.h5"));
  CHECK(code == 1);
  CHECK_THAT(out, Catch::Contains("keys.h5") && Catch::Contains("cannot name an HDF5 object"));
  CHECK_FALSE(fs::exists(dir / "keys.h5"));
  CHECK(fs::is_empty(dir.path()) == false);
  for (const auto& e : fs::directory_iterator(dir.path())) CHECK(e.path().string().find(".tmp-") == std::string::npos);

  std::tie(code, out) = run_tdtool("convert " + quoted(good) + " " + quoted(dir / "x") + " --to zip");
  CHECK(code == 1);
  CHECK_THAT(out, Catch::Contains("unknown format 'zip' (known: memmap, h5)"));
}

TEST_CASE("tdtool refuses files that crash libhdf5, naming them, and stays alive", "[tdtool][hdf5][errors]") {
  // Each file of fuzz/known-crashes/h5/ kills any process that lists it with libhdf5 1.10 (h5py
  // too); tdtool checks HDF5 input in a child process first.
  TempDir dir;
  std::vector<std::string> files;
  for (const auto& e : fs::directory_iterator(std::string(TENSORDICT_SOURCE_DIR) + "/fuzz/known-crashes/h5"))
    files.push_back(e.path().string());
  REQUIRE(files.size() >= 2);
  for (const std::string& path : files) {
    INFO(path);
    auto [code, out] = run_tdtool("info " + quoted(path));
    CHECK(code == 1);  // not 139: no death by SIGSEGV
    CHECK_THAT(out, Catch::StartsWith("tdtool: error: " + path + ": the HDF5 library c") &&
                        Catch::Contains("it was not opened"));
    CHECK(std::count(out.begin(), out.end(), '\n') == 1);
    const std::string dst = dir / "out";
    std::tie(code, out) = run_tdtool("convert " + quoted(path) + " " + quoted(dst));
    CHECK(code == 1);
    CHECK_THAT(out, Catch::Contains(path));
    CHECK_FALSE(fs::exists(dst));
  }
  auto [code, out] = run_tdtool("info " + quoted(std::string(TENSORDICT_SOURCE_DIR) +
                                             "/fuzz/known-crashes/h5/libhdf5-1.10-btree2-header-read"));
  CHECK_THAT(out, Catch::Contains("the HDF5 library crashed (SIGSEGV) while reading the file"));
}
