#pragma once
// TensorDictSequential: modules over tensordicts run in order (Python's
// tensordict.nn.TensorDictSequential), with the same in_keys / out_keys rules.

#include <memory>
#include <string>
#include <vector>

#include <tensordict/nn/module.h>

namespace tensordict {
namespace nn {

class TensorDictSequential : public TensorDictModuleBase {
 public:
  /// Runs `modules` in order on one tensordict. Registered as submodules "0", "1", ..., so
  /// parameters() holds every module's. in_keys: each module's in_keys that no earlier module
  /// writes (and not already listed), in order; out_keys: every module's out_keys, a key written
  /// twice listed at its last writer (Python v0.14's _compute_in_and_out_keys).
  explicit TensorDictSequential(std::vector<std::shared_ptr<TensorDictModuleBase>> modules,
                                const Keys& selected_out_keys = {});

  /// Runs every module on `td` and returns it. With select_out_keys in effect, the modules run
  /// on a shallow copy and only the selected out_keys (and the input's own keys) are written back.
  TensorDict forward(TensorDict td) override;
  std::string label() const override { return "TensorDictSequential"; }
  void pretty_print(std::ostream& stream) const override;

  size_t size() const { return modules_.size(); }
  const std::shared_ptr<TensorDictModuleBase>& operator[](size_t i) const { return modules_.at(i); }
  const std::vector<std::shared_ptr<TensorDictModuleBase>>& modules() const { return modules_; }

  /// The modules needed to compute `out_keys` from `in_keys` (Python's select_subsequence):
  /// forward from in_keys, keeping modules whose inputs are all available; then backward from
  /// out_keys, keeping modules that write a needed key. Empty keys: the sequence's own. Nested
  /// sequences are narrowed the same way. The modules are shared, not copied. ValueError when no
  /// module is left.
  std::shared_ptr<TensorDictSequential> select_subsequence(Keys in_keys = {}, Keys out_keys = {}) const;

 private:
  std::vector<std::shared_ptr<TensorDictModuleBase>> modules_;
};

}  // namespace nn
}  // namespace tensordict
