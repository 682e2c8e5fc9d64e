#pragma once
// Python <-> C++ conversions shared by the tensordict_cpp module and the bindings of generated
// classes (typed.h): keys, batch indices, non-tensor (JSON) values and entries. Tensors cross as
// the same at::Tensor objects through torch's own caster (<torch/python.h>): nothing is copied.

#include <torch/python.h>

#include <pybind11/pybind11.h>

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <ATen/TensorIndexing.h>

#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/json.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace python {

/// A key as Python spells it: "a" or ("a", "b").
inline NestedKey key_of(const pybind11::handle& key) {
  if (pybind11::isinstance<pybind11::str>(key)) return NestedKey(key.cast<std::string>());
  if (pybind11::isinstance<pybind11::tuple>(key)) {
    std::vector<std::string> parts;
    for (const pybind11::handle& part : key) {
      if (!pybind11::isinstance<pybind11::str>(part)) throw pybind11::type_error("a nested key is a tuple of str");
      parts.push_back(part.cast<std::string>());
    }
    return NestedKey(std::move(parts));
  }
  throw pybind11::type_error("a key is a str or a tuple of str");
}

inline pybind11::object key_to_py(const NestedKey& key) {
  if (key.size() == 1) return pybind11::str(key.parts()[0]);
  pybind11::tuple out(key.size());
  for (size_t i = 0; i < key.size(); ++i) out[i] = pybind11::str(key.parts()[i]);
  return std::move(out);
}

/// True for "a" and ("a", "b"): a key, not a batch index.
inline bool is_key(const pybind11::handle& index) {
  if (pybind11::isinstance<pybind11::str>(index)) return true;
  if (!pybind11::isinstance<pybind11::tuple>(index) || pybind11::len(index) == 0) return false;
  for (const pybind11::handle& part : index)
    if (!pybind11::isinstance<pybind11::str>(part)) return false;
  return true;
}

/// A JSON-able Python value as the JSON value a non-tensor entry holds (Python's json module
/// decides what is JSON-able, as Python tensordict's stores do).
inline json::Value json_of(const pybind11::handle& value) {
  return json::parse(pybind11::module_::import("json").attr("dumps")(value).cast<std::string>());
}

inline pybind11::object json_to_py(const json::Value& v) {
  return pybind11::module_::import("json").attr("loads")(v.dump());
}

/// A tensor, a TensorDict, or a non-tensor value (one value, or the per-row list of a stack).
inline pybind11::object entry_to_py(const Entry& entry) {
  if (entry.is_tensor()) return pybind11::cast(entry.tensor());
  if (entry.is_tensordict()) return pybind11::cast(entry.tensordict());
  const NonTensorData& data = entry.non_tensor();
  return json_to_py(data.is_uniform() ? data.value() : data.tolist());
}

/// A batch size from Python: a torch.Size, list or tuple of ints.
inline std::vector<int64_t> batch_of(const pybind11::handle& sizes) {
  std::vector<int64_t> out;
  for (const pybind11::handle& d : sizes) out.push_back(d.cast<int64_t>());
  return out;
}

/// One batch index item: an int, a slice, None, Ellipsis, a bool or a tensor.
inline at::indexing::TensorIndex index_of(const pybind11::handle& item) {
  using namespace at::indexing;
  if (pybind11::isinstance<pybind11::bool_>(item)) return TensorIndex(item.cast<bool>());
  if (pybind11::isinstance<pybind11::int_>(item)) return TensorIndex(item.cast<int64_t>());
  if (item.is_none()) return TensorIndex(None);
  if (item.ptr() == Py_Ellipsis) return TensorIndex(Ellipsis);
  if (pybind11::isinstance<pybind11::slice>(item)) {
    const pybind11::slice s = item.cast<pybind11::slice>();
    auto part = [](const pybind11::object& o) -> c10::optional<int64_t> {
      if (o.is_none()) return c10::nullopt;
      return o.cast<int64_t>();
    };
    return TensorIndex(Slice(part(s.attr("start")), part(s.attr("stop")), part(s.attr("step"))));
  }
  if (THPVariable_Check(item.ptr())) return TensorIndex(item.cast<at::Tensor>());
  throw pybind11::type_error("a batch index is an int, a slice, None, Ellipsis, a tensor or a tuple of them");
}

/// A batch index from Python: one item or a tuple of them.
inline std::vector<at::indexing::TensorIndex> indices_of(const pybind11::handle& index) {
  std::vector<at::indexing::TensorIndex> out;
  if (pybind11::isinstance<pybind11::tuple>(index)) {
    for (const pybind11::handle& item : index) out.push_back(index_of(item));
  } else {
    out.push_back(index_of(index));
  }
  return out;
}

/// A batch size as Python tensordict gives it: a torch.Size.
inline pybind11::object size_to_py(c10::IntArrayRef sizes) {
  return pybind11::module_::import("torch").attr("Size")(pybind11::cast(sizes.vec()));
}

/// A tensordict's device: a torch.device, or None for a tensordict without one.
inline pybind11::object device_to_py(const std::optional<at::Device>& device) {
  if (!device) return pybind11::none();
  return pybind11::module_::import("torch").attr("device")(device->str());
}

/// A device from Python: a torch.device or its string.
inline at::Device device_of(const pybind11::handle& device) {
  return at::Device(pybind11::str(device).cast<std::string>());
}

}  // namespace python
}  // namespace tensordict
