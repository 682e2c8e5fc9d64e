// The HDF5 objects of a PersistentTensorDict level: string attributes, datasets, groups, and
// the kind of entry an object is (h5_objects.h).

#include "backends/hdf5/h5_objects.h"

#include <algorithm>

#include <ATen/ATen.h>

#include <tensordict/errors.h>

#include "backends/hdf5/h5_direct_read.h"
#include "backends/hdf5/h5_links.h"
#include "core/file_io.h"
#include "core/format.h"

namespace tensordict {
namespace h5 {

using detail::size_str;

// ---- Attributes ---------------------------------------------------------------------------------

std::optional<std::string> read_string_attribute(hid_t obj, const char* name, const std::string& where) {
  const htri_t exists = H5Aexists(obj, name);
  check(exists, where, "H5Aexists");
  if (exists == 0) return std::nullopt;
  H5Id attr = check_id(H5Aopen(obj, name, H5P_DEFAULT), where, "H5Aopen");
  H5Id type = check_id(H5Aget_type(attr.get()), where, "H5Aget_type");
  if (H5Tget_class(type.get()) != H5T_STRING) return std::nullopt;
  if (H5Tis_variable_str(type.get()) > 0) {
    H5Id mem = string_type();
    char* value = nullptr;
    check(H5Aread(attr.get(), mem.get(), &value), where, "H5Aread");
    std::string out = value ? value : "";
    H5free_memory(value);
    return out;
  }
  std::string out(H5Tget_size(type.get()), '\0');
  check(H5Aread(attr.get(), type.get(), out.data()), where, "H5Aread");
  return std::string(out.c_str());
}

void write_string_attribute(hid_t obj, const char* name, const std::string& value, const std::string& where) {
  if (H5Aexists(obj, name) > 0) check(H5Adelete(obj, name), where, "H5Adelete");
  H5Id type = string_type();
  H5Id space = check_id(H5Screate(H5S_SCALAR), where, "H5Screate");
  H5Id attr = check_id(H5Acreate2(obj, name, type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT), where, "H5Acreate2");
  const char* text = value.c_str();
  check(H5Awrite(attr.get(), type.get(), &text), where, "H5Awrite");
}

// The batch size is a 1-d int64 attribute (h5py shows a numpy array; reading it needs no string
// conversion, a third of the cost of opening a small file); the device a string.
void write_level_attributes(hid_t group, c10::IntArrayRef batch, const std::optional<at::Device>& device,
                            const std::string& where) {
  if (H5Aexists(group, kBatchSizeAttribute) > 0) check(H5Adelete(group, kBatchSizeAttribute), where, "H5Adelete");
  const hsize_t n = batch.size();
  H5Id space = check_id(H5Screate_simple(1, &n, nullptr), where, "H5Screate_simple");
  H5Id attr = check_id(H5Acreate2(group, kBatchSizeAttribute, H5T_STD_I64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT),
                       where, "H5Acreate2");
  check(H5Awrite(attr.get(), H5T_NATIVE_INT64, batch.data()), where, "H5Awrite");
  if (device) write_string_attribute(group, kDeviceAttribute, device->str(), where);
}

// ---- Datasets -----------------------------------------------------------------------------------

std::vector<int64_t> space_shape(hid_t space, const std::string& where) {
  hsize_t dims[H5S_MAX_RANK];
  const int rank = H5Sget_simple_extent_dims(space, dims, nullptr);
  check(rank, where, "H5Sget_simple_extent_dims");
  return std::vector<int64_t>(dims, dims + rank);
}

// What the open dataset `id` holds; an unsupported type is reported, not raised (listing
// keys must not fail on it: reading it does, through require_readable). `where` names it.
Dataset describe(const std::string& where, H5Id id) {
  Dataset d;
  d.id = std::move(id);
  d.type = check_id(H5Dget_type(d.id.get()), where, "H5Dget_type");
  d.stored = classify(d.type.get());
  d.space = check_id(H5Dget_space(d.id.get()), where, "H5Dget_space");
  d.shape = space_shape(d.space.get(), where);
  if (d.stored.kind == StoredType::Kind::Tensor && d.stored.dtype == at::kBFloat16) {
    // uint16 data is only bfloat16 when C++ said so; numpy's uint16 has no LibTorch dtype.
    const auto named = read_string_attribute(d.id.get(), kDtypeAttribute, where);
    if (!named || *named != "torch.bfloat16") {
      d.stored = StoredType{};
      d.stored.description = "uint16 (LibTorch has no such dtype)";
    }
  }
  return d;
}

// TypeError naming the file and dataset for a type that is neither a tensor nor a non-tensor
// value tensordict-cpp can read.
const Dataset& require_readable(const H5File& f, const std::string& path, const Dataset& d) {
  TD_CHECK(d.stored.kind != StoredType::Kind::Unsupported, TypeError, location(f, path),
           ": unsupported dataset type ", d.stored.description);
  return d;
}

Dataset open_dataset(const H5File& f, const std::string& path) {
  const std::string where = location(f, path);
  Dataset d = describe(where, check_id(H5Dopen2(f.id(), path.c_str(), H5P_DEFAULT), where, "H5Dopen2"));
  require_readable(f, path, d);
  return d;
}

namespace {
// A tensor to read `shape` elements of `path` into. A dataset may claim far more elements than
// its file holds (chunks never written read as fill values): what memory cannot hold is a
// StorageError naming it, before HDF5 reads anything.
at::Tensor allocate(const std::string& where, c10::IntArrayRef shape, at::ScalarType dtype) {
  const int64_t bytes = detail::shape_nbytes(shape, dtype, where);
  try {
    return at::empty(shape, at::TensorOptions().dtype(dtype));
  } catch (const c10::Error&) {
    TD_THROW(StorageError, where, ": cannot allocate ", bytes, " bytes for shape ", size_str(shape),
             "; read it by rows (index)");
  }
}

// Reads the elements of `d` that `sel` selects (all of them without one) into `out` with one
// pread when they qualify (h5_direct_read.h; `fd` is the file's direct_fd): false when they
// must go through HDF5.
bool read_direct(int fd, const Dataset& d, const Selection* sel, at::Tensor& out, const std::string& where) {
  if (fd < 0 || out.numel() == 0) return false;
  const auto ranges = direct_ranges(d.id.get(), d.type.get(), memory_type(d.stored.dtype), d.shape,
                                    static_cast<int64_t>(out.element_size()), sel);
  if (!ranges) return false;
  read_ranges(fd, *ranges, out.data_ptr(), where);
  return true;
}
}  // namespace

// The whole dataset `d` (named `where` in errors) as a tensor; `fd` as for read_direct.
at::Tensor read_block(const std::string& where, const Dataset& d, int fd) {
  at::Tensor out = allocate(where, d.shape, d.stored.dtype);
  if (out.numel() == 0 || read_direct(fd, d, nullptr, out, where)) return out;
  check(H5Dread(d.id.get(), memory_type(d.stored.dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, out.data_ptr()), where,
        "H5Dread");
  return out;
}

// Writes `block` (of the dataset's shape and dtype) over the whole dataset `d`.
void write_block(const std::string& where, const Dataset& d, const at::Tensor& block) {
  if (block.numel() == 0) return;
  const at::Tensor data = block.contiguous();
  check(H5Dwrite(d.id.get(), memory_type(d.stored.dtype), H5S_ALL, H5S_ALL, H5P_DEFAULT, data.data_ptr()), where,
        "H5Dwrite");
}

// The selected elements of `d` (sel.block_shape), or writes them from `block`.
at::Tensor read_selection(const std::string& where, const Dataset& d, const Selection& sel, int fd) {
  at::Tensor block = allocate(where, sel.block_shape, d.stored.dtype);
  if (read_direct(fd, d, &sel, block, where)) return block;
  transfer(d.id.get(), d.space.get(), memory_type(d.stored.dtype), sel, block.data_ptr(), /*write=*/false, where);
  return block;
}

void write_selection(const std::string& where, const Dataset& d, const Selection& sel, const at::Tensor& block) {
  const at::Tensor data = block.contiguous();
  transfer(d.id.get(), d.space.get(), memory_type(d.stored.dtype), sel, data.data_ptr(), /*write=*/true, where);
}

namespace {
H5Id creation_properties(const H5File& f, const std::vector<int64_t>& shape, int64_t element_size,
                         const std::string& where) {
  H5Id dcpl = check_id(H5Pcreate(H5P_DATASET_CREATE), where, "H5Pcreate");
  const H5Options& o = f.options;
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  const bool filtered = o.gzip_level >= 0 || o.shuffle || !o.chunks.empty();
  if (!filtered || shape.empty() || numel == 0) return dcpl;  // scalars and empty data: contiguous
  std::vector<hsize_t> chunk(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    int64_t c = d < o.chunks.size() ? o.chunks[d] : shape[d];
    chunk[d] = static_cast<hsize_t>(std::max<int64_t>(1, std::min(c, shape[d])));
  }
  if (o.chunks.empty()) {
    // HDF5 needs chunks for filters: rows of the first dim, up to about 1 MiB a chunk.
    const int64_t row = std::max<int64_t>(1, numel / shape[0] * element_size);
    chunk[0] = static_cast<hsize_t>(std::max<int64_t>(1, std::min<int64_t>(shape[0], (1 << 20) / row)));
  }
  check(H5Pset_chunk(dcpl.get(), static_cast<int>(chunk.size()), chunk.data()), where, "H5Pset_chunk");
  if (o.shuffle) check(H5Pset_shuffle(dcpl.get()), where, "H5Pset_shuffle");
  if (o.gzip_level >= 0) check(H5Pset_deflate(dcpl.get(), static_cast<unsigned>(o.gzip_level)), where, "H5Pset_deflate");
  return dcpl;
}
}  // namespace

// Creates the dataset `path` for a tensor of `shape` and `dtype` (zero-filled until written).
Dataset create_dataset(const H5File& f, const std::string& path, const std::vector<int64_t>& shape,
                       at::ScalarType dtype) {
  const std::string where = location(f, path);
  Dataset d;
  d.type = tensor_type(dtype);
  d.stored.kind = StoredType::Kind::Tensor;
  d.stored.dtype = dtype;
  d.shape = shape;
  std::vector<hsize_t> dims(shape.begin(), shape.end());
  H5Id space = check_id(dims.empty() ? H5Screate(H5S_SCALAR) : H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr),
                        where, "H5Screate");
  H5Id dcpl = creation_properties(f, shape, static_cast<int64_t>(c10::elementSize(dtype)), where);
  d.id = check_id(H5Dcreate2(f.id(), path.c_str(), d.type.get(), space.get(), H5P_DEFAULT, dcpl.get(), H5P_DEFAULT),
                  where, "H5Dcreate2");
  if (dtype == at::kBFloat16) write_string_attribute(d.id.get(), kDtypeAttribute, "torch.bfloat16", where);
  return d;
}

void write_tensor_dataset(const H5File& f, const std::string& path, const at::Tensor& value) {
  TD_CHECK(!value.requires_grad(), RuntimeError, location(f, path),
           ": cannot store a tensor that requires grad; detach() it first");
  const at::Tensor data = value.detach().to(at::kCPU).contiguous();
  Dataset d = create_dataset(f, path, data.sizes().vec(), data.scalar_type());
  write_block(location(f, path), d, data);
}

H5Id create_group(H5File& f, const std::string& path, c10::IntArrayRef batch, const std::optional<at::Device>& device) {
  const std::string where = location(f, path);
  H5Id gcpl = ordered_links(H5P_GROUP_CREATE, where);
  H5Id g = check_id(H5Gcreate2(f.id(), path.c_str(), H5P_DEFAULT, gcpl.get(), H5P_DEFAULT), where, "H5Gcreate2");
  write_level_attributes(g.get(), batch, device, where);
  f.batches[path] = BatchSize(batch.begin(), batch.end());
  return g;
}

void forget_batches(H5File& f, const std::string& path) {
  f.batches.erase(path);
  // Paths below it: from path + "/" up to path + "0" ('0' follows '/').
  f.batches.erase(f.batches.lower_bound(path + "/"), f.batches.lower_bound(path + "0"));
}

void raise_unless_absent(const H5File& f, const std::string& path, const char* what) {
  const std::string stack = error_stack();  // before link_exists, which clears it
  if (!link_exists(f, path)) return;
  TD_THROW(StorageError, location(f, path), ": ", what, " failed: ", stack);
}

// The object `path` names, opened; an invalid id when there is no such link. Opened first,
// asked whether it exists only when that fails: one HDF5 call on every read.
H5Id open_target(const H5File& f, const std::string& path) {
  const hid_t id = H5Oopen(f.id(), path.c_str(), H5P_DEFAULT);
  if (id < 0) raise_unless_absent(f, path, "H5Oopen");
  return H5Id(id);
}

// The entry a dataset of `type` is: strings and h5py's numpy scalars are non-tensor values;
// everything else is a tensor (unsupported types too: reading them raises the TypeError).
EntryKind dataset_kind(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  if (cls == H5T_STRING) return EntryKind::NonTensor;
  if (cls == H5T_OPAQUE && classify(type).kind == StoredType::Kind::Opaque) return EntryKind::NonTensor;
  return EntryKind::Tensor;
}

namespace {
// A group, a dataset (Tensor until dataset_kind looks at its type), or no entry at all (a named
// datatype).
EntryKind object_kind_of(hid_t obj) {
  const H5I_type_t t = H5Iget_type(obj);
  return t == H5I_GROUP ? EntryKind::TensorDict : t == H5I_DATASET ? EntryKind::Tensor : EntryKind::Undefined;
}
}  // namespace

Object open_object(const H5File& f, const std::string& path, const std::string& where) {
  Object out;
  H5Id obj = open_target(f, path);
  if (!obj.valid()) return out;
  out.kind = object_kind_of(obj.get());
  if (out.kind != EntryKind::Tensor) return out;
  out.dataset = describe(where, std::move(obj));
  out.kind = dataset_kind(out.dataset.type.get());
  return out;
}

// What `path` holds, from the object's type and its datatype alone (listing keys asks this of
// every entry: no shape, no attributes).
EntryKind object_kind(const H5File& f, const std::string& path) {
  return object_kind_at(f, f.id(), path.c_str(), [&] { return path; });
}

EntryKind object_kind_at(const H5File& f, hid_t loc, const char* name, FunctionRef<std::string()> path) {
  H5Id obj(H5Oopen(loc, name, H5P_DEFAULT));
  if (!obj.valid()) {
    raise_unless_absent(f, path(), "H5Oopen");
    return EntryKind::Undefined;
  }
  const EntryKind kind = object_kind_of(obj.get());
  if (kind != EntryKind::Tensor) return kind;
  H5Id type(H5Dget_type(obj.get()));
  if (!type.valid()) check(-1, location(f, path()), "H5Dget_type");
  return dataset_kind(type.get());
}

// The existing tensor dataset `path`, for a write: StorageError on a read-only file, TypeError
// when it holds something else.
Dataset writable_tensor(const H5File& f, const std::string& path) {
  f.check_writable("write '" + path + "'");
  Dataset d = open_dataset(f, path);
  TD_CHECK(d.stored.kind == StoredType::Kind::Tensor, TypeError, location(f, path), ": not a tensor dataset");
  return d;
}

}  // namespace h5
}  // namespace tensordict
