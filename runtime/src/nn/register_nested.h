#pragma once
// Registering tensors under dotted names ("layer.0.weight") in a torch::nn::Module, one child
// module per level: what named_parameters() then lists under the same names.

#include <string>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>

namespace tensordict {
namespace nn {
namespace detail {

/// Registers `tensor` itself (not a copy) at `dotted_name` below `root`, as a parameter (keeping
/// its requires_grad) or a buffer; missing levels become empty child modules.
void register_nested(torch::nn::Module& root, const std::string& dotted_name, const at::Tensor& tensor,
                     bool parameter);

}  // namespace detail
}  // namespace nn
}  // namespace tensordict
