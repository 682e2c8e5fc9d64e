// PersistentTensorDict (issue 14) against hand-written HDF5 C code doing the same reads and
// writes. The file is 1 GiB: one float32 dataset "obs" of [262144, 1024], contiguous, written
// once at startup into a scratch directory (removed at exit). Reads are served from the page
// cache after the first pass, on both sides.
//
//   OpenSlice/<rows>   open the file, read rows [0, rows), close (rows 64, 4096, 65536: growth)
//   Open, Slice/64     its two halves: open + close alone; the read on a file kept open
//   RandomRows/<rows>  an unsorted index tensor of distinct rows on an open file; the floor
//                      sorts the rows, selects them as one hyperslab union, reads, and puts
//                      the rows back in the asked order (what h5py users write by hand)
//   FullRead           the whole 1 GiB leaf
//   ToH5               to_h5 of fixture B (3 groups x 10 float32 [4096, 256], 120 MiB); the
//                      floor creates the same groups and datasets and writes them
//   OpenUntrusted/<n>  from_h5 with H5OpenOptions::untrusted (the file checked in a child
//                      process first) of a file of n datasets; the "floor" is from_h5 of the
//                      same file without the check, so the ratio is what the check costs.
//                      n = 1: the 1 GiB file; 3: a small file (3 datasets in 2 groups); 1000:
//                      fixture B's layout with 1000 small datasets in 10 groups
//   Keys/<n>           keys() of an open file whose root holds n small datasets (n = 100, 1000,
//                      10000: growth); the floor lists the links with H5Literate and asks each
//                      one's object type from its header (H5Oget_info), the check keys() makes
//                      that a link holds an entry (h5py's keys() lists names alone: the script)
//   LeafKeys/<n>       keys(true, true) of the same files: leaves only, so each dataset's
//                      datatype is read to tell tensors from strings; the floor opens each
//                      dataset by name from its group and reads its datatype class
//
// Run: scripts/bench.sh (the h5 table), or build-release/bench/h5_bench. h5py's times for the
// same reads: /usr/bin/python3 bench/h5_bench_h5py.py (by hand).

#include <benchmark/benchmark.h>

#include <hdf5.h>
#include <stdlib.h>

#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/backends/persistent.h>
#include <tensordict/tensordict.h>

