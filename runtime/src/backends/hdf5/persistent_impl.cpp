// PersistentTensorDict's backend: groups, datasets, attributes and selections of an HDF5 file
// (docs/backends.md, "HDF5 files").

#include "backends/hdf5/persistent_impl.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <unordered_map>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/json.h>
#include <tensordict/non_tensor.h>

#include "backends/hdf5/h5_direct_read.h"
#include "backends/hdf5/h5_links.h"
#include "backends/hdf5/h5_selection.h"
#include "backends/hdf5/h5_types.h"
#include "core/file_io.h"
#include "core/format.h"
#include "core/non_tensor_write.h"

namespace tensordict {
namespace h5 {

using detail::size_str;

// ---- The file ---------------------------------------------------------------------------------

hid_t H5File::id() const {
  TD_CHECK(file.valid(), StorageError, path, ": the HDF5 file is closed");
  return file.get();
}

void H5File::check_writable(const std::string& what) const {
  id();
  TD_CHECK(writable, StorageError, path, ": cannot ", what, ": the file was opened read-only (mode '", mode, "')");
}

std::string child_path(const std::string& group, std::string_view key) {
  return group == "/" ? "/" + std::string(key) : group + "/" + std::string(key);
}

std::string location(const H5File& f, const std::string& object) { return f.path + ":" + object; }

namespace {

// False for keys no HDF5 link can have ('/' nests groups; empty, "." and ".." name the
// group itself): they are never entries.
bool linkable(std::string_view key) {
  return !key.empty() && key != "." && key != ".." && key.find('/') == std::string_view::npos &&
         key.find('\0') == std::string_view::npos;
}

void check_key(const H5File& f, const std::string& group, std::string_view key) {
  TD_CHECK(linkable(key), ValueError, location(f, group),
           ": the key '", std::string(key), "' cannot name an HDF5 object ('/' nests groups; empty, '.' and '..' are "
           "reserved): rename it first");
}

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

struct Dataset {
  H5Id id;
  H5Id type;
  H5Id space;
  StoredType stored;
  std::vector<int64_t> shape;
};

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

// The object at `path`, opened once: what entry it is and, for a dataset, its description.
// Datasets of unsupported types count as tensors, so reading them raises the TypeError.
struct Object {
  EntryKind kind = EntryKind::Undefined;
  Dataset dataset;
};

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

// The whole dataset `d` (named `where` in errors) as a tensor; `fd` as for read_direct.
at::Tensor read_block(const std::string& where, const Dataset& d, int fd = -1) {
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
at::Tensor read_selection(const std::string& where, const Dataset& d, const Selection& sel, int fd = -1) {
  at::Tensor block = allocate(where, sel.block_shape, d.stored.dtype);
  if (read_direct(fd, d, &sel, block, where)) return block;
  transfer(d.id.get(), d.space.get(), memory_type(d.stored.dtype), sel, block.data_ptr(), /*write=*/false, where);
  return block;
}

void write_selection(const std::string& where, const Dataset& d, const Selection& sel, const at::Tensor& block) {
  const at::Tensor data = block.contiguous();
  transfer(d.id.get(), d.space.get(), memory_type(d.stored.dtype), sel, data.data_ptr(), /*write=*/true, where);
}

// The strings of the string dataset `d`, variable-length (C++'s and h5py's str) or fixed-length
// (numpy's bytes), in row-major order.
std::vector<std::string> read_strings(const H5File& f, const std::string& path, const Dataset& d) {
  const std::string where = location(f, path);
  // One string per element: a count memory cannot hold (over 1 TiB of strings) is refused
  // before anything is read.
  const size_t size = H5Tget_size(d.type.get());
  const int64_t per_element = static_cast<int64_t>(sizeof(std::string) + std::max(size, sizeof(char*)));
  const int64_t bytes = detail::shape_nbytes(d.shape, at::kByte, where);
  int64_t total = 0;
  TD_CHECK(!__builtin_mul_overflow(bytes, per_element, &total) && total <= (int64_t{1} << 40), StorageError, where,
           ": a string dataset of shape ", size_str(d.shape), " is more strings than memory can hold");
  const size_t count = static_cast<size_t>(bytes);
  std::vector<std::string> out;
  out.reserve(count);
  if (count == 0) return out;
  if (H5Tis_variable_str(d.type.get()) > 0) {
    H5Id mem = string_type();
    std::vector<char*> values(count, nullptr);
    check(H5Dread(d.id.get(), mem.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), where, "H5Dread");
    for (char* v : values) {
      out.emplace_back(v ? v : "");
      H5free_memory(v);
    }
    return out;
  }
  std::string buffer(count * size, '\0');
  check(H5Dread(d.id.get(), d.type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, buffer.data()), where, "H5Dread");
  for (size_t i = 0; i < count; ++i) {
    const char* s = buffer.data() + i * size;
    out.emplace_back(s, strnlen(s, size));
  }
  return out;
}

// A non-tensor entry of a level whose batch size is `batch`: a string scalar is one value, a
// string array of the batch's shape one value per element (a stack).
NonTensorData read_non_tensor(const H5File& f, const std::string& path, const Dataset& d, c10::IntArrayRef batch) {
  const std::string where = location(f, path);
  if (d.stored.kind == StoredType::Kind::String) {
    const auto encoding = read_string_attribute(d.id.get(), kEncodingAttribute, where);
    const bool is_json = encoding && *encoding == "json";
    std::vector<std::string> texts = read_strings(f, path, d);
    auto decode = [&](std::string& text) {
      return is_json ? json::parse(text, where) : json::Value(std::move(text));
    };
    if (d.shape.empty()) return NonTensorData(decode(texts.front()));
    TD_CHECK(c10::IntArrayRef(d.shape) == batch, TypeError, where, ": a string dataset of shape ", size_str(d.shape),
             " is one value per batch element of its group, whose batch size is ", size_str(batch));
    // Equal strings share one pool value.
    std::vector<json::Value> pool;
    std::unordered_map<std::string, int64_t> seen;
    at::Tensor ids = at::empty(d.shape, at::kLong);
    int64_t* id = ids.data_ptr<int64_t>();
    for (size_t i = 0; i < texts.size(); ++i) {
      auto [it, fresh] = seen.emplace(texts[i], static_cast<int64_t>(pool.size()));
      if (fresh) pool.push_back(decode(texts[i]));
      id[i] = it->second;
    }
    return NonTensorData::from_ids(std::move(pool), ids);
  }
  // h5py's opaque numpy scalars: the value's bytes, tagged with its numpy dtype.
  TD_CHECK(d.shape.empty(), TypeError, where, ": opaque datasets of shape ", size_str(d.shape),
           " are not supported (numpy scalars only)");
  const size_t size = H5Tget_size(d.type.get());
  std::string bytes(size, '\0');
  check(H5Dread(d.id.get(), d.type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, bytes.data()), where, "H5Dread");
  const std::string& tag = d.stored.tag;
  auto as = [&](auto zero) {
    decltype(zero) v{};
    TD_CHECK(size == sizeof(v), TypeError, where, ": opaque value tagged ", tag, " has ", size, " bytes");
    std::memcpy(&v, bytes.data(), sizeof(v));
    return v;
  };
  if (tag == "<i8") return NonTensorData(json::Value(as(int64_t{})));
  if (tag == "<i4") return NonTensorData(json::Value(static_cast<int64_t>(as(int32_t{}))));
  if (tag == "<f8") return NonTensorData(json::Value(as(double{})));
  if (tag == "<f4") return NonTensorData(json::Value(static_cast<double>(as(float{}))));
  if (tag == "|b1") return NonTensorData(json::Value(as(uint8_t{}) != 0));
  TD_THROW(TypeError, where, ": unsupported opaque value of numpy dtype ", tag);
}

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

// Creates the scalar dataset `path` holding `data` and returns it.
H5Id write_scalar(const H5File& f, const std::string& path, hid_t type, const void* data) {
  const std::string where = location(f, path);
  H5Id space = check_id(H5Screate(H5S_SCALAR), where, "H5Screate");
  H5Id ds = check_id(H5Dcreate2(f.id(), path.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), where,
                     "H5Dcreate2");
  check(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), where, "H5Dwrite");
  return ds;
}

// A per-element value: a string array shaped like the batch (what h5py makes of a numpy array
// of str), holding the strings, or every value's JSON text (marked) when some are not strings.
// Written into `existing` when it is such an array of that shape already, else created.
void write_non_tensor_stack(const H5File& f, const std::string& path, const NonTensorData& data,
                            const Dataset* existing) {
  const std::string where = location(f, path);
  const NonTensorData used = detail::held_values_only(data);  // a pool keeps values no row holds now
  const std::vector<json::Value>& pool = used.pool();
  const bool all_strings = std::all_of(pool.begin(), pool.end(), [](const json::Value& v) { return v.is_string(); });
  std::vector<std::string> texts(pool.size());
  for (size_t i = 0; i < pool.size(); ++i) texts[i] = all_strings ? pool[i].as_string() : pool[i].dump();
  const at::Tensor ids = used.ids().to(at::kCPU).contiguous();
  const int64_t* id = ids.data_ptr<int64_t>();
  std::vector<const char*> values(static_cast<size_t>(ids.numel()));
  for (size_t i = 0; i < values.size(); ++i) values[i] = texts[static_cast<size_t>(id[i])].c_str();
  H5Id type = string_type();
  H5Id ds;
  if (existing != nullptr) {
    ds = existing->id;
  } else {
    std::vector<hsize_t> dims(ids.sizes().begin(), ids.sizes().end());
    H5Id space = check_id(H5Screate_simple(static_cast<int>(dims.size()), dims.data(), nullptr), where, "H5Screate");
    ds = check_id(H5Dcreate2(f.id(), path.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT),
                  where, "H5Dcreate2");
  }
  if (!values.empty()) check(H5Dwrite(ds.get(), type.get(), H5S_ALL, H5S_ALL, H5P_DEFAULT, values.data()), where, "H5Dwrite");
  if (!all_strings) {
    write_string_attribute(ds.get(), kEncodingAttribute, "json", where);
  } else if (H5Aexists(ds.get(), kEncodingAttribute) > 0) {
    check(H5Adelete(ds.get(), kEncodingAttribute), where, "H5Adelete");
  }
}

// True when `d` can take `data` in place: both are string arrays of the same shape.
bool holds_stack_like(const Dataset& d, const NonTensorData& data) {
  return d.stored.kind == StoredType::Kind::String && H5Tis_variable_str(d.type.get()) > 0 && !d.shape.empty() &&
         data.is_stack() && c10::IntArrayRef(d.shape) == data.ids().sizes();
}

// A non-tensor value as h5py stores it: strings as variable-length UTF-8 scalars, ints, floats
// and bools as numpy scalars in an opaque type; other JSON values (null, lists, objects) as
// their JSON text, marked so C++ parses it back (Python reads the text).
void write_non_tensor_dataset(const H5File& f, const std::string& path, const NonTensorData& data) {
  if (!data.is_uniform()) return write_non_tensor_stack(f, path, data, nullptr);
  const json::Value& v = data.value();
  const std::string where = location(f, path);
  auto opaque = [&](const char* tag, const void* bytes, size_t size) {
    H5Id type = check_id(H5Tcreate(H5T_OPAQUE, size), where, "H5Tcreate");
    check(H5Tset_tag(type.get(), tag), where, "H5Tset_tag");
    write_scalar(f, path, type.get(), bytes);
  };
  if (v.is_string() || !(v.is_int() || v.is_double() || v.is_bool())) {
    const std::string text = v.is_string() ? v.as_string() : v.dump();
    H5Id type = string_type();
    const char* p = text.c_str();
    H5Id ds = write_scalar(f, path, type.get(), &p);
    if (!v.is_string()) write_string_attribute(ds.get(), kEncodingAttribute, "json", where);
  } else if (v.is_bool()) {
    const uint8_t b = v.as_bool() ? 1 : 0;
    opaque("NUMPY:|b1", &b, 1);
  } else if (v.is_int()) {
    const int64_t i = v.as_int();
    opaque("NUMPY:<i8", &i, 8);
  } else {
    const double x = v.as_double();
    opaque("NUMPY:<f8", &x, 8);
  }
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

// Creates `path` (absent) for `entry`: a dataset, or a group holding every entry below it.
void write_entry(H5File& f, const std::string& path, const Entry& entry) {
  if (entry.is_tensor()) {
    write_tensor_dataset(f, path, entry.tensor());
  } else if (entry.is_non_tensor()) {
    write_non_tensor_dataset(f, path, entry.non_tensor());
  } else if (entry.is_tensordict()) {
    const TensorDict& sub = entry.tensordict();
    create_group(f, path, sub.batch_size(), sub.device());
    sub.impl()->for_each([&](const std::string& key, const Entry& child) {
      check_key(f, path, key);
      write_entry(f, child_path(path, key), child);
    });
  }
}

// The object `path` names, opened; an invalid id when there is no such link. Opened first,
// asked whether it exists only when that fails: one HDF5 call on every read.
H5Id open_target(const H5File& f, const std::string& path) {
  const hid_t id = H5Oopen(f.id(), path.c_str(), H5P_DEFAULT);
  if (id >= 0) return H5Id(id);
  const std::string stack = error_stack();
  if (!link_exists(f, path)) return H5Id();
  TD_THROW(StorageError, location(f, path), ": H5Oopen failed: ", stack);
}

// The entry a dataset of `type` is: strings and h5py's numpy scalars are non-tensor values;
// everything else is a tensor (unsupported types too: reading them raises the TypeError).
EntryKind dataset_kind(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  if (cls == H5T_STRING) return EntryKind::NonTensor;
  if (cls == H5T_OPAQUE && classify(type).kind == StoredType::Kind::Opaque) return EntryKind::NonTensor;
  return EntryKind::Tensor;
}

// A group, a dataset (Tensor until dataset_kind looks at its type), or no entry at all (a named
// datatype).
EntryKind object_kind_of(hid_t obj) {
  const H5I_type_t t = H5Iget_type(obj);
  return t == H5I_GROUP ? EntryKind::TensorDict : t == H5I_DATASET ? EntryKind::Tensor : EntryKind::Undefined;
}

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
  H5Id obj = open_target(f, path);
  if (!obj.valid()) return EntryKind::Undefined;
  const EntryKind kind = object_kind_of(obj.get());
  if (kind != EntryKind::Tensor) return kind;
  H5Id type = check_id(H5Dget_type(obj.get()), location(f, path), "H5Dget_type");
  return dataset_kind(type.get());
}

// ---- Batch sizes at open ------------------------------------------------------------------------

BatchSize parse_batch_attribute(const std::string& text, const std::string& where) {
  json::Value v;
  try {
    v = json::parse(text, where);
  } catch (const Error& e) {
    TD_THROW(StorageError, where, ": malformed ", kBatchSizeAttribute, " attribute: ", e.message());
  }
  TD_CHECK(v.is_array(), StorageError, where, ": ", kBatchSizeAttribute, " is not a list of sizes");
  BatchSize out;
  for (const auto& d : v.as_array()) {
    TD_CHECK(d.is_int() && d.as_int() >= 0, StorageError, where, ": ", kBatchSizeAttribute, " holds ", d.dump(),
             ", not a size");
    out.push_back(d.as_int());
  }
  return out;
}

// The group's stored batch size: a 1-d integer array, or (also accepted) its JSON text.
std::optional<BatchSize> read_batch_attribute(hid_t group, const std::string& where) {
  const htri_t exists = H5Aexists(group, kBatchSizeAttribute);
  check(exists, where, "H5Aexists");
  if (exists == 0) return std::nullopt;
  H5Id attr = check_id(H5Aopen(group, kBatchSizeAttribute, H5P_DEFAULT), where, "H5Aopen");
  H5Id type = check_id(H5Aget_type(attr.get()), where, "H5Aget_type");
  if (H5Tget_class(type.get()) == H5T_STRING) {
    auto text = read_string_attribute(group, kBatchSizeAttribute, where);
    return parse_batch_attribute(*text, where);
  }
  TD_CHECK(H5Tget_class(type.get()) == H5T_INTEGER, StorageError, where, ": ", kBatchSizeAttribute,
           " is neither integers nor text");
  H5Id space = check_id(H5Aget_space(attr.get()), where, "H5Aget_space");
  const std::vector<int64_t> dims = space_shape(space.get(), where);
  TD_CHECK(dims.size() == 1 && dims[0] <= 64, StorageError, where, ": ", kBatchSizeAttribute,
           " is not a list of at most 64 sizes");
  BatchSize out(static_cast<size_t>(dims[0]));
  if (!out.empty()) check(H5Aread(attr.get(), H5T_NATIVE_INT64, out.data()), where, "H5Aread");
  for (int64_t d : out) TD_CHECK(d >= 0, StorageError, where, ": ", kBatchSizeAttribute, " holds ", d, ", not a size");
  return out;
}

bool starts_with(c10::IntArrayRef shape, c10::IntArrayRef prefix) {
  return shape.size() >= prefix.size() && std::equal(prefix.begin(), prefix.end(), shape.begin());
}

// ValueError naming the group `path` when its batch size does not start with its parent's.
void check_extends_parent(const H5File& f, const std::string& path, c10::IntArrayRef batch, c10::IntArrayRef parent) {
  TD_CHECK(starts_with(batch, parent), ValueError, location(f, path), ": batch size ", size_str(batch),
           " does not extend the parent group's ", size_str(parent));
}

// ValueError naming the dataset when its shape does not start with its group's batch size.
void check_extends_batch(const H5File& f, const std::string& path, c10::IntArrayRef shape, c10::IntArrayRef batch) {
  TD_CHECK(starts_with(shape, batch), ValueError, location(f, path), ": batch size and array size mismatch: ",
           "the dataset has shape ", size_str(shape), ", the group's batch size is ", size_str(batch));
}

// Sets f.batches for `path` and, where needed, the groups below it. With `explicit_batch` (the
// caller gave the root's batch size), a group without a stored batch takes its parent's
// (Python's rule), and every dataset and group is checked now. Otherwise a group's batch is its
// stored attribute, read alone (its datasets are checked when read, its sub-groups resolved
// when reached: opening costs the same for ten datasets or ten thousand), or Python's
// inference: the longest leading prefix shared by the group's tensor datasets and its
// sub-groups' batches.
BatchSize resolve_batches(H5File& f, const std::string& path, const std::optional<BatchSize>& root_batch,
                          const BatchSize* parent, bool explicit_batch, int depth) {
  const std::string where = location(f, path);
  TD_CHECK(depth < 512, StorageError, where, ": groups nested more than 512 levels deep");
  std::optional<BatchSize> batch = root_batch;
  if (!batch) {
    // The root's attributes are read through the file id: no group open on the hot path.
    H5Id g;
    if (path != "/") g = check_id(H5Gopen2(f.id(), path.c_str(), H5P_DEFAULT), where, "H5Gopen2");
    if (auto stored = read_batch_attribute(g.valid() ? g.get() : f.id(), where)) {
      batch = std::move(stored);
      if (!explicit_batch) {
        if (parent) check_extends_parent(f, path, *batch, *parent);
        f.batches[path] = *batch;
        return *batch;
      }
    }
  }
  if (!batch && explicit_batch && parent) batch = *parent;
  std::optional<BatchSize> common;
  auto meet = [&](c10::IntArrayRef shape) {
    if (!common) {
      common = BatchSize(shape.begin(), shape.end());
      return;
    }
    size_t n = 0;
    while (n < common->size() && n < shape.size() && (*common)[n] == shape[n]) ++n;
    common->resize(n);
  };
  std::vector<std::pair<std::string, std::vector<int64_t>>> tensors;
  std::vector<std::string> groups;
  // In any order: the result does not depend on it, and listing by name is one HDF5 call.
  for (const std::string& key : group_names(f, path)) {
    const std::string child = child_path(path, key);
    Object obj = open_object(f, child, location(f, child));
    if (obj.kind == EntryKind::TensorDict) groups.push_back(child);
    if (obj.kind == EntryKind::Tensor) {
      tensors.emplace_back(child, std::move(obj.dataset.shape));
      meet(tensors.back().second);
    }
    // A string array holds one value per batch element: its shape is the batch's.
    if (obj.kind == EntryKind::NonTensor && !obj.dataset.shape.empty()) meet(obj.dataset.shape);
  }
  if (batch) {
    for (const std::string& child : groups) resolve_batches(f, child, std::nullopt, &*batch, explicit_batch, depth + 1);
  } else {
    // Sub-groups first: their batches take part in this group's; then check they extend it.
    std::vector<BatchSize> children;
    for (const std::string& child : groups)
      children.push_back(resolve_batches(f, child, std::nullopt, nullptr, explicit_batch, depth + 1));
    for (const BatchSize& c : children) meet(c);
    batch = common.value_or(BatchSize{});
    for (size_t i = 0; i < groups.size(); ++i) check_extends_parent(f, groups[i], children[i], *batch);
  }
  if (parent) check_extends_parent(f, path, *batch, *parent);
  for (const auto& [child, shape] : tensors) check_extends_batch(f, child, shape, *batch);
  f.batches[path] = *batch;
  return *batch;
}

// The existing tensor dataset `path`, for a write: StorageError on a read-only file, TypeError
// when it holds something else.
Dataset writable_tensor(const H5File& f, const std::string& path) {
  f.check_writable("write '" + path + "'");
  Dataset d = open_dataset(f, path);
  TD_CHECK(d.stored.kind == StoredType::Kind::Tensor, TypeError, location(f, path), ": not a tensor dataset");
  return d;
}

}  // namespace

// ---- H5Level ------------------------------------------------------------------------------------

H5Level::H5Level(std::shared_ptr<H5File> file, std::string group, c10::IntArrayRef batch_size,
                 std::optional<at::Device> device)
    : TensorDictBase(batch_size, device, StoragePolicy{}), file_(std::move(file)), group_(std::move(group)) {}

size_t H5Level::num_entries() const { return keys().size(); }

std::vector<std::string> H5Level::keys() const {
  const auto guard = file_->lock();
  std::vector<std::string> out;
  for (std::string& key : group_keys(*file_, group_)) {
    if (object_kind(*file_, child_path(group_, key)) != EntryKind::Undefined) out.push_back(std::move(key));
  }
  return out;
}

bool H5Level::has(std::string_view key) const { return kind(key) != EntryKind::Undefined; }

EntryKind H5Level::kind(std::string_view key) const {
  const auto guard = file_->lock();
  return linkable(key) ? object_kind(*file_, child_path(group_, key)) : EntryKind::Undefined;
}

void H5Level::for_each_key(FunctionRef<void(const std::string&, EntryKind)> fn) const {
  const auto guard = file_->lock();
  for (const std::string& key : group_keys(*file_, group_)) {
    const EntryKind k = object_kind(*file_, child_path(group_, key));
    if (k != EntryKind::Undefined) fn(key, k);
  }
}

c10::intrusive_ptr<H5Level> H5Level::child(std::string_view key) const {
  const auto guard = file_->lock();
  if (auto cached = children_.find(key); cached != children_.end()) return cached->second;
  const std::string path = child_path(group_, key);
  auto it = file_->batches.find(path);
  // A group first reached now: its batch is resolved (stored, or inferred) and checked here.
  const BatchSize parent(batch_size().begin(), batch_size().end());
  const BatchSize batch =
      it != file_->batches.end() ? it->second : resolve_batches(*file_, path, std::nullopt, &parent, false, 0);
  auto level = c10::make_intrusive<H5Level>(file_, path, batch, device_);
  children_.emplace(std::string(key), level);
  return level;
}

Entry H5Level::get(std::string_view key) const { return read(key, nullptr); }

Entry H5Level::read_at(std::string_view key, const BatchIndex& index) const { return read(key, &index); }

Entry H5Level::read(std::string_view key, const BatchIndex* index) const {
  const auto guard = file_->lock();
  if (!linkable(key)) return Entry();
  const std::string path = child_path(group_, key);
  const std::string where = location(*file_, path);  // built once: reads are short
  Object obj = open_object(*file_, path, where);
  switch (obj.kind) {
    case EntryKind::Undefined: return Entry();
    case EntryKind::TensorDict: {
      c10::intrusive_ptr<H5Level> sub = child(key);
      if (index == nullptr) return Entry(TensorDict(std::move(sub)));
      // The indexed batch dims, then the child's own extra ones.
      BatchSize batch(index->result_batch_size().begin(), index->result_batch_size().end());
      batch.append(sub->batch_size().begin() + index->source_batch_dims(), sub->batch_size().end());
      return Entry(TensorDict(c10::make_intrusive<H5View>(std::move(sub), *index, batch)));
    }
    case EntryKind::NonTensor: {
      NonTensorData value = read_non_tensor(*file_, path, obj.dataset, batch_size());
      if (index != nullptr && value.is_stack()) value = value.with_ids(index->apply(value.ids()));
      return Entry(std::move(value));
    }
    case EntryKind::Tensor: break;
  }
  const Dataset& d = require_readable(*file_, path, obj.dataset);
  check_extends_batch(*file_, path, d.shape, batch_size());
  H5File& f = *file_;
  if (f.direct_fd == H5File::kUnknownFd) f.direct_fd = direct_read_fd(f.id());
  Selection sel;
  at::Tensor out;
  if (index == nullptr) {
    out = read_block(where, d, f.direct_fd);
  } else if (!select(d.shape, *index, sel)) {
    out = index->apply(read_block(where, d, f.direct_fd));
  } else {
    at::Tensor block = read_selection(where, d, sel, f.direct_fd);
    out = sel.post_is_identity ? block : block.index(sel.post);
  }
  return Entry(device_ && !device_->is_cpu() ? out.to(*device_) : out);
}

void H5Level::for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const {
  const auto guard = file_->lock();
  for (const std::string& key : group_keys(*file_, group_)) {
    Entry e = get(key);
    if (e.defined()) fn(key, e);
  }
}

LeafMeta H5Level::leaf_meta(std::string_view key) const {
  const auto guard = file_->lock();
  Dataset d = open_dataset(*file_, child_path(group_, key));
  check_extends_batch(*file_, child_path(group_, key), d.shape, batch_size());
  return LeafMeta{BatchSize(d.shape.begin(), d.shape.end()), d.stored.dtype, device_.value_or(at::Device(at::kCPU))};
}

void H5Level::insert_or_assign(std::string_view key, Entry value) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("set '" + std::string(key) + "'");
  check_key(f, group_, key);
  const std::string path = child_path(group_, key);
  if (value.is_tensordict()) {
    // The handle stores back the level it got from get(): it is already in the file.
    if (auto* level = dynamic_cast<const H5Level*>(value.tensordict().impl()); level && level->file_ == file_ && level->group_ == path)
      return;
  }
  if (value.is_tensor()) {
    // Same dtype and shape: written in place, so the key keeps its position (and its
    // creation options) instead of being recreated at the end.
    const std::string where = location(f, path);
    const Object obj = open_object(f, path, where);
    const Dataset& d = obj.dataset;
    const at::Tensor& t = value.tensor();
    if (obj.kind == EntryKind::Tensor && d.stored.kind == StoredType::Kind::Tensor && !t.requires_grad() &&
        d.stored.dtype == t.scalar_type() && c10::IntArrayRef(d.shape) == t.sizes()) {
      write_block(where, d, t.to(at::kCPU));
      return;
    }
  }
  // A replaced entry keeps its position: the links are put back in their order afterwards.
  std::vector<std::string> order;
  if (link_exists(f, path)) {
    order = group_keys(f, group_);
    check(H5Ldelete(f.id(), path.c_str(), H5P_DEFAULT), location(f, path), "H5Ldelete");
    forget_batches(f, path);
  }
  if (auto cached = children_.find(key); cached != children_.end()) children_.erase(cached);
  write_entry(f, path, value);
  if (!order.empty()) keep_order(f, group_, order);
  bump_layout_version();
}

void H5Level::erase(std::string_view key) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  if (!has(key)) return;
  f.check_writable("erase '" + std::string(key) + "'");
  const std::string path = child_path(group_, key);
  check(H5Ldelete(f.id(), path.c_str(), H5P_DEFAULT), location(f, path), "H5Ldelete");
  forget_batches(f, path);
  if (auto cached = children_.find(key); cached != children_.end()) children_.erase(cached);
  bump_layout_version();
}

