// The out-of-line parts of TypedOps' state-dict members (typed_ops.h): the tree a state dict
// would make of an object, which load_state_dict checks against the schema.

#include <tensordict/typed/typed_ops.h>

#include <string>
#include <utility>
#include <vector>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace typed {

TensorDict state_dict_tree(const TensorDict& current, const StateDict& sd, bool with_non_tensor) {
  std::vector<int64_t> batch = current.batch_size().vec();
  for (const auto& [level, size] : sd.batch_sizes) {
    if (level.empty()) batch = size;
  }
  TensorDict tree = TensorDict::empty_with(batch, current.device());
  tree.load_state_dict(sd, /*strict=*/false, /*assign=*/true);
  if (with_non_tensor) restore_non_tensor(tree, current.non_tensor_items(/*include_nested=*/true));
  return tree;
}

void restore_non_tensor(TensorDict& td, const std::vector<std::pair<NestedKey, NonTensorData>>& entries) {
  for (const auto& [key, data] : entries) {
    if (key.size() > 1) {
      std::vector<std::string> parent(key.parts().begin(), key.parts().end() - 1);
      const Entry level = td.find(NestedKey(std::move(parent)));
      if (!level.defined() || !level.is_tensordict()) continue;
    }
    if (td.contains(key)) continue;
    td.set(key, EntryInit(data));
  }
}

}  // namespace typed
}  // namespace tensordict