namespace {

namespace fs = std::filesystem;
using at::indexing::Slice;
using tensordict::PersistentTensorDict;
using tensordict::TensorDict;

constexpr int64_t kRows = 262144;
constexpr int64_t kCols = 1024;

struct Scratch {
  std::string root;
  std::string big;  // the 1 GiB file
  int next = 0;
  Scratch() {
    std::string tmpl = (fs::temp_directory_path() / "td_h5_bench_XXXXXX").string();
    root = ::mkdtemp(tmpl.data());
    big = root + "/big.h5";
    // Written through the library in blocks of 4096 rows (data, not HDF5's fill value).
    TensorDict td = PersistentTensorDict::from_schema({{"obs", {{kCols}, at::kFloat}}}, {kRows}, big);
    at::manual_seed(0);
    for (int64_t r = 0; r < kRows; r += 4096) td.index({Slice(r, r + 4096)}).set_("obs", at::randn({4096, kCols}));
    PersistentTensorDict::from(td).close();
  }
  ~Scratch() { fs::remove_all(root); }
  std::string fresh() { return root + "/" + std::to_string(next++) + ".h5"; }
};

Scratch& scratch() {
  static Scratch s;
  return s;
}

// ---- open + Slice(0, rows) + read ----------------------------------------------------------------

void BM_OpenSlice_Cpp(benchmark::State& state) {
  const std::string& path = scratch().big;
  const int64_t rows = state.range(0);
  for (auto _ : state) {
    TensorDict td = PersistentTensorDict::from_h5(path, "r");
    at::Tensor t = td.index({Slice(0, rows)}).get("obs");
    benchmark::DoNotOptimize(t.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * rows * kCols * 4);
}

// Rows [first, first + rows) of the open dataset into a new tensor.
at::Tensor read_rows(hid_t ds, hsize_t first, hsize_t rows) {
  at::Tensor out = at::empty({static_cast<int64_t>(rows), kCols});
  hid_t space = H5Dget_space(ds);
  const hsize_t start[2] = {first, 0}, count[2] = {rows, static_cast<hsize_t>(kCols)};
  H5Sselect_hyperslab(space, H5S_SELECT_SET, start, nullptr, count, nullptr);
  hid_t mem = H5Screate_simple(2, count, nullptr);
  H5Dread(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, out.data_ptr());
  H5Sclose(mem);
  H5Sclose(space);
  return out;
}

void BM_OpenSlice_Floor(benchmark::State& state) {
  const std::string& path = scratch().big;
  const auto rows = static_cast<hsize_t>(state.range(0));
  for (auto _ : state) {
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    hid_t ds = H5Dopen2(file, "/obs", H5P_DEFAULT);
    at::Tensor t = read_rows(ds, 0, rows);
    benchmark::DoNotOptimize(t.data_ptr());
    H5Dclose(ds);
    H5Fclose(file);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<int64_t>(rows) * kCols * 4);
}

// ---- the two halves of OpenSlice: opening alone, and the read on an open file --------------------

void BM_Open_Cpp(benchmark::State& state) {
  const std::string& path = scratch().big;
  for (auto _ : state) {
    PersistentTensorDict td = PersistentTensorDict::from_h5(path, "r");
    benchmark::DoNotOptimize(td.impl());
  }
}

void BM_Open_Floor(benchmark::State& state) {
  const std::string& path = scratch().big;
  for (auto _ : state) {
    hid_t file = H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
    benchmark::DoNotOptimize(file);
    H5Fclose(file);
  }
}

void BM_Slice_Cpp(benchmark::State& state) {
  TensorDict td = PersistentTensorDict::from_h5(scratch().big, "r");
  const int64_t rows = state.range(0);
  for (auto _ : state) {
    at::Tensor t = td.index({Slice(0, rows)}).get("obs");
    benchmark::DoNotOptimize(t.data_ptr());
  }
}

void BM_Slice_Floor(benchmark::State& state) {
  hid_t file = H5Fopen(scratch().big.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  const auto rows = static_cast<hsize_t>(state.range(0));
  for (auto _ : state) {
    hid_t ds = H5Dopen2(file, "/obs", H5P_DEFAULT);  // the dataset is opened by name each time on both sides
    at::Tensor t = read_rows(ds, 0, rows);
    benchmark::DoNotOptimize(t.data_ptr());
    H5Dclose(ds);
  }
  H5Fclose(file);
}

// ---- a random index tensor of distinct rows ----------------------------------------------------

at::Tensor random_rows(int64_t n) {
  at::manual_seed(42);
  return at::randperm(kRows, at::kLong).slice(0, 0, n);  // unsorted, no repeats
}

void BM_RandomRows_Cpp(benchmark::State& state) {
  TensorDict td = PersistentTensorDict::from_h5(scratch().big, "r");
  const at::Tensor idx = random_rows(state.range(0));
  for (auto _ : state) {
    at::Tensor t = td.index({idx}).get("obs");
    benchmark::DoNotOptimize(t.data_ptr());
  }
}

void BM_RandomRows_Floor(benchmark::State& state) {
  hid_t file = H5Fopen(scratch().big.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t ds = H5Dopen2(file, "/obs", H5P_DEFAULT);
  const at::Tensor idx = random_rows(state.range(0));
  const auto n = static_cast<hsize_t>(idx.numel());
  for (auto _ : state) {
    // HDF5 reads a selection in file order: sort, read, then scatter back to the asked order.
    auto [sorted, order] = idx.sort();
    const int64_t* rows = sorted.data_ptr<int64_t>();
    hid_t space = H5Dget_space(ds);
    H5Sselect_none(space);
    const hsize_t count[2] = {1, static_cast<hsize_t>(kCols)};
    for (hsize_t i = 0; i < n; ++i) {
      const hsize_t start[2] = {static_cast<hsize_t>(rows[i]), 0};
      H5Sselect_hyperslab(space, H5S_SELECT_OR, start, nullptr, count, nullptr);
    }
    const hsize_t mem_dims[2] = {n, static_cast<hsize_t>(kCols)};
    hid_t mem = H5Screate_simple(2, mem_dims, nullptr);
    at::Tensor block = at::empty({static_cast<int64_t>(n), kCols});
    H5Dread(ds, H5T_NATIVE_FLOAT, mem, space, H5P_DEFAULT, block.data_ptr());
    H5Sclose(mem);
    H5Sclose(space);
    at::Tensor out = at::empty_like(block).index_copy_(0, order, block);
    benchmark::DoNotOptimize(out.data_ptr());
  }
  H5Dclose(ds);
  H5Fclose(file);
}

// ---- the whole leaf ------------------------------------------------------------------------------

void BM_FullRead_Cpp(benchmark::State& state) {
  TensorDict td = PersistentTensorDict::from_h5(scratch().big, "r");
  for (auto _ : state) {
    at::Tensor t = td.get("obs");
    benchmark::DoNotOptimize(t.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 4);
}

void BM_FullRead_Floor(benchmark::State& state) {
  hid_t file = H5Fopen(scratch().big.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t ds = H5Dopen2(file, "/obs", H5P_DEFAULT);
  for (auto _ : state) {
    at::Tensor t = at::empty({kRows, kCols});
    H5Dread(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr());
    benchmark::DoNotOptimize(t.data_ptr());
  }
  state.SetBytesProcessed(state.iterations() * kRows * kCols * 4);
  H5Dclose(ds);
  H5Fclose(file);
}

// ---- to_h5 of fixture B --------------------------------------------------------------------------

struct FixtureB {
  std::vector<std::pair<std::string, std::vector<std::pair<std::string, at::Tensor>>>> groups;
  FixtureB() {
    at::manual_seed(1);
    for (int g = 0; g < 3; ++g) {
      groups.emplace_back("g" + std::to_string(g), std::vector<std::pair<std::string, at::Tensor>>{});
      for (int x = 0; x < 10; ++x) groups.back().second.emplace_back("x" + std::to_string(x), at::randn({4096, 256}));
    }
  }
  TensorDict wrap() const {
    std::vector<TensorDict::Item> items;
    for (const auto& [name, leaves] : groups) {
      std::vector<TensorDict::Item> level;
      for (const auto& [key, t] : leaves) level.emplace_back(key, t);
      items.emplace_back(name, tensordict::EntryInit(level));
    }
    return TensorDict(items, {4096});
  }
};

const FixtureB& fixture_b() {
  static FixtureB b;
  return b;
}

void BM_ToH5_Cpp(benchmark::State& state) {
  const TensorDict td = fixture_b().wrap();
  for (auto _ : state) {
    const std::string path = scratch().fresh();
    PersistentTensorDict::to_h5(td, path).close();
    state.PauseTiming();
    fs::remove(path);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * 30 * 4096 * 256 * 4);
}

void BM_ToH5_Floor(benchmark::State& state) {
  const FixtureB& b = fixture_b();
  for (auto _ : state) {
    const std::string path = scratch().fresh();
    hid_t file = H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT);
    for (const auto& [name, leaves] : b.groups) {
      hid_t group = H5Gcreate2(file, name.c_str(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
      for (const auto& [key, t] : leaves) {
        const hsize_t dims[2] = {4096, 256};
        hid_t space = H5Screate_simple(2, dims, nullptr);
        hid_t ds = H5Dcreate2(group, key.c_str(), H5T_NATIVE_FLOAT, space, H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT);
        H5Dwrite(ds, H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, t.data_ptr());
        H5Dclose(ds);
        H5Sclose(space);
      }
      H5Gclose(group);
    }
    H5Fclose(file);
    state.PauseTiming();
    fs::remove(path);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * 30 * 4096 * 256 * 4);
}

// ---- the untrusted-file check -------------------------------------------------------------------

// The file OpenUntrusted/<n> opens (written once).
const std::string& untrusted_file(int64_t datasets) {
  static std::map<int64_t, std::string> files;
  auto it = files.find(datasets);
  if (it != files.end()) return it->second;
  if (datasets == 1) return files.emplace(datasets, scratch().big).first->second;
  const std::string path = scratch().fresh();
  std::vector<TensorDict::Item> groups;
  const int64_t per_group = datasets == 3 ? 1 : datasets / 10;
  for (int64_t g = 0; g < (datasets == 3 ? 2 : 10); ++g) {
    std::vector<TensorDict::Item> leaves;
    for (int64_t d = 0; d < per_group; ++d) leaves.emplace_back("x" + std::to_string(d), at::ones({16, 4}));
    groups.emplace_back("g" + std::to_string(g), tensordict::EntryInit(leaves));
  }
  if (datasets == 3) groups.emplace_back("obs", at::ones({16, 8}));
  PersistentTensorDict::to_h5(TensorDict(groups, {16}), path).close();
  return files.emplace(datasets, path).first->second;
}

// ---- listing keys -------------------------------------------------------------------------------

// The file Keys/<n> and LeafKeys/<n> list (written once): n datasets [16, 4] at the root.
const std::string& keys_file(int64_t datasets) {
  static std::map<int64_t, std::string> files;
  auto it = files.find(datasets);
  if (it != files.end()) return it->second;
  std::vector<TensorDict::Item> leaves;
  for (int64_t d = 0; d < datasets; ++d) leaves.emplace_back("x" + std::to_string(d), at::ones({16, 4}));
  const std::string path = scratch().fresh();
  PersistentTensorDict::to_h5(TensorDict(leaves, {16}), path).close();
  return files.emplace(datasets, path).first->second;
}

void BM_Keys_Cpp(benchmark::State& state) {
  TensorDict td = PersistentTensorDict::from_h5(keys_file(state.range(0)), "r");
  for (auto _ : state) benchmark::DoNotOptimize(td.keys());
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

herr_t collect_link(hid_t, const char* name, const H5L_info_t*, void* out) {
  static_cast<std::vector<std::string>*>(out)->emplace_back(name);
  return 0;
}

// The link names of the root, in creation order.
std::vector<std::string> root_links(hid_t root) {
  std::vector<std::string> names;
  hsize_t idx = 0;
  H5Literate(root, H5_INDEX_CRT_ORDER, H5_ITER_INC, &idx, collect_link, &names);
  return names;
}

// A floor listing the root of keys_file(n) on a file kept open: `keep(root, name)` says whether
// a link is a key.
template <typename Keep>
void list_root_by_hand(benchmark::State& state, Keep keep) {
  hid_t file = H5Fopen(keys_file(state.range(0)).c_str(), H5F_ACC_RDONLY, H5P_DEFAULT);
  hid_t root = H5Gopen2(file, "/", H5P_DEFAULT);
  for (auto _ : state) {
    std::vector<std::string> keys;
    for (std::string& name : root_links(root)) {
      if (keep(root, name.c_str())) keys.push_back(std::move(name));
    }
    benchmark::DoNotOptimize(keys);
  }
  state.SetItemsProcessed(state.iterations() * state.range(0));
  H5Gclose(root);
  H5Fclose(file);
}

void BM_Keys_Floor(benchmark::State& state) {
  list_root_by_hand(state, [](hid_t root, const char* name) {
#if H5_VERSION_GE(1, 12, 0)
    H5O_info2_t info;
    const herr_t status = H5Oget_info_by_name3(root, name, &info, H5O_INFO_BASIC, H5P_DEFAULT);
#else
    H5O_info_t info;
    const herr_t status = H5Oget_info_by_name2(root, name, &info, H5O_INFO_BASIC, H5P_DEFAULT);
#endif
    return status >= 0 && (info.type == H5O_TYPE_GROUP || info.type == H5O_TYPE_DATASET);
  });
}

void BM_LeafKeys_Cpp(benchmark::State& state) {
  TensorDict td = PersistentTensorDict::from_h5(keys_file(state.range(0)), "r");
  for (auto _ : state) benchmark::DoNotOptimize(td.keys(true, true));
  state.SetItemsProcessed(state.iterations() * state.range(0));
}

void BM_LeafKeys_Floor(benchmark::State& state) {
  list_root_by_hand(state, [](hid_t root, const char* name) {
    hid_t ds = H5Dopen2(root, name, H5P_DEFAULT);
    hid_t type = H5Dget_type(ds);
    const bool leaf = H5Tget_class(type) != H5T_STRING;
    H5Tclose(type);
    H5Dclose(ds);
    return leaf;
  });
}

void BM_OpenUntrusted_Cpp(benchmark::State& state) {
  const std::string& path = untrusted_file(state.range(0));
  tensordict::H5OpenOptions open;
  open.untrusted = true;
  for (auto _ : state) {
    PersistentTensorDict td = PersistentTensorDict::from_h5(path, "r", std::nullopt, open);
    benchmark::DoNotOptimize(td.impl());
  }
}

void BM_OpenUntrusted_Floor(benchmark::State& state) {
  const std::string& path = untrusted_file(state.range(0));
  for (auto _ : state) {
    PersistentTensorDict td = PersistentTensorDict::from_h5(path, "r");
    benchmark::DoNotOptimize(td.impl());
  }
}

}  // namespace

BENCHMARK(BM_OpenSlice_Cpp)->Arg(64)->Arg(4096)->Arg(65536)->UseRealTime();
BENCHMARK(BM_OpenSlice_Floor)->Arg(64)->Arg(4096)->Arg(65536)->UseRealTime();
BENCHMARK(BM_Open_Cpp)->UseRealTime();
BENCHMARK(BM_Open_Floor)->UseRealTime();
BENCHMARK(BM_Slice_Cpp)->Arg(64)->UseRealTime();
BENCHMARK(BM_Slice_Floor)->Arg(64)->UseRealTime();
BENCHMARK(BM_RandomRows_Cpp)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->UseRealTime();
BENCHMARK(BM_RandomRows_Floor)->Arg(64)->Arg(256)->Arg(1024)->Arg(4096)->UseRealTime();
BENCHMARK(BM_FullRead_Cpp)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_FullRead_Floor)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ToH5_Cpp)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_ToH5_Floor)->UseRealTime()->Unit(benchmark::kMillisecond);
BENCHMARK(BM_OpenUntrusted_Cpp)->Arg(1)->Arg(3)->Arg(1000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_OpenUntrusted_Floor)->Arg(1)->Arg(3)->Arg(1000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Keys_Cpp)->Arg(100)->Arg(1000)->Arg(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_Keys_Floor)->Arg(100)->Arg(1000)->Arg(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LeafKeys_Cpp)->Arg(100)->Arg(1000)->Arg(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_LeafKeys_Floor)->Arg(100)->Arg(1000)->Arg(10000)->UseRealTime()->Unit(benchmark::kMicrosecond);
