#include "backends/hdf5/h5_types.h"

#include <array>
#include <cstring>
#include <mutex>

#include <tensordict/dtype.h>
#include <tensordict/errors.h>

namespace tensordict {
namespace h5 {

namespace {

H5Id copy(hid_t type) { return check_id(H5Tcopy(type), "HDF5", "H5Tcopy"); }

// h5py's float16: IEEE binary16, built from the 32-bit type as h5py builds it.
H5Id half_type() {
  H5Id t = copy(H5T_IEEE_F32LE);
  check(H5Tset_fields(t.get(), 15, 10, 5, 0, 10), "HDF5", "H5Tset_fields");
  check(H5Tset_size(t.get(), 2), "HDF5", "H5Tset_size");
  check(H5Tset_ebias(t.get(), 15), "HDF5", "H5Tset_ebias");
  return t;
}

H5Id bool_type() {
  H5Id t = check_id(H5Tenum_create(H5T_NATIVE_INT8), "HDF5", "H5Tenum_create");
  const int8_t no = 0, yes = 1;
  check(H5Tenum_insert(t.get(), "FALSE", &no), "HDF5", "H5Tenum_insert");
  check(H5Tenum_insert(t.get(), "TRUE", &yes), "HDF5", "H5Tenum_insert");
  return t;
}

H5Id complex_type(hid_t part, size_t part_size) {
  H5Id t = check_id(H5Tcreate(H5T_COMPOUND, 2 * part_size), "HDF5", "H5Tcreate");
  check(H5Tinsert(t.get(), "r", 0, part), "HDF5", "H5Tinsert");
  check(H5Tinsert(t.get(), "i", part_size, part), "HDF5", "H5Tinsert");
  return t;
}

std::string member_name(hid_t type, unsigned i) {
  char* name = H5Tget_member_name(type, i);
  if (name == nullptr) return {};
  std::string out(name);
  H5free_memory(name);
  return out;
}

StoredType unsupported(std::string what) {
  StoredType s;
  s.description = std::move(what);
  return s;
}

StoredType tensor(at::ScalarType dtype) {
  StoredType s;
  s.kind = StoredType::Kind::Tensor;
  s.dtype = dtype;
  return s;
}

}  // namespace

namespace {

H5Id build_tensor_type(at::ScalarType dtype) {
  switch (dtype) {
    case at::kBool: return bool_type();
    case at::kByte: return copy(H5T_NATIVE_UINT8);
    case at::kChar: return copy(H5T_NATIVE_INT8);
    case at::kShort: return copy(H5T_NATIVE_INT16);
    case at::kInt: return copy(H5T_NATIVE_INT32);
    case at::kLong: return copy(H5T_NATIVE_INT64);
    case at::kHalf: return half_type();
    case at::kBFloat16: return copy(H5T_NATIVE_UINT16);  // plus kDtypeAttribute
    case at::kFloat: return copy(H5T_NATIVE_FLOAT);
    case at::kDouble: return copy(H5T_NATIVE_DOUBLE);
    case at::kComplexFloat: return complex_type(H5T_NATIVE_FLOAT, 4);
    case at::kComplexDouble: return complex_type(H5T_NATIVE_DOUBLE, 8);
    default:
      TD_THROW(NotImplementedError, "HDF5 cannot store tensors of dtype ", torch_dtype_name(dtype),
               " (h5py has no type for it either)");
  }
}

// A type built once and shared: each call returns a new reference to it (building a type
// costs several HDF5 calls, on every read and write).
H5Id shared(hid_t type) {
  check(H5Iinc_ref(type), "HDF5", "H5Iinc_ref");
  return H5Id(type);
}

}  // namespace

hid_t memory_type(at::ScalarType dtype) {
  // One slot per ScalarType, built on first use (the built ones live until the process ends).
  static std::mutex mutex;
  static std::array<H5Id, static_cast<size_t>(at::ScalarType::NumOptions)> cache;
  const auto slot = static_cast<size_t>(dtype);
  TD_CHECK(slot < cache.size(), NotImplementedError, "HDF5 cannot store tensors of dtype ", torch_dtype_name(dtype));
  std::lock_guard<std::mutex> lock(mutex);
  if (!cache[slot].valid()) cache[slot] = build_tensor_type(dtype);
  return cache[slot].get();
}

H5Id tensor_type(at::ScalarType dtype) { return shared(memory_type(dtype)); }

H5Id string_type() {
  static const H5Id type = [] {
    H5Id t = copy(H5T_C_S1);
    check(H5Tset_size(t.get(), H5T_VARIABLE), "HDF5", "H5Tset_size");
    check(H5Tset_cset(t.get(), H5T_CSET_UTF8), "HDF5", "H5Tset_cset");
    return t;
  }();
  return shared(type.get());
}

StoredType classify(hid_t type) {
  const H5T_class_t cls = H5Tget_class(type);
  const size_t size = H5Tget_size(type);
  switch (cls) {
    case H5T_INTEGER: {
      const bool is_signed = H5Tget_sign(type) == H5T_SGN_2;
      if (is_signed) {
        switch (size) {
          case 1: return tensor(at::kChar);
          case 2: return tensor(at::kShort);
          case 4: return tensor(at::kInt);
          case 8: return tensor(at::kLong);
          default: break;
        }
      } else if (size == 1) {
        return tensor(at::kByte);
      } else if (size == 2) {
        return tensor(at::kBFloat16);  // only with kDtypeAttribute; the caller checks
      }
      return unsupported(std::string(is_signed ? "int" : "uint") + std::to_string(8 * size) +
                         " (LibTorch has no such dtype)");
    }
    case H5T_FLOAT:
      if (size == 2) return tensor(at::kHalf);
      if (size == 4) return tensor(at::kFloat);
      if (size == 8) return tensor(at::kDouble);
      return unsupported("a " + std::to_string(8 * size) + "-bit float");
    case H5T_ENUM: {
      // h5py's bool: an int8 enum with exactly FALSE=0 and TRUE=1.
      if (H5Tget_nmembers(type) == 2 && size == 1) {
        int8_t v0 = -1, v1 = -1;
        H5Tget_member_value(type, 0, &v0);
        H5Tget_member_value(type, 1, &v1);
        if (member_name(type, 0) == "FALSE" && v0 == 0 && member_name(type, 1) == "TRUE" && v1 == 1)
          return tensor(at::kBool);
      }
      return unsupported("an enum other than h5py's bool");
    }
    case H5T_COMPOUND: {
      if (H5Tget_nmembers(type) == 2 && member_name(type, 0) == "r" && member_name(type, 1) == "i") {
        H5Id part(H5Tget_member_type(type, 0));
        if (part.valid() && H5Tget_class(part.get()) == H5T_FLOAT) {
          if (H5Tget_size(part.get()) == 4) return tensor(at::kComplexFloat);
          if (H5Tget_size(part.get()) == 8) return tensor(at::kComplexDouble);
        }
      }
      return unsupported("a compound type other than h5py's complex {r, i}");
    }
    case H5T_STRING: {
      StoredType s;
      s.kind = StoredType::Kind::String;
      return s;
    }
    case H5T_OPAQUE: {
      char* tag = H5Tget_tag(type);
      std::string t = tag ? tag : "";
      if (tag) H5free_memory(tag);
      StoredType s;
      if (t.rfind("NUMPY:", 0) != 0) return unsupported("an opaque type tagged '" + t + "'");
      s.kind = StoredType::Kind::Opaque;
      s.tag = t.substr(6);
      return s;
    }
    default:
      return unsupported("an HDF5 type of class " + std::to_string(static_cast<int>(cls)));
  }
}

}  // namespace h5
}  // namespace tensordict
