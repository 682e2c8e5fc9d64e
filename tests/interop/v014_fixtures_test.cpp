// What Python tensordict v0.14 itself wrote (tests/data/python-tensordict/v0.14, made by
// write_v014_fixtures.py through run_v014.sh) is read here with every key, batch size, shape,
// dtype and value; and what this port writes for v0.14 (write_fixtures.h, which v0.14 read back
// in check_cpp_written.py) round-trips here, so the writer stays what was checked.

#include "support/catch_torch.h"

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/backends/memmap.h>
#ifdef TENSORDICT_TEST_HDF5
#include <tensordict/backends/persistent.h>
#endif
#ifdef TENSORDICT_TEST_REDIS
#include <tensordict/backends/store.h>

#include "support/redis_server.h"
#endif

#include "interop/rich_fixture.h"
#include "interop/write_fixtures.h"
#include "support/temp_dir.h"

using namespace tensordict;

namespace {

const std::string kV014 = std::string(TENSORDICT_SOURCE_DIR) + "/tests/data/python-tensordict/v0.14";

std::vector<std::string> sorted_leaf_keys(const TensorDict& td) {
  std::vector<std::string> keys;
  for (const auto& [key, entry] : td.items(/*include_nested=*/true))
    if (!entry.is_tensordict()) keys.push_back(key.repr());
  std::sort(keys.begin(), keys.end());
  return keys;
}

/// Every tensor and non-tensor leaf of `expected` is in `got` with its shape, dtype and values,
/// and `got` has no other; with `nested_batches`, nested levels have the same batch sizes too (an
/// HDF5 file stores none: they are inferred from the datasets).
void require_same(const TensorDict& got, const TensorDict& expected, bool nested_batches = true) {
  CHECK(got.batch_size() == expected.batch_size());
  REQUIRE(sorted_leaf_keys(got) == sorted_leaf_keys(expected));
  for (const auto& [key, entry] : expected.items(/*include_nested=*/true)) {
    INFO("key " << key.repr());
    if (entry.is_tensordict()) {
      if (nested_batches) CHECK(got.get_tensordict(key).batch_size() == expected.get_tensordict(key).batch_size());
    } else if (entry.is_non_tensor()) {
      CHECK(got.get_non_tensor(key).tolist() == expected.get_non_tensor(key).tolist());
    } else {
      const at::Tensor have = got.get(key);
      const at::Tensor want = expected.get(key);
      CHECK(have.scalar_type() == want.scalar_type());
      REQUIRE(have.sizes() == want.sizes());
      CHECK(at::equal(have, want));
    }
  }
}

void require_lazy(const TensorDict& got) {
  REQUIRE(LazyStackedTensorDict::is_lazy_stack(got));
  const LazyStackedTensorDict stack = LazyStackedTensorDict::from(got);
  CHECK(stack.stack_dim() == 0);
  REQUIRE(stack.members().size() == interop::kLazyWidths.size());
  for (size_t k = 0; k < stack.members().size(); ++k) {
    INFO("member " << k);
    require_same(stack.members()[k], interop::lazy_member(static_cast<int64_t>(k)));
  }
}

}  // namespace

TEST_CASE("v0.14 memmap: every dtype at nested levels with non-tensor values", "[interop][v014]") {
  TensorDict td = load_memmap(kV014 + "/memmap_rich");
  require_same(td, interop::rich());
  // A 0-size leaf has no file: its shape comes from meta.json.
  CHECK(td.get({"nested", "empty"}).sizes() == c10::IntArrayRef({3, 2, 0}));
}

TEST_CASE("v0.14 memmap: a ragged lazy stack with a string per member", "[interop][v014]") {
  require_lazy(load_memmap(kV014 + "/memmap_lazy"));
}

TEST_CASE("v0.14 memmap: a stack of one string per element", "[interop][v014]") {
  TensorDict td = load_memmap(kV014 + "/memmap_strings");
  require_same(td, interop::strings());
  CHECK(td.get_non_tensor("s").is_stack());
}

TEST_CASE("v0.14 consolidated file", "[interop][v014]") {
  require_same(from_consolidated(kV014 + "/consolidated_rich.bin"), interop::rich());
}

#ifdef TENSORDICT_TEST_HDF5
TEST_CASE("v0.14 HDF5 file", "[interop][v014]") {
  PersistentTensorDict h5 = PersistentTensorDict::from_h5(kV014 + "/h5_rich.h5", "r");
  require_same(h5.to_tensordict(), interop::rich(interop::Format::h5), /*nested_batches=*/false);
}
#endif

#ifdef TENSORDICT_TEST_REDIS
TEST_CASE("v0.14 Redis store, loaded from the server's saved database", "[interop][v014]") {
  testing_support::TempDir dir("td_v014_store");
  std::filesystem::copy_file(kV014 + "/store_rich.rdb", dir.path("store_rich.rdb"));
  testing_support::RedisServer server({"--dir", dir.path(), "--dbfilename", "store_rich.rdb"});
  StoreOptions options = testing_support::store_options(server);
  TensorDictStore store = TensorDictStore::from_store("v014-rich", options);
  require_same(store, interop::rich(interop::Format::store));
}
#endif

TEST_CASE("what this port writes for v0.14 reads back the same", "[interop]") {
  testing_support::TempDir dir("td_v014_written");
  interop::write_files(dir.path());
  require_same(load_memmap(dir.path("memmap_rich")), interop::rich());
  require_lazy(load_memmap(dir.path("memmap_lazy")));
  require_same(load_memmap(dir.path("memmap_strings")), interop::strings());
  require_same(from_consolidated(dir.path("consolidated_rich.bin")), interop::rich());
#ifdef TENSORDICT_TEST_HDF5
  require_same(PersistentTensorDict::from_h5(dir.path("h5_rich.h5"), "r").to_tensordict(),
               interop::rich(interop::Format::h5), /*nested_batches=*/false);
#endif
#ifdef TENSORDICT_TEST_REDIS
  testing_support::RedisServer server;
  interop::write_store(server.socket(), "cpp-rich");
  require_same(TensorDictStore::from_store("cpp-rich", testing_support::store_options(server)),
               interop::rich(interop::Format::store));
#endif
}
