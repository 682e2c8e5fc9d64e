#pragma once
// H5Id: an owned HDF5 identifier (file, group, dataset, dataspace, datatype, property list,
// attribute), released with H5Idec_ref when the last owner goes, so an exception thrown midway
// through an HDF5 call sequence leaks nothing. h5_check turns a failed call into a StorageError
// carrying HDF5's own error stack (which is never printed to stderr).

#include <string>
#include <utility>

#include <hdf5.h>

namespace tensordict {
namespace h5 {

/// Records that HDF5 failed to release an id (see silence_errors).
void note_release_failed();

class H5Id {
 public:
  H5Id() = default;
  /// Takes ownership of `id` (a negative id is "none").
  explicit H5Id(hid_t id) : id_(id) {}
  H5Id(const H5Id& other) : id_(other.id_) {
    if (id_ >= 0) H5Iinc_ref(id_);
  }
  H5Id(H5Id&& other) noexcept : id_(std::exchange(other.id_, H5I_INVALID_HID)) {}
  H5Id& operator=(H5Id other) noexcept {
    std::swap(id_, other.id_);
    return *this;
  }
  ~H5Id() { reset(); }

  hid_t get() const { return id_; }
  bool valid() const { return id_ >= 0; }
  void reset() {
    if (id_ >= 0 && H5Idec_ref(id_) < 0) note_release_failed();
    id_ = H5I_INVALID_HID;
  }

 private:
  hid_t id_ = H5I_INVALID_HID;
};

/// Turns off HDF5's printing of error stacks (once per process): errors are reported through
/// exceptions instead. Also replaces HDF5's exit handler by one that skips the library's
/// cleanup once a file failed to close (HDF5 1.10 crashes there).
void silence_errors();
/// HDF5's current error stack as one line (innermost message last), then clears it.
std::string error_stack();
/// Throws StorageError "<where>: <what>: <HDF5 error stack>" when `status` is negative.
void check(herr_t status, const std::string& where, const char* what);
/// Same for a call returning an id: the id, owned.
H5Id check_id(hid_t id, const std::string& where, const char* what);

}  // namespace h5
}  // namespace tensordict
