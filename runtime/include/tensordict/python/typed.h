#pragma once
// Python classes for the classes tdgen generates. The module `tensordict_generate(... PYTHON)`
// builds calls bind_class<T> for each class of its schemas (docs/python.md#generated-classes):
//
//   obs = schemas.Observation(pixels=p, state=s, batch_size=[4])   # checked like the C++ constructor
//   obs.state = torch.zeros(4, 7)      # the C++ setter's checks: batch dims, dtype, event shape
//   obs[1:3], obs.clone(), repr(obs)   # stay Observations
//   schemas.Observation.from_tensordict(td)   # wraps td live, checked, no copy
//
// Every field is a property. Its setter runs what the generated C++ setter runs (and, for a
// nested field, the nested class's checks, which C++ gets from the type system). A
// TypedTensorDict class derives from tensordict_cpp.TensorDict in Python too; a TensorClass
// holds one (`.tensordict`). Needs the tensordict_cpp module (init_module imports it).

#include <tensordict/python/caster.h>
#include <tensordict/python/convert.h>

#include <torch/csrc/Dtype.h>

#include <pybind11/stl.h>

#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include <tensordict/ops.h>
#include <tensordict/typed/accessors.h>
#include <tensordict/typed/field.h>
#include <tensordict/typed/tensor_class.h>
#include <tensordict/typed/typed_tensor_dict.h>

