#pragma once
// The stored forms tdtool reads and writes. Each backend that can store a tensordict adds a
// StoredFormat here (memmap directories; HDF5 files where the build has HDF5), and both `info`
// and `convert` pick it up.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <tensordict/tensor_dict.h>

namespace tdtool {

using Progress = std::function<void(int64_t done, int64_t total)>;

struct StoredFormat {
  /// Name used in messages and with --to / --from.
  std::string name;
  /// True when `path` holds a tensordict of this format.
  std::function<bool(const std::string& path)> detect;
  /// Opens the stored tensordict (lazily where the format allows).
  std::function<tensordict::TensorDict(const std::string& path)> load;
  /// Stores `td` at `path`, which does not exist yet.
  std::function<void(const tensordict::TensorDict& td, const std::string& path, int num_threads,
                     const Progress& progress)>
      save;
};

/// Every format, in detection order.
const std::vector<StoredFormat>& formats();
/// The format of an existing stored tensordict; tensordict::ValueError when none matches.
const StoredFormat& detect_format(const std::string& path);
/// The format named `name`; tensordict::ValueError when unknown.
const StoredFormat& format_named(const std::string& name);
/// What `convert` writes to `path` without --to: HDF5 for a .h5, .hdf5 or .hdf name, else a
/// memmap directory.
const StoredFormat& format_for_destination(const std::string& path);

}  // namespace tdtool
