// HDF5 files from untrusted sources (issue 30, item 13): files on which libhdf5 1.10 itself
// crashes are refused with a StorageError naming them when opened with
// H5OpenOptions::untrusted, and the test process lives on; good files pass the check; the check
// process is killed when it hangs; links are listed in h5py's order without reading the group's
// creation property list.

#include "support/catch_torch.h"

#include <hdf5.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <thread>

#include <tensordict/backends/persistent.h>

#include "backends/hdf5/h5_preflight.h"
#include "backends/hdf5/h5py_support.h"

using namespace tensordict;
using memmap_test::TempDir;

namespace {

H5OpenOptions untrusted(std::chrono::milliseconds timeout = std::chrono::seconds(60)) {
  H5OpenOptions o;
  o.untrusted = true;
  o.check_timeout = timeout;
  return o;
}

PersistentTensorDict open_untrusted(const std::string& path, const std::string& mode = "r") {
  return PersistentTensorDict::from_h5(path, mode, std::nullopt, untrusted());
}

// Every file of fuzz/known-crashes/h5/: HDF5 1.10 crashes on each (h5py too).
std::vector<std::string> known_crashes() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(TENSORDICT_SOURCE_DIR) + "/fuzz/known-crashes/h5"))
    out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TensorDict untrusted_sample() {
  return TensorDict({{"obs", at::arange(12, at::kFloat).view({4, 3})}, {"n", {{"x", at::ones({4, 2}, at::kLong)}}}}, {4});
}

}  // namespace

TEST_CASE("files that crash libhdf5 are a StorageError naming them, not a dead process", "[h5][untrusted]") {
  const auto files = known_crashes();
  REQUIRE(files.size() >= 2);
  for (const std::string& path : files) {
    INFO(path);
    REQUIRE_THROWS_AS(open_untrusted(path), StorageError);
    // A crash of the check, or (where HDF5's error path frees a pointer that happens not to
    // crash the child) the failed call on the file's structure.
    CHECK_THROWS_WITH(open_untrusted(path), Catch::StartsWith(path + ": the HDF5 library c") &&
                                                Catch::Contains("it was not opened"));
  }
  // The crash the issue reported, by its signal.
  CHECK_THROWS_WITH(open_untrusted(files[0]), Catch::Contains("libhdf5-1.10-btree2-header-read: the HDF5 library "
                                                               "crashed (SIGSEGV)"));
}

TEST_CASE("good files pass the check and open as usual", "[h5][untrusted]") {
  TempDir dir;
  const std::string path = dir / "good.h5";
  PersistentTensorDict::to_h5(untrusted_sample(), path).close();
  CHECK(at::equal(open_untrusted(path).get({"n", "x"}), at::ones({4, 2}, at::kLong)));
  CHECK(open_untrusted(path, "r+").keys() == std::vector<NestedKey>{"obs", "n"});
  // h5py's files: every layout (chunked, compact, external, big-endian, never written), strings,
  // opaque scalars, nested groups, gzip.
  for (const char* kind : {"mixed", "layouts", "strings"}) {
    INFO(kind);
    const std::string py = dir / (std::string(kind) + ".h5");
    h5_test::h5py_write(kind, py);
    CHECK(open_untrusted(py).to_tensordict().keys(true) == PersistentTensorDict::from_h5(py).to_tensordict().keys(true));
  }
  // Modes that make a new file have nothing to check; a missing file is the usual error.
  CHECK(PersistentTensorDict::from_h5(dir / "new.h5", "w", std::nullopt, untrusted()).keys().empty());
  CHECK_THROWS_WITH(open_untrusted(dir / "missing.h5"), Catch::Contains("no such file"));
}

TEST_CASE("the check runs while this process has HDF5 files open, for reading and writing", "[h5][untrusted]") {
  TempDir dir;
  const std::string path = dir / "open.h5", other = dir / "other.h5";
  PersistentTensorDict::to_h5(untrusted_sample(), other).close();
  PersistentTensorDict writing = PersistentTensorDict::to_h5(untrusted_sample(), path);  // open "r+" here
  writing.set("late", at::zeros({4}));
  PersistentTensorDict reading = PersistentTensorDict::from_h5(other);
  CHECK(open_untrusted(other).keys() == reading.keys());
  // A file this process has open for writing is not checked (the process wrote it): the child
  // would share HDF5's open file, and could flush its pending writes.
  CHECK(open_untrusted(path).contains("late"));
  REQUIRE_THROWS_AS(open_untrusted(known_crashes()[0]), StorageError);
  // The open handles are untouched by the children.
  writing.set_("obs", at::full({4, 3}, 2.0));
  CHECK(at::equal(writing.get("obs"), at::full({4, 3}, 2.0)));
  CHECK(at::equal(reading.get("obs"), untrusted_sample().get("obs")));
}

