// PersistentTensorDict's public factories and accessors.

#include <tensordict/backends/persistent.h>

#include <filesystem>

#include <ATen/ATen.h>

#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/function_ref.h>

#include "backends/hdf5/h5_id.h"
#include "backends/hdf5/h5_preflight.h"
#include "backends/hdf5/persistent_impl.h"
#include "core/file_io.h"

namespace tensordict {

PersistentTensorDict PersistentTensorDict::from_h5(const std::string& path, const std::string& mode,
                                                   std::optional<std::vector<int64_t>> batch_size,
                                                   const H5OpenOptions& open) {
  // Only an existing file has anything to check: w, w- and x create one, a when it is missing.
  if (open.untrusted && (mode == "r" || mode == "r+" || (mode == "a" && std::filesystem::exists(path))))
    h5::check_in_child(path, open.check_timeout);
  return PersistentTensorDict(h5::open_file(path, mode, std::move(batch_size), H5Options{}));
}

namespace {

[[noreturn]] void throw_exists(const std::string& path) {
  TD_THROW(StorageError, path, " already exists; writing there would replace it. Set H5Options::overwrite to replace it, "
           "or open it with PersistentTensorDict::from_h5");
}

// Writes a new file through `fill(root)` under a temporary name in the destination's directory,
// renamed to `path` last: an existing file is replaced only by a complete one, and a failed
// write (a key HDF5 cannot name, a full disk) leaves nothing at `path`. Without
// options.overwrite, a file at `path` is refused, before writing and again at the rename (in
// one step with it, so a file another writer put there meanwhile is kept). Messages name `path`.
TensorDict write_new_file(const std::string& path, c10::IntArrayRef batch_size, const H5Options& options,
                          std::optional<at::Device> device, FunctionRef<void(TensorDict&)> fill) {
  if (!options.overwrite && detail::path_exists(path)) throw_exists(path);
  // Temporary files of writers killed before their rename would stay forever otherwise.
  detail::remove_dead_temporaries(path);
  const std::string temp = detail::temporary_path(path);
  TensorDict root = h5::open_file(temp, "w", batch_size.vec(), options, device);
  const std::shared_ptr<h5::H5File>& file = h5::file_of(*root.impl());
  file->path = path;
  try {
    fill(root);
    h5::check(H5Fflush(file->id(), H5F_SCOPE_GLOBAL), path, "H5Fflush");
    if (options.overwrite) {
      std::error_code ec;
      std::filesystem::rename(temp, path, ec);
      TD_CHECK(!ec, StorageError, path, ": cannot move the new file into place: ", ec.message());
    } else if (!detail::move_new_file(temp, path)) {
      throw_exists(path);
    }
  } catch (...) {
    file->close();
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
  return root;
}

}  // namespace

PersistentTensorDict PersistentTensorDict::to_h5(const TensorDict& td, const std::string& path, const H5Options& options) {
  // Entries go in as sets on the new file (nested levels become groups); the batch and device
  // of every level are stored as group attributes.
  TensorDict root = write_new_file(path, td.batch_size(), options, td.device(), [&](TensorDict& out) {
    td.impl()->for_each([&](const std::string& key, const Entry& entry) { out.impl()->insert_or_assign(key, entry); });
  });
  if (td.is_locked()) root.lock_();
  return PersistentTensorDict(std::move(root));
}

PersistentTensorDict PersistentTensorDict::from_schema(const LeafSpecs& schema, c10::IntArrayRef batch_size,
                                                       const std::string& path, const H5Options& options) {
  check_leaf_specs(schema, batch_size, path);
  // Datasets are created but never written: HDF5 reads unwritten data as the fill value, 0.
  TensorDict root = write_new_file(path, batch_size, options, std::nullopt, [&](TensorDict& out) {
    for (const auto& [key, spec] : schema) {
      // Intermediate groups take the root's batch size.
      TensorDict level = out;
      for (size_t i = 0; i + 1 < key.size(); ++i) {
        const std::string& part = key.parts()[i];
        if (!level.impl()->has(part)) level.impl()->make_child(part, batch_size);
        level = level.impl()->get(part).tensordict();
      }
      if (!spec.is_tensor()) {
        level.impl()->insert_or_assign(key.parts().back(), Entry(spec.value()));
        continue;
      }
      std::vector<int64_t> shape = batch_size.vec();
      shape.insert(shape.end(), spec.event_shape().begin(), spec.event_shape().end());
      dynamic_cast<h5::H5Level&>(*level.impl()).create_zeroed(key.parts().back(), shape, spec.dtype());
    }
  });
  return PersistentTensorDict(std::move(root));
}

PersistentTensorDict PersistentTensorDict::from(const TensorDict& td) {
  TD_CHECK(is_persistent(td), TypeError, "expected a PersistentTensorDict, got a ", td.impl()->type_name());
  return PersistentTensorDict(td);
}

bool PersistentTensorDict::is_persistent(const TensorDict& td) {
  return dynamic_cast<const h5::H5Level*>(td.impl()) != nullptr || dynamic_cast<const h5::H5View*>(td.impl()) != nullptr;
}

const std::string& PersistentTensorDict::filename() const { return h5::file_of(*impl())->path; }

const std::string& PersistentTensorDict::mode() const { return h5::file_of(*impl())->mode; }

std::string PersistentTensorDict::group_name() const {
  if (const auto* level = dynamic_cast<const h5::H5Level*>(impl())) return level->group();
  return dynamic_cast<const h5::H5View*>(impl())->source()->group();
}

void PersistentTensorDict::close() { h5::file_of(*impl())->close(); }

bool PersistentTensorDict::is_open() const { return h5::file_of(*impl())->file.valid(); }

}  // namespace tensordict
