#include "backends/consolidated/dtype_groups.h"

#include <algorithm>
#include <vector>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict_base.h>

#include "backends/lazy_stack/lazy_stack_impl.h"

namespace tensordict {
namespace consolidated {

namespace {
// Adds the padded bytes of every leaf of `td` to its dtype's group, walking as consolidate's
// metadata does (a lazy stack's members in order); `order` lists the dtypes as first met.
void size_groups(const TensorDictBase& td, std::array<int64_t, static_cast<size_t>(at::ScalarType::NumOptions)>& bytes,
                 std::vector<at::ScalarType>& order) {
  if (const auto* ls = dynamic_cast<const lazy::LazyStackImpl*>(&td)) {
    for (const TensorDict& member : ls->members()) size_groups(*member.impl(), bytes, order);
    return;
  }
  td.for_each([&](const std::string&, const Entry& entry) {
    if (entry.is_tensor()) {
      const at::Tensor& t = entry.tensor_unchecked();
      const auto dtype = static_cast<size_t>(t.scalar_type());
      if (bytes[dtype] == 0 && std::find(order.begin(), order.end(), t.scalar_type()) == order.end())
        order.push_back(t.scalar_type());
      bytes[dtype] += padded_bytes(t.numel() * static_cast<int64_t>(t.element_size()));
    } else if (entry.is_tensordict()) {
      size_groups(*entry.tensordict_unchecked().impl(), bytes, order);
    }
  });
}
}  // namespace

DtypeGroups::DtypeGroups(const TensorDictBase& td) {
  std::array<int64_t, static_cast<size_t>(at::ScalarType::NumOptions)> bytes{};
  std::vector<at::ScalarType> order;
  size_groups(td, bytes, order);
  for (at::ScalarType dtype : order) {
    next_[static_cast<size_t>(dtype)] = total_;
    total_ += bytes[static_cast<size_t>(dtype)];
  }
}

}  // namespace consolidated
}  // namespace tensordict