void H5Level::rename(std::string_view from, std::string_view to) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("rename '" + std::string(from) + "'");
  check_key(f, group_, to);
  const std::string src = child_path(group_, from), dst = child_path(group_, to);
  // The entry keeps its position under the new name.
  std::vector<std::string> order = group_keys(f, group_);
  std::replace(order.begin(), order.end(), std::string(from), std::string(to));
  check(H5Lmove(f.id(), src.c_str(), f.id(), dst.c_str(), H5P_DEFAULT, H5P_DEFAULT), location(f, src), "H5Lmove");
  // Batch sizes of the moved groups follow them.
  std::vector<std::pair<std::string, BatchSize>> moved;
  for (const auto& [p, b] : f.batches) {
    if (p == src || p.rfind(src + "/", 0) == 0) moved.emplace_back(dst + p.substr(src.size()), b);
  }
  forget_batches(f, src);
  for (auto& [p, b] : moved) f.batches[p] = std::move(b);
  if (auto cached = children_.find(from); cached != children_.end()) children_.erase(cached);
  keep_order(f, group_, order);
  bump_layout_version();
}

void H5Level::move_to_end(std::string_view key) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("reorder '" + std::string(key) + "'");
  relink_last(f, group_, std::string(key));
  bump_layout_version();
}

