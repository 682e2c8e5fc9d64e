// A user's own pybind11 module that takes and returns tensordict::TensorDict through
// <tensordict/python/caster.h> (python/tests/test_caster.py imports it).
#include <torch/python.h>

#include <tensordict/ops.h>
#include <tensordict/python/caster.h>
#include <tensordict/tensordict.h>

PYBIND11_MODULE(tensordict_caster_test, m) {
  m.def("scaled", [](const tensordict::TensorDict& td, double factor) { return td * factor; });
  m.def("obs_ptr", [](const tensordict::TensorDict& td) { return reinterpret_cast<intptr_t>(td.get("obs").data_ptr()); });
  m.def("batch", [](const tensordict::TensorDict& td) { return td.batch_size().vec(); });
}
