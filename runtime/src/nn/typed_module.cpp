// What TypedModule compiles once: writing an output object's fields into the batch.
#include <tensordict/nn/typed_module.h>

#include <algorithm>

#include <tensordict/entry.h>

namespace tensordict {
namespace nn {
namespace detail {

void write_typed_outputs(const std::string& label, const TensorDict& fields, TensorDict& td, const NestedKey& out_at,
                         const Keys& selected, bool narrowed) {
  for (const auto& [key, entry] : fields.items()) {
    NestedKey dest = out_at;
    for (const std::string& part : key.parts()) dest = dest.child(part);
    if (narrowed && std::find(selected.begin(), selected.end(), dest) == selected.end()) continue;
    try {
      td.set(dest, EntryInit(entry));
    } catch (Error& e) {
      e.add_context("while " + label + " wrote its output " + dest.repr());
      throw;
    }
  }
}

}  // namespace detail
}  // namespace nn
}  // namespace tensordict