void H5Level::write_(std::string_view key, const at::Tensor& value) {
  const auto guard = file_->lock();
  const std::string path = child_path(group_, key);
  const Dataset d = writable_tensor(*file_, path);
  write_block(location(*file_, path), d, value.detach().to(at::kCPU, d.stored.dtype).expand(d.shape));
}

void H5Level::write_at_(std::string_view key, const BatchIndex& index, const at::Tensor& value) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  const std::string path = child_path(group_, key);
  const std::string where = location(f, path);
  const Dataset d = writable_tensor(f, path);
  const at::Tensor v = value.detach().to(at::kCPU, d.stored.dtype);
  Selection sel;
  if (!select(d.shape, index, sel)) {
    at::Tensor all = read_block(where, d);
    index.assign(all, v);
    write_block(where, d, all);
    return;
  }
  if (sel.empty) return;
  // Only the selected elements move, whatever the index. A block the value covers whole (basic
  // slices) is written straight; otherwise it is read, the value put in at the post-index
  // (repeats, dropped dims), and written back.
  if (sel.post_is_identity) {
    at::Tensor covering = v;  // leading unit dims dropped, as `leaf[index] = value` does
    while (covering.dim() > static_cast<int64_t>(sel.block_shape.size()) && covering.size(0) == 1)
      covering = covering.squeeze(0);
    return write_selection(where, d, sel, covering.expand(sel.block_shape));
  }
  at::Tensor block = read_selection(where, d, sel);
  block.index_put_(sel.post, v);
  write_selection(where, d, sel, block);
}

