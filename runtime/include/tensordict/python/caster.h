#pragma once
// A pybind11 type caster for tensordict::TensorDict, for a user's own pybind11 module:
//
//   #include <tensordict/python/caster.h>
//   m.def("normalize", [](const tensordict::TensorDict& td) { return td * 0.5; });
//
// Python then passes a tensordict_cpp.TensorDict (shared, no copy), a nested dict of tensors
// (batch size []) or any object with Python tensordict's interface (its tensors shared), and gets
// a tensordict_cpp.TensorDict back. Needs the tensordict_cpp module importable (it registers the
// Python type) and the same pybind11 as it was built with. Do not include this header in the
// translation unit that defines the tensordict_cpp module itself.

#include <pybind11/pybind11.h>

#include <tensordict/tensor_dict.h>

namespace pybind11 {
namespace detail {

template <>
struct type_caster<tensordict::TensorDict> : public type_caster_base<tensordict::TensorDict> {
  using Base = type_caster_base<tensordict::TensorDict>;

  bool load(handle src, bool convert) {
    if (!registered()) return false;
    if (Base::load(src, convert)) return true;
    if (!convert) return false;
    // Converted through tensordict_cpp, which shares the tensors; kept alive while the call runs.
    object cls = module_::import("tensordict_cpp").attr("TensorDict");
    converted_ = isinstance<dict>(src) ? cls.attr("from_dict")(src) : cls.attr("from_tensordict")(src);
    return Base::load(converted_, false);
  }

 private:
  // The Python type exists once tensordict_cpp is imported: import it on first use.
  static bool registered() {
    static const bool imported = [] {
      module_::import("tensordict_cpp");
      return true;
    }();
    return imported;
  }
  object converted_;
};

}  // namespace detail
}  // namespace pybind11
