// tensordict_cpp: the Python module over the C++ TensorDict (issue 32, first part). Tensors cross
// the boundary as the same at::Tensor objects (torch's own pybind11 caster): no copies.
#include <torch/csrc/Dtype.h>
#include <torch/csrc/DynamicTypes.h>
#include <torch/python.h>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <sstream>
#include <string>
#include <vector>

#include <tensordict/ops.h>
#include <tensordict/python/convert.h>
#include <tensordict/tensordict.h>
#include <tensordict/typed/field.h>
#ifdef TENSORDICT_PY_HDF5
#include <tensordict/backends/persistent.h>
#endif
#ifdef TENSORDICT_PY_REDIS
#include <tensordict/backends/store.h>
#endif

namespace py = pybind11;
namespace td = tensordict;

namespace {

using td::python::entry_to_py;
using td::python::indices_of;
using td::python::is_key;
using td::python::json_of;
using td::python::key_of;
using td::python::key_to_py;

std::string repr_of(const td::TensorDict& t) {
  std::ostringstream s;
  s << t;
  return s.str();
}

// A nested dict of tensors, dicts and JSON-able values as the entries of a TensorDict.
void fill(td::TensorDict& out, const py::dict& items) {
  for (const auto& [k, v] : items) {
    const std::string key = py::str(k);
    if (THPVariable_Check(v.ptr())) {
      out.set(key, v.cast<at::Tensor>());
    } else if (py::isinstance<td::TensorDict>(v)) {
      out.set(key, td::EntryInit(v.cast<td::TensorDict>()));
    } else if (py::isinstance<py::dict>(v)) {
      td::TensorDict child = td::TensorDict::empty_with(out.batch_size());
      fill(child, v.cast<py::dict>());
      out.set(key, td::EntryInit(child));
    } else {
      out.set_non_tensor(key, json_of(v));
    }
  }
}

// As Python tensordict's TensorDict(source, batch_size, device): with a device, leaves move there.
td::TensorDict from_dict(const py::dict& items, const std::vector<int64_t>& batch_size, const py::object& device) {
  td::TensorDict out = td::TensorDict::empty_with(batch_size);
  fill(out, items);
  if (!device.is_none()) out = out.to(td::python::device_of(device));
  return out;
}

py::dict py_dict_of(const td::TensorDict& t) {
  py::dict out;
  for (const auto& [key, entry] : t.items()) {
    out[py::str(key.parts()[0])] = entry.is_tensordict() ? py::object(py_dict_of(entry.tensordict())) : entry_to_py(entry);
  }
  return out;
}

// Any object with Python tensordict's interface (batch_size, keys(include_nested=True,
// leaves_only=True), get): its tensors shared, without importing tensordict.
td::TensorDict from_tensordict(const py::object& source) {
  if (py::isinstance<td::TensorDict>(source)) return source.cast<td::TensorDict>();
  td::TensorDict out = td::TensorDict::empty_with(td::python::batch_of(source.attr("batch_size")));
  py::object keys = source.attr("keys")(py::arg("include_nested") = true, py::arg("leaves_only") = true);
  for (const py::handle& key : keys) {
    py::object value = source.attr("get")(key);
    const td::NestedKey k = key_of(key);
    if (THPVariable_Check(value.ptr())) {
      out.set(k, value.cast<at::Tensor>());
    } else {
      out.set_non_tensor(k, json_of(value));
    }
  }
  return out;
}

// The same TensorDict in Python tensordict's class when it is importable, else a nested dict.
py::object to_tensordict(const td::TensorDict& t) {
  try {
    py::object cls = py::module_::import("tensordict").attr("TensorDict");
    return cls(py_dict_of(t), py::arg("batch_size") = py::cast(t.batch_size().vec()));
  } catch (const py::error_already_set&) {
    return py_dict_of(t);
  }
}

std::vector<td::TensorDict> tensordicts_of(const py::sequence& items) {
  std::vector<td::TensorDict> out;
  for (const py::handle& item : items) out.push_back(from_tensordict(py::reinterpret_borrow<py::object>(item)));
  return out;
}

// new_zeros(2, 3) or new_zeros([2, 3]): Python's *size.
std::vector<int64_t> sizes_of(const py::args& size) {
  if (size.size() == 1 && !py::isinstance<py::int_>(size[0])) return td::python::batch_of(size[0]);
  return td::python::batch_of(size);
}

// __<name>__ with a TensorDict, a tensor, an int or a float on the right; with Reflected, also
// __r<name>__ for a number on the left (Python tries it when the number's own operator fails).
template <bool Reflected = true, class Op>
void bind_binary(py::class_<td::TensorDict>& cls, const std::string& name, Op op) {
  const std::string dunder = "__" + name + "__";
  cls.def(dunder.c_str(), [op](const td::TensorDict& a, const td::TensorDict& b) { return op(a, b); });
  cls.def(dunder.c_str(), [op](const td::TensorDict& a, const at::Tensor& b) { return op(a, b); });
  cls.def(dunder.c_str(), [op](const td::TensorDict& a, int64_t b) { return op(a, c10::Scalar(b)); });
  cls.def(dunder.c_str(), [op](const td::TensorDict& a, double b) { return op(a, c10::Scalar(b)); });
  if constexpr (Reflected) {
    const std::string reflected_name = "__r" + name + "__";
    cls.def(reflected_name.c_str(), [op](const td::TensorDict& a, int64_t b) { return op(c10::Scalar(b), a); });
    cls.def(reflected_name.c_str(), [op](const td::TensorDict& a, double b) { return op(c10::Scalar(b), a); });
  }
}

// __i<name>__: writes into the leaves and returns the same object (`td += 1`).
template <class Op>
void bind_inplace(py::class_<td::TensorDict>& cls, const std::string& name, Op op) {
  const std::string dunder = "__" + name + "__";
  auto self = [](td::TensorDict& a) { return py::cast(a, py::return_value_policy::reference); };
  cls.def(dunder.c_str(), [op, self](td::TensorDict& a, const td::TensorDict& b) { op(a, b); return self(a); });
  cls.def(dunder.c_str(), [op, self](td::TensorDict& a, const at::Tensor& b) { op(a, b); return self(a); });
  cls.def(dunder.c_str(), [op, self](td::TensorDict& a, int64_t b) { op(a, c10::Scalar(b)); return self(a); });
  cls.def(dunder.c_str(), [op, self](td::TensorDict& a, double b) { op(a, c10::Scalar(b)); return self(a); });
}

}  // namespace

