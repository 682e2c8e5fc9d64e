// The small argument types of op_options.h.

#include <tensordict/op_options.h>

#include <string>

#include <tensordict/errors.h>

namespace tensordict {

BinaryDefault::BinaryDefault(const char* mode) : kind_(Kind::Intersection) {
  TD_CHECK(mode != nullptr && std::string(mode) == "intersection", ValueError,
           "default must be a value or \"intersection\", got \"", mode ? mode : "", "\"");
}

const at::Tensor& StateDict::at(const std::string& key) const {
  for (const auto& [k, v] : tensors) {
    if (k == key) return v;
  }
  TD_THROW(KeyError, "key \"", key, "\" not found in the state dict");
}

bool StateDict::contains(const std::string& key) const {
  for (const auto& kv : tensors) {
    if (kv.first == key) return true;
  }
  return false;
}

}  // namespace tensordict