TEST_CASE("threads inside HDF5 while the check forks do not hang the child", "[h5][untrusted]") {
  // The child is forked while the checking thread holds HDF5's lock: a reader thread can never
  // hold it at that instant and leave the child waiting on it forever.
  TempDir dir;
  const std::string path = dir / "shared.h5";
  PersistentTensorDict::to_h5(untrusted_sample(), path).close();
  std::atomic<bool> stop{false};
  std::atomic<int> reads{0};
  std::vector<std::thread> readers;
  for (int t = 0; t < 2; ++t) {
    readers.emplace_back([&] {
      PersistentTensorDict td = PersistentTensorDict::from_h5(path);
      while (!stop) {
        (void)td.get("obs");
        ++reads;
      }
    });
  }
  int checked = 0;
  for (int i = 0; i < 20; ++i) {
    PersistentTensorDict::from_h5(path, "r", std::nullopt, untrusted(std::chrono::seconds(20)));
    ++checked;
  }
  stop = true;
  for (auto& t : readers) t.join();
  CHECK(checked == 20);
  CHECK(reads > 0);
}

TEST_CASE("a check that hangs is killed and reported, and so is one that dies", "[h5][untrusted][errors]") {
  const auto start = std::chrono::steady_clock::now();
  auto hang = [](const char*) -> std::string {
    for (;;) ::pause();
  };
  REQUIRE_THROWS_AS(h5::run_contained("hang.h5", std::chrono::milliseconds(300), hang), StorageError);
  CHECK(std::chrono::steady_clock::now() - start < std::chrono::seconds(10));
  CHECK_THROWS_WITH(h5::run_contained("hang.h5", std::chrono::milliseconds(300), hang),
                    Catch::StartsWith("hang.h5: the check of the HDF5 file timed out after 0.3 s"));
  auto abort_walk = [](const char*) -> std::string { ::abort(); };
  CHECK_THROWS_WITH(h5::run_contained("abort.h5", std::chrono::seconds(20), abort_walk),
                    Catch::StartsWith("abort.h5: the HDF5 library crashed (SIGABRT)"));
  auto exit_walk = [](const char*) -> std::string { ::_exit(7); };
  CHECK_THROWS_WITH(h5::run_contained("exit.h5", std::chrono::seconds(20), exit_walk),
                    Catch::Contains("exit.h5: the check of the HDF5 file ended before it finished (exit status 7"));
  // A walk that reports a failure refuses the file with it; a clean one passes.
  CHECK_THROWS_WITH(h5::run_contained("bad.h5", std::chrono::seconds(20), [](const char*) { return std::string("/g: H5Literate failed"); }),
                    Catch::StartsWith("bad.h5: the HDF5 library cannot read the file's structure (/g: H5Literate failed)"));
  CHECK_NOTHROW(h5::run_contained("fine.h5", std::chrono::seconds(20), [](const char*) { return std::string(); }));
}

TEST_CASE("groups that track link creation order list in it, indexed or not, as h5py lists them", "[h5]") {
  // h5py lists a group in creation order when it tracks it (H5P_CRT_ORDER_TRACKED), with or
  // without the index; keys follow, learnt without reading the group's creation property list.
  TempDir dir;
  const std::string path = dir / "tracked.h5";
  {
    const hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    const hid_t gcpl = H5Pcreate(H5P_GROUP_CREATE);
    H5Pset_link_creation_order(gcpl, H5P_CRT_ORDER_TRACKED);
    const hid_t g = H5Gcreate2(file, "g", H5P_DEFAULT, gcpl, H5P_DEFAULT);
    const hsize_t dims[1] = {2};
    const hid_t space = H5Screate_simple(1, dims, nullptr);
    for (const char* name : {"b", "a", "c"}) H5Dclose(H5Dcreate2(g, name, H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT));
    H5Sclose(space);
    H5Gclose(g);
    H5Pclose(gcpl);
    H5Fclose(file);
  }
  PersistentTensorDict td = PersistentTensorDict::from_h5(path);
  CHECK(td.get_tensordict("g").keys() == std::vector<NestedKey>{"b", "a", "c"});
  auto [code, listed] = memmap_test::run("/usr/bin/python3 -c \"import h5py, sys; print(list(h5py.File(sys.argv[1])['g']))\" " +
                                          memmap_test::quoted(path) + " 2>&1");
  CHECK(code == 0);
  CHECK(listed == "['b', 'a', 'c']\n");
}