namespace tensordict {
namespace python {

/// What bound classes need before anything else: torch (the tensor caster) and tensordict_cpp
/// (the TensorDict type and the translation of C++ errors into Python's exceptions).
inline void init_module(pybind11::module_& /*m*/) {
  pybind11::module_::import("torch");
  pybind11::module_::import("tensordict_cpp");
}

namespace detail {

// Nested fields come back as the Python class bound for their schema (this module's classes).
using WrapFn = pybind11::object (*)(TensorDict);
inline std::unordered_map<const typed::Schema*, WrapFn>& wrappers() {
  static std::unordered_map<const typed::Schema*, WrapFn> map;
  return map;
}

template <class T>
pybind11::object wrap(TensorDict td) {
  return pybind11::cast(T(typed::unchecked, std::move(td)));
}

// The class attribute that marks a bound generated class (its C++ name).
constexpr const char* kSchemaAttr = "__tdgen_class__";

/// The tensordict behind a value: a bound class's object (shared), a tensordict_cpp.TensorDict,
/// a dict or a tensordict-like object (converted by the caster, tensors shared).
inline TensorDict tensordict_of(const pybind11::handle& value) {
  if (pybind11::hasattr(value, kSchemaAttr) && !pybind11::isinstance<TensorDict>(value))
    return value.attr("tensordict").cast<TensorDict>();
  return value.cast<TensorDict>();
}

/// A Python value as what a field stores. A nested field's value must pass its class's checks.
inline EntryInit field_value(const typed::FieldDescriptor* field, const pybind11::handle& value) {
  if (THPVariable_Check(value.ptr())) return EntryInit(value.cast<at::Tensor>());
  const bool nested = field != nullptr && field->kind == typed::FieldKind::Nested;
  if (nested || pybind11::hasattr(value, kSchemaAttr) || pybind11::isinstance<TensorDict>(value)) {
    TensorDict td = tensordict_of(value);
    if (nested && field->nested_schema != nullptr) typed::check_write(field->nested_schema(), td);
    return EntryInit(std::move(td));
  }
  return EntryInit(NonTensorData(json_of(value)));
}

/// A field's value: a tensor, the nested class's object, or the non-tensor value (per-row
/// values as a list); None for an optional field that is not set. Reading a required field that
/// is not set raises the C++ accessor's AttributeError.
inline pybind11::object read_field(const TensorDict& td, const typed::Schema& schema, const typed::FieldDescriptor& field) {
  const typed::FieldCache cache;
  const Entry* entry = typed::read_entry(td, field, cache);
  if (entry == nullptr && field.optional) return pybind11::none();
  if (field.kind == typed::FieldKind::Tensor || entry == nullptr)
    return pybind11::cast(typed::read_tensor(td, schema.class_name, field, cache));
  if (field.kind == typed::FieldKind::Nested) {
    const TensorDict& child = typed::read_nested(td, schema.class_name, field, cache);
    if (field.nested_schema != nullptr) {
      auto found = wrappers().find(&field.nested_schema());
      if (found != wrappers().end()) return found->second(child);
    }
    return pybind11::cast(child);
  }
  return entry_to_py(*entry);
}

template <class T>
constexpr bool is_typed_dict = std::is_base_of_v<TensorDict, T>;

/// `T(field=value, ..., batch_size=..., device=...)`: the C++ constructor's checks (required
/// fields given, no undeclared one, each value well-typed). None leaves an optional field unset.
template <class T>
T construct(const pybind11::kwargs& kwargs) {
  const typed::Schema& schema = T::Traits::schema;
  std::vector<int64_t> batch;
  std::optional<at::Device> device;
  std::vector<TensorDict::Item> items;
  for (const auto& [k, v] : kwargs) {
    const std::string key = pybind11::str(k);
    if (key == "batch_size") {
      batch = batch_of(v);
    } else if (key == "device") {
      if (!v.is_none()) device = device_of(v);
    } else if (!v.is_none()) {
      items.emplace_back(key, field_value(schema.find(key), v));
    }
  }
  TensorDict td = is_typed_dict<T> ? typed::build_typed_tensordict(schema, items, batch, device)
                                   : typed::build_tensor_class(schema, items, batch, device);
  return T::from_tensordict(std::move(td), /*check=*/false);
}

/// `obj[key] = value`: a top-level key goes through the field's checks (a TensorClass refuses
/// an undeclared one with AttributeError); a nested key or an undeclared key of a TypedTensorDict
/// (which accepts them) is set as given.
template <class T>
void set_key(T& self, const pybind11::handle& key, const pybind11::handle& value) {
  const NestedKey k = key_of(key);
  if (k.size() == 1 && (!is_typed_dict<T> || T::Traits::schema.find(k.parts()[0]) != nullptr)) {
    typed::set_tensor_class_field(T::Traits::schema, self.typed_storage(), k.parts()[0],
                                  field_value(T::Traits::schema.find(k.parts()[0]), value));
    return;
  }
  if (!is_typed_dict<T>) {  // a TensorClass holds only its fields: the path must start at a nested one
    const typed::FieldDescriptor* first = T::Traits::schema.find(k.parts()[0]);
    TD_CHECK(first != nullptr && first->kind == typed::FieldKind::Nested, AttributeError, T::Traits::name,
             " has no nested field '", k.parts()[0], "' to hold ", k.repr());
  }
  self.typed_storage().set(k, field_value(nullptr, value));
}

}  // namespace detail

/// Binds generated class T into `m` under its schema name, with PyBase (at most one: the
/// class it extends, or tensordict::TensorDict for a TypedTensorDict root) as its Python base.
/// A class already bound (an imported schema bound by an earlier call) is only exported into `m`.
template <class T, class... PyBase>
void bind_class(pybind11::module_& m) {
  namespace py = pybind11;
  static_assert(sizeof...(PyBase) <= 1, "a generated class extends at most one class");
  const typed::Schema& schema = T::Traits::schema;
  if (py::detail::get_type_info(typeid(T)) != nullptr) {
    if (!py::hasattr(m, schema.class_name)) m.attr(schema.class_name) = py::type::of<T>();
    return;
  }
  py::class_<T, PyBase...> cls(m, schema.class_name);
  detail::wrappers()[&schema] = &detail::wrap<T>;
  cls.attr(detail::kSchemaAttr) = py::str(T::Traits::fully_qualified_name);
  cls.def(py::init(&detail::construct<T>));
  cls.def_static(
      "from_tensordict",
      [](const py::object& source, bool check) { return T::from_tensordict(detail::tensordict_of(source), check); },
      py::arg("source"), py::arg("check") = true,
      "Wraps a tensordict live (no copy), checked against the schema unless check=False.");
  cls.def_property_readonly(
      "tensordict", [](const T& self) { return TensorDict(self.typed_storage()); },
      "The TensorDict holding the fields (shared, not copied).");
  cls.def("to_tensordict", [](const T& self) { return self.to_tensordict(); }, "A copy as a plain TensorDict.");
  cls.def_property_readonly("batch_size", [](const T& self) { return size_to_py(self.typed_storage().batch_size()); });
  cls.def_property_readonly("batch_dims", [](const T& self) { return self.typed_storage().batch_dims(); });
  cls.def_property_readonly("device", [](const T& self) { return device_to_py(self.typed_storage().device()); });
  cls.def_property_readonly("is_locked", [](const T& self) { return self.typed_storage().is_locked(); });
  cls.def("__len__", [](const T& self) {
    const TensorDict& td = self.typed_storage();
    return td.batch_dims() == 0 ? 0 : td.batch_size()[0];
  });
  cls.def(
      "keys",
      [](const T& self, bool include_nested, bool leaves_only) {
        py::list out;
        for (const NestedKey& k : self.typed_storage().keys(include_nested, leaves_only)) out.append(key_to_py(k));
        return out;
      },
      py::arg("include_nested") = false, py::arg("leaves_only") = false);
  cls.def("__getitem__", [](const T& self, const py::handle& index) -> py::object {
    if (is_key(index)) return entry_to_py(self.typed_storage().get_entry(key_of(index)));
    return py::cast(self.index(indices_of(index)));
  });
  cls.def("__setitem__", [](T& self, const py::handle& index, const py::object& value) {
    if (is_key(index)) return detail::set_key(self, index, value);
    self.index_put_(indices_of(index), detail::tensordict_of(value));
  });
  cls.def("clone", [](const T& self, bool recurse) { return self.clone(recurse); }, py::arg("recurse") = true);
  cls.def("contiguous", [](const T& self) { return self.contiguous(); });
  cls.def(
      "to",
      [](const T& self, const py::object& target) -> T {
        if (THPDtype_Check(target.ptr())) return self.to(reinterpret_cast<THPDtype*>(target.ptr())->scalar_type);
        return self.to(device_of(target));
      },
      py::arg("target"));
  cls.def("unbind", [](const T& self, int64_t dim) { return self.unbind(dim); }, py::arg("dim") = 0);
  cls.def("lock_", [](T& self) -> T& {
    self.typed_storage().lock_();
    return self;
  }, py::return_value_policy::reference_internal);
  cls.def("unlock_", [](T& self) -> T& {
    self.typed_storage().unlock_();
    return self;
  }, py::return_value_policy::reference_internal);
  cls.def(
      "memmap",
      [](const T& self, const std::string& prefix) {
        py::gil_scoped_release released;  // file I/O: other Python threads run meanwhile
        return T::from_tensordict(tensordict::memmap(self.typed_storage(), prefix), /*check=*/false);
      },
      py::arg("prefix"));
  cls.def_static(
      "load_memmap",
      [](const std::string& prefix) {
        py::gil_scoped_release released;
        return T::load_memmap(prefix);
      },
      py::arg("prefix"), "Maps a directory written by memmap (or Python) and checks it against the schema.");
  cls.def_static(
      "stack", [](const std::vector<T>& items, int64_t dim) { return T::stack(items, dim); }, py::arg("items"),
      py::arg("dim") = 0);
  cls.def("__repr__", [](const T& self) { return self.repr(); });
  cls.def("__str__", [](const T& self) { return self.repr(); });

  for (size_t i = 0; i < schema.num_fields; ++i) {
    const typed::FieldDescriptor& field = schema.fields[i];
    cls.def_property(
        field.name, [&field](const T& self) { return detail::read_field(self.typed_storage(), T::Traits::schema, field); },
        [&field](T& self, const py::object& value) {
          typed::set_tensor_class_field(T::Traits::schema, self.typed_storage(), field.name,
                                        detail::field_value(&field, value));
        });
  }
}

}  // namespace python
}  // namespace tensordict
