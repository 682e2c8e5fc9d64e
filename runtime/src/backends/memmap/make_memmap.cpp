// New leaves in a memory-mapped tensordict (Python's make_memmap / make_memmap_from_tensor) and
// loading a directory into an existing tensordict (load_memmap_ / load_). A new leaf's file is
// written before meta.json names it, so a crash leaves at worst an unnamed file, never a
// meta.json entry without its data.

#include <ATen/ATen.h>
#include <c10/core/DefaultDtype.h>
#include <c10/util/accumulate.h>

#include <tensordict/backends/memmap.h>
#include <tensordict/backends/memory_mapped_tensor.h>
#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "backends/memmap/format.h"
#include "backends/memmap/memmap_level.h"
#include "core/file_io.h"
#include "core/format.h"

namespace tensordict {

using namespace detail;
using namespace memmap_detail;

void MemmapLevel::add_leaf(const std::string& key, const at::Tensor& mapped) {
  rewrite_meta_entry(key, json::Value(json::Object{{"device", "cpu"},
                                                   {"shape", shape_json(mapped.sizes())},
                                                   {"dtype", torch_dtype_name(mapped.scalar_type())},
                                                   {"is_nested", false}}));
  TableBackend::insert_or_assign(key, Entry(mapped));
}

MemmapLevel& MemmapLevel::add_child(const std::string& key) {
  const std::string dir = join_path(path_, encode_key_for_filesystem(key));
  ensure_directory(dir);
  write_text_file(join_path(dir, "meta.json"),
                  json::Value(json::Object{{"shape", shape_json(batch_size())}, {"device", "cpu"}, {"_type", kTensorDictType}})
                      .dump_stdlib());
  rewrite_meta_entry(key, json::Value(json::Object{{"type", "TensorDict"}}));
  auto child = c10::make_intrusive<MemmapLevel>(batch_size(), device(), dir);
  child->set_dim_names(dim_names());
  TableBackend::insert_or_assign(key, Entry(TensorDict(child)));
  if (is_locked()) child->set_locked(true);
  return *child;
}

namespace {

// The level that will hold `key`'s leaf, created where missing; RuntimeError as Python's when
// `td` is not memory-mapped or the leaf exists.
MemmapLevel& target_level(TensorDict& td, KeyRef key) {
  TD_CHECK(!key.empty(), KeyError, "make_memmap: empty key");
  auto* level = dynamic_cast<MemmapLevel*>(td.impl());
  TD_CHECK(level, RuntimeError, "Can only make a memmap tensor within a memory-mapped tensordict.");
  for (size_t i = 0; i + 1 < key.size(); ++i) {
    Entry e = level->get(key[i]);
    if (!e.defined()) {
      level = &level->add_child(std::string(key[i]));
      continue;
    }
    auto* next = e.is_tensordict() ? dynamic_cast<MemmapLevel*>(e.tensordict_unchecked().impl()) : nullptr;
    TD_CHECK(next, RuntimeError, "make_memmap: ", key.prefix(i + 1).repr(), " holds ", kind_name(e.kind()),
             ", not a memory-mapped tensordict");
    level = next;
  }
  TD_CHECK(!level->has(key.back()), RuntimeError, "The key ", key.repr(),
           " already exists within the target tensordict. Delete that entry before overwriting it.");
  return *level;
}

void check_batch(const MemmapLevel& level, KeyRef key, c10::IntArrayRef shape) {
  TD_CHECK(shape.size() >= level.batch_size().size() && shape.slice(0, level.batch_size().size()) == level.batch_size(),
           ShapeError, "make_memmap: shape ", size_str(shape), " of key ", key.repr(),
           " does not start with the batch size ", size_str(level.batch_size()));
}

std::string leaf_file(const MemmapLevel& level, const std::string& key) {
  return join_path(level.path(), encode_key_for_filesystem(key) + ".memmap");
}

}  // namespace

at::Tensor make_memmap(TensorDict& td, KeyRef key, c10::IntArrayRef shape, std::optional<at::ScalarType> dtype) {
  MemmapLevel& level = target_level(td, key);
  check_batch(level, key, shape);
  const at::ScalarType type = dtype ? *dtype : c10::typeMetaToScalarType(c10::get_default_dtype());
  // Python writes no file for an empty leaf: the loader rebuilds it from meta.json.
  at::Tensor mapped = c10::multiply_integers(shape) == 0
                          ? at::empty(shape, at::TensorOptions().dtype(type))
                          : MemoryMappedTensor::zeros(shape, type, leaf_file(level, std::string(key.back())), /*existsok=*/false).tensor();
  level.add_leaf(std::string(key.back()), mapped);
  return mapped;
}

at::Tensor make_memmap_from_tensor(TensorDict& td, KeyRef key, const at::Tensor& tensor, bool copy_data) {
  TD_CHECK(tensor.defined(), ValueError, "make_memmap_from_tensor: undefined tensor for key ", key.repr());
  if (!copy_data) return make_memmap(td, key, tensor.sizes(), tensor.scalar_type());
  MemmapLevel& level = target_level(td, key);
  check_batch(level, key, tensor.sizes());
  at::Tensor mapped = tensor.numel() == 0 ? at::empty(tensor.sizes(), tensor.options().device(at::kCPU))
                                          : MemoryMappedTensor::from_tensor(tensor.cpu(), leaf_file(level, std::string(key.back())),
                                                                            /*existsok=*/false, /*copy_existing=*/true)
                                                .tensor();
  level.add_leaf(std::string(key.back()), mapped);
  return mapped;
}

at::Tensor make_memmap_from_storage(TensorDict& td, KeyRef key, const c10::Storage& storage, c10::IntArrayRef shape,
                                    std::optional<at::ScalarType> dtype) {
  MemmapLevel& level = target_level(td, key);
  check_batch(level, key, shape);
  const at::ScalarType type = dtype ? *dtype : c10::typeMetaToScalarType(c10::get_default_dtype());
  const std::string path = leaf_file(level, std::string(key.back()));
  // Python's rule: the storage is the leaf's data already, mapped from the file the leaf will
  // have; nothing is written but meta.json.
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t d = shape.size(); d > 1; --d) strides[d - 2] = strides[d - 1] * shape[d - 1];
  const int64_t nbytes = c10::multiply_integers(shape) * static_cast<int64_t>(c10::elementSize(type));
  TD_CHECK(static_cast<int64_t>(storage.nbytes()) >= nbytes, ShapeError, "make_memmap_from_storage: a storage of ",
           storage.nbytes(), " bytes cannot hold ", nbytes, " bytes of shape ", size_str(shape), " for key ", key.repr());
  at::Tensor mapped = at::empty({0}, at::TensorOptions().dtype(type)).set_(storage, 0, shape, strides);
  TD_CHECK(nbytes == 0 || storage_maps(mapped, path), RuntimeError, "make_memmap_from_storage: the storage for key ",
           key.repr(), " is not mapped from ", path, ", the file this leaf must have");
  level.add_leaf(std::string(key.back()), mapped);
  return mapped;
}

TensorDict& load_memmap_(TensorDict& td, const std::string& prefix, const LoadMemmapOptions& options) {
  TensorDict loaded = load_memmap(prefix, options);
  if (td.is_memmap()) {
    // The directory stays whole: the values are copied into its own files (Python rebinds the
    // leaves to the other directory's and forgets its own path).
    return td.update_(loaded);
  }
  // Python's rule: the tensordict keeps its batch size and device; every entry on disk replaces
  // the one here (nested tensordicts are loaded into), entries not on disk stay.
  return td.update(loaded);
}

TensorDict& load_(TensorDict& td, const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap_(td, prefix, options);
}

}  // namespace tensordict