void H5Level::create_zeroed(std::string_view key, const std::vector<int64_t>& shape, at::ScalarType dtype) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("create '" + std::string(key) + "'");
  check_key(f, group_, key);
  create_dataset(f, child_path(group_, key), shape, dtype);
  bump_layout_version();
}

void H5Level::write_non_tensor_(std::string_view key, const NonTensorData& value) {
  const auto guard = file_->lock();
  // A stack replacing a stack of its shape is written into the same dataset.
  const std::string path = child_path(group_, key);
  if (value.is_stack() && !value.is_uniform() && linkable(key)) {
    file_->check_writable("write '" + path + "'");
    const Object obj = open_object(*file_, path, location(*file_, path));
    if (obj.kind == EntryKind::NonTensor && holds_stack_like(obj.dataset, value)) {
      return write_non_tensor_stack(*file_, path, value, &obj.dataset);
    }
  }
  insert_or_assign(key, Entry(value));
}

TensorDict H5Level::make_child(std::string_view key, c10::IntArrayRef batch_size) const {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("create the group '" + std::string(key) + "'");
  check_key(f, group_, key);
  const std::string path = child_path(group_, key);
  create_group(f, path, batch_size, device_);
  return TensorDict(child(key));
}

void H5Level::set_batch_size(c10::IntArrayRef batch_size) {
  const auto guard = file_->lock();
  H5File& f = *file_;
  f.check_writable("change the batch size");
  H5Id g = check_id(H5Gopen2(f.id(), group_.c_str(), H5P_DEFAULT), location(f, group_), "H5Gopen2");
  write_level_attributes(g.get(), batch_size, device_, location(f, group_));
  f.batches[group_] = BatchSize(batch_size.begin(), batch_size.end());
  TensorDictBase::set_batch_size(batch_size);
}

