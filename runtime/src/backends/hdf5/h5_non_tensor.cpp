// Non-tensor values in an HDF5 file, as h5py stores them (h5_non_tensor.h).

#include "backends/hdf5/h5_non_tensor.h"

#include <algorithm>
#include <cstring>
#include <unordered_map>

#include <ATen/ATen.h>

#include <tensordict/errors.h>
#include <tensordict/json.h>

#include "core/file_io.h"
#include "core/format.h"
#include "core/non_tensor_write.h"

namespace tensordict {
namespace h5 {

using detail::size_str;

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

namespace {
// Creates the scalar dataset `path` holding `data` and returns it.
H5Id write_scalar(const H5File& f, const std::string& path, hid_t type, const void* data) {
  const std::string where = location(f, path);
  H5Id space = check_id(H5Screate(H5S_SCALAR), where, "H5Screate");
  H5Id ds = check_id(H5Dcreate2(f.id(), path.c_str(), type, space.get(), H5P_DEFAULT, H5P_DEFAULT, H5P_DEFAULT), where,
                     "H5Dcreate2");
  check(H5Dwrite(ds.get(), type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data), where, "H5Dwrite");
  return ds;
}
}  // namespace

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

}  // namespace h5
}  // namespace tensordict
