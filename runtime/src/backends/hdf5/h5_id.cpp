#include "backends/hdf5/h5_id.h"

#include <atomic>
#include <cstdlib>
#include <mutex>

#include <tensordict/errors.h>

namespace tensordict {
namespace h5 {

namespace {
// Set when HDF5 could not release an id: a file whose close failed (its final flush hit a full
// disk) stays half-closed, and HDF5 1.10's own cleanup at exit crashes on it.
std::atomic<bool> release_failed{false};

// What HDF5's exit handler does (close what is open, flushing it), unless a close failed.
void close_library_at_exit() {
  if (!release_failed.load()) H5close();
}
}  // namespace

void note_release_failed() { release_failed.store(true); }

void silence_errors() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Our exit handler replaces HDF5's (this must come before any other HDF5 call to count; a
    // program that called HDF5 first keeps HDF5's).
    if (H5dont_atexit() >= 0) std::atexit(close_library_at_exit);
    H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr);
  });
}

namespace {
herr_t collect(unsigned n, const H5E_error2_t* err, void* out) {
  auto& text = *static_cast<std::string*>(out);
  if (err->desc && *err->desc) {
    if (!text.empty()) text += "; ";
    text += err->desc;
  }
  (void)n;
  return 0;
}
}  // namespace

std::string error_stack() {
  std::string text;
  H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, collect, &text);
  H5Eclear2(H5E_DEFAULT);
  return text.empty() ? "no HDF5 error message" : text;
}

void check(herr_t status, const std::string& where, const char* what) {
  if (status < 0) TD_THROW(StorageError, where, ": ", what, " failed: ", error_stack());
}

H5Id check_id(hid_t id, const std::string& where, const char* what) {
  if (id < 0) TD_THROW(StorageError, where, ": ", what, " failed: ", error_stack());
  return H5Id(id);
}

}  // namespace h5
}  // namespace tensordict
