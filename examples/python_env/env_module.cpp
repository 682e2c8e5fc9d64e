// reach_env: examples/rollout's C++ environment (ReachEnv) as a Python module. Each call steps
// every environment in C++ and returns a reach.EnvStep, the class generated from env_step.yaml,
// whose tensors Python uses without a copy (train.py trains a policy on them).
#include <pybind11/pybind11.h>

#include <tensordict/python/typed.h>

#include "env.h"
#include "env_step.td.py.h"

namespace py = pybind11;

namespace {

// The environment and the step it last produced, as the generated class.
class PyReachEnv {
 public:
  PyReachEnv(int64_t num_envs, int64_t episode_length) : env_(num_envs, episode_length), num_envs_(num_envs) {}

  reach::EnvStep reset() {
    at::Tensor obs = env_.reset();
    return reach::EnvStep({{"obs", obs}, {"reward", at::zeros({num_envs_})}, {"done", at::zeros({num_envs_}, at::kBool)}},
                          {num_envs_});
  }

  /// Applies `action` (int64 [envs]); the observation returned follows it (finished episodes
  /// restart, `done` marks them).
  reach::EnvStep step(const at::Tensor& action) {
    at::Tensor done;
    at::Tensor reward = env_.step(action, done);
    return reach::EnvStep({{"obs", env_.observation()}, {"reward", reward}, {"done", done}}, {num_envs_});
  }

 private:
  rollout::ReachEnv env_;
  int64_t num_envs_;
};

}  // namespace

PYBIND11_MODULE(reach_env, m) {
  tensordict::python::init_module(m);
  tdgen_bind_env_step(m);  // reach_env.EnvStep, with the schema's checks
  py::class_<PyReachEnv>(m, "ReachEnv")
      .def(py::init<int64_t, int64_t>(), py::arg("num_envs"), py::arg("episode_length") = 50)
      .def("reset", &PyReachEnv::reset, py::call_guard<py::gil_scoped_release>())
      .def("step", &PyReachEnv::step, py::arg("action"), py::call_guard<py::gil_scoped_release>());
}