PYBIND11_MODULE(tensordict_cpp, m) {
  py::module_::import("torch");  // the tensor caster needs torch's Python types
  m.doc() = "tensordict-cpp from Python: the C++ TensorDict, its tensors shared, not copied";

  // Errors arrive as the exception Python tensordict raises in the same case.
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const td::AttributeError& e) {  // generated classes' undeclared or unset fields
      PyErr_SetString(PyExc_AttributeError, e.what());
    } catch (const td::KeyError& e) {
      PyErr_SetString(PyExc_KeyError, e.what());
    } catch (const td::IndexError& e) {
      PyErr_SetString(PyExc_IndexError, e.what());
    } catch (const td::ValueError& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const td::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const td::NotImplementedError& e) {
      PyErr_SetString(PyExc_NotImplementedError, e.what());
    } catch (const td::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    }
  });

  py::class_<td::TensorDict> cls(m, "TensorDict");
  cls
      .def(py::init(&from_dict), py::arg("source") = py::dict(), py::arg("batch_size") = std::vector<int64_t>{},
           py::arg("device") = py::none())
      .def_static("from_dict", &from_dict, py::arg("source"), py::arg("batch_size") = std::vector<int64_t>{},
                  py::arg("device") = py::none(),
                  "A TensorDict holding the dict's tensors themselves (no copy unless a device moves them).")
      .def("to_dict", &py_dict_of, "A nested dict of the very same tensors (no copy).")
      .def_property_readonly("batch_size", [](const td::TensorDict& t) { return td::python::size_to_py(t.batch_size()); })
      .def_property_readonly("batch_dims", [](const td::TensorDict& t) { return t.batch_dims(); })
      .def_property_readonly("device", [](const td::TensorDict& t) { return td::python::device_to_py(t.device()); })
      .def(
          "keys",
          [](const td::TensorDict& t, bool include_nested, bool leaves_only) {
            py::list out;
            for (const td::NestedKey& k : t.keys(include_nested, leaves_only)) out.append(key_to_py(k));
            return out;
          },
          py::arg("include_nested") = false, py::arg("leaves_only") = false)
      .def("__contains__", [](const td::TensorDict& t, const py::handle& key) { return t.contains(key_of(key)); })
      .def("__len__", [](const td::TensorDict& t) { return t.batch_dims() == 0 ? 0 : t.batch_size()[0]; })
      .def("__getitem__",
           [](const td::TensorDict& t, const py::handle& index) -> py::object {
             if (is_key(index)) return entry_to_py(t.get_entry(key_of(index)));
             return py::cast(t.index(indices_of(index)));
           })
      .def("__setitem__",
           [](td::TensorDict& t, const py::handle& index, const py::object& value) {
             if (is_key(index)) {
               if (THPVariable_Check(value.ptr())) {
                 t.set(key_of(index), value.cast<at::Tensor>());
               } else if (py::isinstance<td::TensorDict>(value)) {
                 t.set(key_of(index), td::EntryInit(value.cast<td::TensorDict>()));
               } else {
                 t.set_non_tensor(key_of(index), json_of(value));
               }
               return;
             }
             t.index_put_(indices_of(index), value.cast<td::TensorDict>());
           })
      .def("clone", [](const td::TensorDict& t, bool recurse) { return t.clone(recurse); }, py::arg("recurse") = true)
      .def("contiguous", &td::TensorDict::contiguous)
      .def(
          "to",
          [](const td::TensorDict& t, const py::object& target) -> td::TensorDict {
            if (THPDtype_Check(target.ptr())) return t.to(reinterpret_cast<THPDtype*>(target.ptr())->scalar_type);
            return t.to(at::Device(py::str(target).cast<std::string>()));
          },
          py::arg("target"))
      .def("unbind", &td::TensorDict::unbind, py::arg("dim") = 0)
      // Structure (issue 33), Python's names: new_* take the new batch size as ints or one sequence.
      .def("new_zeros", [](const td::TensorDict& t, const py::args& size) { return t.new_zeros(sizes_of(size)); })
      .def("new_ones", [](const td::TensorDict& t, const py::args& size) { return t.new_ones(sizes_of(size)); })
      .def("new_full",
           [](const td::TensorDict& t, const py::object& size, double fill) {
             return t.new_full(td::python::batch_of(size), fill);
           },
           py::arg("size"), py::arg("fill_value"))
      .def_property_readonly("dtype",
                             [](const td::TensorDict& t) -> py::object {
                               const std::optional<at::ScalarType> dtype = td::dtype(t);
                               if (!dtype) return py::none();
                               return py::reinterpret_borrow<py::object>(
                                   reinterpret_cast<PyObject*>(torch::getTHPDtype(*dtype)));
                             })
      .def_property_readonly("depth", [](const td::TensorDict& t) { return td::depth(t); })
      .def_property_readonly("sorted_keys", &td::TensorDict::sorted_keys)
      .def("is_contiguous", &td::TensorDict::is_contiguous)
      .def("is_shared", &td::TensorDict::is_shared)
      .def("share_memory_", [](td::TensorDict& t) -> td::TensorDict { return t.share_memory_(); })
      .def("clear", [](td::TensorDict& t) -> td::TensorDict { return t.clear(); })
      .def("popitem",
           [](td::TensorDict& t) {
             auto [key, entry] = t.popitem();
             return py::make_tuple(key, entry_to_py(entry));
           })
      .def("filter_non_tensor_data", &td::TensorDict::filter_non_tensor_data)
      .def("lock_", [](td::TensorDict& t) -> td::TensorDict { return t.lock_(); })
      .def("unlock_", [](td::TensorDict& t) -> td::TensorDict { return t.unlock_(); })
      .def_property_readonly("is_locked", &td::TensorDict::is_locked)
      .def("items",
           [](const td::TensorDict& t) {
             py::list out;
             for (const auto& [key, entry] : t.items()) out.append(py::make_tuple(key_to_py(key), entry_to_py(entry)));
             return out;
           })
      .def("values",
           [](const td::TensorDict& t) {
             py::list out;
             for (const auto& [key, entry] : t.items()) out.append(entry_to_py(entry));
             return out;
           })
      .def(
          "memmap",
          [](const td::TensorDict& t, const std::string& prefix) {
            py::gil_scoped_release released;  // file I/O: other Python threads run meanwhile
            return td::memmap(t, prefix);
          },
          py::arg("prefix"))
      .def("to_tensordict", &to_tensordict,
           "The same tensors as a Python tensordict.TensorDict when tensordict is importable, else a nested dict.")
      .def_static("from_tensordict", &from_tensordict, py::arg("source"),
                  "Shares the tensors of any object with Python tensordict's interface (or a dict-like TensorDict).")
      .def("__str__", &repr_of)
      .def("__repr__", &repr_of);

  // Arithmetic as in Python tensordict: a TensorDict, a tensor or a number on either side (an int
  // stays an int, so integer leaves keep their dtype), in place with +=; comparisons give a
  // TensorDict of bools.
  bind_binary(cls, "add", [](const auto& a, const auto& b) { return td::TensorDict(a + b); });
  bind_binary(cls, "sub", [](const auto& a, const auto& b) { return td::TensorDict(a - b); });
  bind_binary(cls, "mul", [](const auto& a, const auto& b) { return td::TensorDict(a * b); });
  bind_binary(cls, "truediv", [](const auto& a, const auto& b) { return td::TensorDict(a / b); });
  bind_binary<false>(cls, "eq", [](const auto& a, const auto& b) { return td::TensorDict(a == b); });
  bind_binary<false>(cls, "ne", [](const auto& a, const auto& b) { return td::TensorDict(a != b); });
  bind_binary<false>(cls, "lt", [](const auto& a, const auto& b) { return td::TensorDict(a < b); });
  bind_binary<false>(cls, "le", [](const auto& a, const auto& b) { return td::TensorDict(a <= b); });
  bind_binary<false>(cls, "gt", [](const auto& a, const auto& b) { return td::TensorDict(a > b); });
  bind_binary<false>(cls, "ge", [](const auto& a, const auto& b) { return td::TensorDict(a >= b); });
  bind_inplace(cls, "iadd", [](td::TensorDict& a, const auto& b) { a += b; });
  bind_inplace(cls, "isub", [](td::TensorDict& a, const auto& b) { a -= b; });
  bind_inplace(cls, "imul", [](td::TensorDict& a, const auto& b) { a *= b; });
  bind_inplace(cls, "itruediv", [](td::TensorDict& a, const auto& b) { a /= b; });
  cls.def("__neg__", [](const td::TensorDict& a) { return -a; });

  m.def("stack", [](const py::sequence& items, int64_t dim) { return td::stack(tensordicts_of(items), dim); },
        py::arg("tensordicts"), py::arg("dim") = 0);
  m.def("cat", [](const py::sequence& items, int64_t dim) { return td::cat(tensordicts_of(items), dim); },
        py::arg("tensordicts"), py::arg("dim") = 0);
  m.def(
      "lazy_stack",
      [](const py::sequence& items, int64_t dim) { return td::TensorDict(td::lazy_stack(tensordicts_of(items), dim)); },
      py::arg("tensordicts"), py::arg("dim") = 0);