TensorDict H5Level::index(const BatchIndex& index) const {
  auto self = c10::intrusive_ptr<H5Level>::reclaim_copy(const_cast<H5Level*>(this));
  return TensorDict(c10::make_intrusive<H5View>(std::move(self), index, index.result_batch_size()));
}

void H5Level::release_resources() {
  if (const std::shared_ptr<H5File> file = std::move(file_)) {
    const auto guard = file->lock();
    children_.clear();
  }
  TensorDictBase::release_resources();
}

// ---- H5View -------------------------------------------------------------------------------------

H5View::H5View(c10::intrusive_ptr<H5Level> source, BatchIndex index, c10::IntArrayRef batch_size)
    : TensorDictBase(batch_size, source->device(), StoragePolicy{}), source_(std::move(source)), index_(std::move(index)) {}

Entry H5View::get(std::string_view key) const { return source_->read_at(key, index_); }

void H5View::for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const {
  for (const std::string& key : keys()) fn(key, get(key));
}

void H5View::write_(std::string_view key, const at::Tensor& value) { source_->write_at_(key, index_, value); }

void H5View::insert_or_assign(std::string_view key, Entry value) {
  const EntryKind existing = source_->kind(key);
  if (value.is_tensor() && existing == EntryKind::Tensor) return write_(key, value.tensor());
  if (value.is_non_tensor() && existing == EntryKind::NonTensor) return write_non_tensor_(key, value.non_tensor());
  if (value.is_tensordict() && existing == EntryKind::TensorDict) {
    if (dynamic_cast<const H5View*>(value.tensordict().impl())) return;  // the view get() gave
  }
  unsupported("add or replace an entry through an indexed view",
              "set the key on the file's tensordict, or write values in place (set_, index_put_)");
}

