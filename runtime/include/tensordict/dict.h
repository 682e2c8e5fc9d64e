#pragma once
// Python's to_dict(): a tensordict as nested string-keyed records, in its key order. Batch size,
// device and names are not kept (as in Python).

#include <string>
#include <utility>
#include <variant>
#include <vector>

#include <tensordict/json.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

struct DictValue;
/// Key -> value pairs in the tensordict's key order.
using Dict = std::vector<std::pair<std::string, DictValue>>;
/// A tensor leaf, a non-tensor value (a stack: the nested list of its values) or a nested record.
struct DictValue : std::variant<at::Tensor, json::Value, Dict> {
  using variant::variant;
};

struct ToDictOptions {
  /// False drops non-tensor entries whose value is null (Python's retain_none).
  bool retain_none = true;
  /// Tensor leaves as nested lists of numbers (json::Value), as Python's convert_tensors=True.
  bool convert_tensors = false;
};

Dict to_dict(const TensorDict& td, const ToDictOptions& options = {});
/// A tensor's values as nested JSON lists (bool, int64 or double numbers); TypeError for complex.
json::Value tensor_to_json(const at::Tensor& tensor);

}  // namespace tensordict