#ifdef TENSORDICT_PY_HDF5
  // HDF5 files in h5py's layout (Python tensordict's PersistentTensorDict), read lazily.
  m.def(
      "from_h5",
      [](const std::string& path, const std::string& mode) {
        py::gil_scoped_release released;
        return td::TensorDict(td::PersistentTensorDict::from_h5(path, mode));
      },
      py::arg("filename"), py::arg("mode") = "r");
  m.def(
      "to_h5",
      [](const td::TensorDict& t, const std::string& path, bool overwrite) {
        td::H5Options options;
        options.overwrite = overwrite;
        py::gil_scoped_release released;
        return td::TensorDict(td::PersistentTensorDict::to_h5(t, path, options));
      },
      py::arg("tensordict"), py::arg("filename"), py::arg("overwrite") = false);
  m.def("close_h5", [](const td::TensorDict& t) { td::PersistentTensorDict::from(t).close(); }, py::arg("tensordict"));
#endif
#ifdef TENSORDICT_PY_REDIS
  // Redis stores in Python tensordict v0.14's layout (TensorDictStore): every write is live.
  auto store_options = [](const std::string& host, int port, const std::string& unix_socket, const std::string& td_id,
                          const std::string& prefix, bool overwrite) {
    td::StoreOptions options;
    options.host = host;
    options.port = port;
    options.unix_socket = unix_socket;
    options.td_id = td_id;
    options.prefix = prefix;
    options.overwrite = overwrite;
    return options;
  };
  m.def(
      "store_from_tensordict",
      [store_options](const td::TensorDict& t, const std::string& host, int port, const std::string& unix_socket,
                      const std::string& td_id, const std::string& prefix, bool overwrite) {
        const td::StoreOptions options = store_options(host, port, unix_socket, td_id, prefix, overwrite);
        py::gil_scoped_release released;
        return td::TensorDict(td::TensorDictStore::from_tensordict(t, options));
      },
      py::arg("tensordict"), py::kw_only(), py::arg("host") = "localhost", py::arg("port") = 6379,
      py::arg("unix_socket") = "", py::arg("td_id") = "", py::arg("prefix") = "tensordict",
      py::arg("overwrite") = false);
  m.def(
      "from_store",
      [store_options](const std::string& td_id, const std::string& host, int port, const std::string& unix_socket,
                      const std::string& prefix) {
        const td::StoreOptions options = store_options(host, port, unix_socket, td_id, prefix, false);
        py::gil_scoped_release released;
        return td::TensorDict(td::TensorDictStore::from_store(td_id, options));
      },
      py::arg("td_id"), py::kw_only(), py::arg("host") = "localhost", py::arg("port") = 6379,
      py::arg("unix_socket") = "", py::arg("prefix") = "tensordict");
  m.def("store_id", [](const td::TensorDict& t) { return td::store_id(t); }, py::arg("tensordict"));
#endif
  m.def(
      "load_memmap",
      [](const std::string& prefix) {
        py::gil_scoped_release released;
        return td::load_memmap(prefix);
      },
      py::arg("prefix"));
}