void H5View::erase(std::string_view) { unsupported("erase an entry through an indexed view", "erase it on the file's tensordict"); }

void H5View::rename(std::string_view, std::string_view) {
  unsupported("rename an entry through an indexed view", "rename it on the file's tensordict");
}

void H5View::write_non_tensor_(std::string_view key, const NonTensorData& value) {
  // The selected elements of the stored value are replaced (a uniform value becomes a stack).
  const Entry current = source_->get(key);
  TD_CHECK(current.is_non_tensor(), TypeError, location(*source_->file(), child_path(source_->group(), key)),
           ": not a non-tensor entry");
  source_->write_non_tensor_(key, detail::assign_non_tensor(current.non_tensor(), source_->batch_size(), index_, value));
}

void H5View::set_batch_size(c10::IntArrayRef) { unsupported("change the batch size of an indexed view", "it follows the file"); }

void H5View::release_resources() {
  source_.reset();
  TensorDictBase::release_resources();
}

// ---- Opening ------------------------------------------------------------------------------------

const std::shared_ptr<H5File>& file_of(const TensorDictBase& impl) {
  if (const auto* level = dynamic_cast<const H5Level*>(&impl)) return level->file();
  if (const auto* view = dynamic_cast<const H5View*>(&impl)) return view->source()->file();
  TD_THROW(TypeError, "expected a PersistentTensorDict, got a ", impl.type_name());
}

