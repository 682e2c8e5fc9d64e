#pragma once
// Writes rich(), lazy() and strings() in every stored format Python tensordict v0.14 reads: what
// write_cpp_fixtures hands to check_cpp_written.py, and what v014_fixtures_test round-trips.

#include <string>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/memmap.h>
#ifdef TENSORDICT_TEST_HDF5
#include <tensordict/backends/persistent.h>
#endif
#ifdef TENSORDICT_TEST_REDIS
#include <tensordict/backends/store.h>
#endif

#include "interop/rich_fixture.h"

namespace interop {

inline void write_files(const std::string& dir) {
  tensordict::memmap(rich(), dir + "/memmap_rich");
  tensordict::memmap(lazy(), dir + "/memmap_lazy");
  tensordict::memmap(strings(), dir + "/memmap_strings");
  tensordict::ConsolidateOptions options;
  options.filename = dir + "/consolidated_rich.bin";
  tensordict::consolidate(rich(), options);
#ifdef TENSORDICT_TEST_HDF5
  tensordict::PersistentTensorDict::to_h5(rich(Format::h5), dir + "/h5_rich.h5");
#endif
}

#ifdef TENSORDICT_TEST_REDIS
/// The store `td_id` (Python's default namespace "tensordict") on the server at `unix_socket`.
inline void write_store(const std::string& unix_socket, const std::string& td_id) {
  tensordict::StoreOptions options;
  options.unix_socket = unix_socket;
  options.td_id = td_id;
  tensordict::TensorDictStore::from_tensordict(rich(Format::store), options);
}
#endif

}  // namespace interop