TensorDict open_file(const std::string& path, const std::string& mode, std::optional<std::vector<int64_t>> batch_size,
                     const H5Options& options, std::optional<at::Device> device) {
  silence_errors();
  namespace fs = std::filesystem;
  TD_CHECK(mode == "r" || mode == "r+" || mode == "w" || mode == "w-" || mode == "x" || mode == "a", ValueError,
           path, ": invalid mode '", mode, "' (expected r, r+, w, w-, x or a, as h5py)");
  auto f = std::make_shared<H5File>();
  f->path = path;
  f->mode = mode;
  f->options = options;
  f->writable = mode != "r";
  // r and r+ open without a stat first (opening is the hot path of short reads); a failed open
  // finds out why afterwards.
  const bool opens_existing = mode == "r" || mode == "r+";
  const bool exists = !opens_existing && fs::exists(path);
  const bool create = mode == "w" || mode == "w-" || mode == "x" || (mode == "a" && !exists);
  // File access is HDF5's default (the "weak" close degree): no object id outlives the call that
  // opened it here, so closing the file id closes the file; and a file open elsewhere in the
  // process with the default degree can be opened again (a "strong" one would be refused).
  if (create) {
    TD_CHECK(!(exists && (mode == "w-" || mode == "x")), StorageError, path, ": file exists (mode '", mode, "')");
    H5Id fcpl = ordered_links(H5P_FILE_CREATE, path);
    f->file = check_id(H5Fcreate(path.c_str(), mode == "w" ? H5F_ACC_TRUNC : H5F_ACC_EXCL, fcpl.get(), H5P_DEFAULT),
                       path, "creating the HDF5 file");
  } else {
    const hid_t id = H5Fopen(path.c_str(), mode == "r" ? H5F_ACC_RDONLY : H5F_ACC_RDWR, H5P_DEFAULT);
    if (id < 0) {
      // Why it failed: no file, not HDF5 at all, or HDF5 that cannot be read (truncated, corrupt).
      const std::string stack = error_stack();
      TD_CHECK(fs::exists(path), StorageError, path, ": no such file (mode '", mode, "' opens an existing file)");
      const htri_t is_h5 = H5Fis_hdf5(path.c_str());
      TD_CHECK(is_h5 > 0, StorageError, path, ": not an HDF5 file");
      TD_THROW(StorageError, path, ": opening the HDF5 file: ", stack);
    }
    f->file = H5Id(id);
    // Read-only, with the default driver: rows may be read straight from the file.
    if (mode == "r") f->direct_fd = H5File::kUnknownFd;
  }
  return open_root(f, batch_size, create, device);
}

TensorDict open_root(const std::shared_ptr<H5File>& f, std::optional<std::vector<int64_t>> batch_size, bool create,
                     std::optional<at::Device> device) {
  const std::string& path = f->path;
  std::optional<BatchSize> given;
  if (batch_size) given = BatchSize(batch_size->begin(), batch_size->end());
  BatchSize root;
  if (create) {
    // A new file's root stores its batch size at once, as every group C++ creates does.
    root = given.value_or(BatchSize{});
    f->batches["/"] = root;
    H5Id g = check_id(H5Gopen2(f->file.get(), "/", H5P_DEFAULT), path, "H5Gopen2");
    write_level_attributes(g.get(), root, device, location(*f, "/"));
  } else {
    root = resolve_batches(*f, "/", given, nullptr, given.has_value(), 0);
  }
  if (auto d = read_string_attribute(f->file.get(), kDeviceAttribute, location(*f, "/"))) {
    try {
      device = at::Device(*d);
    } catch (const std::exception&) {
      TD_THROW(StorageError, path, ": malformed ", kDeviceAttribute, " attribute '", *d, "'");
    }
  }
  return TensorDict(c10::make_intrusive<H5Level>(f, "/", root, device));
}

TensorDict open_image(const std::string& name, std::string_view image) {
  silence_errors();
  auto f = std::make_shared<H5File>();
  f->path = name;
  f->mode = "r";
  H5Id fapl = check_id(H5Pcreate(H5P_FILE_ACCESS), name, "H5Pcreate");
  // The core driver reads the file from memory; HDF5 copies the image, so `image` may go.
  check(H5Pset_fapl_core(fapl.get(), 64 * 1024, /*backing_store=*/0), name, "H5Pset_fapl_core");
  check(H5Pset_file_image(fapl.get(), const_cast<char*>(image.data()), image.size()), name, "H5Pset_file_image");
  const hid_t id = H5Fopen(name.c_str(), H5F_ACC_RDONLY, fapl.get());
  TD_CHECK(id >= 0, StorageError, name, ": opening the HDF5 image: ", error_stack());
  f->file = H5Id(id);
  return open_root(f, std::nullopt, /*create=*/false, std::nullopt);
}

}  // namespace h5
}  // namespace tensordict
