// Python's to_dict (tensordict/dict.h).

#include <tensordict/dict.h>

#include <ATen/ATen.h>

#include <tensordict/entry.h>
#include <tensordict/errors.h>

namespace tensordict {

namespace {
json::Value values_of(const at::Tensor& t) {
  if (t.dim() == 0) {
    if (t.scalar_type() == at::kBool) return json::Value(t.item<bool>());
    if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) return json::Value(t.item<int64_t>());
    return json::Value(t.item<double>());
  }
  json::Array out;
  out.reserve(static_cast<size_t>(t.size(0)));
  for (int64_t i = 0; i < t.size(0); ++i) out.push_back(values_of(t[i]));
  return json::Value(std::move(out));
}
}  // namespace

json::Value tensor_to_json(const at::Tensor& tensor) {
  TD_CHECK(!at::isComplexType(tensor.scalar_type()), TypeError, "tensor_to_json: complex tensors (",
           tensor.scalar_type(), ") have no JSON number form");
  // One bulk conversion, then cheap reads of CPU elements.
  const at::Tensor cpu = tensor.detach().to(at::kCPU);
  return values_of(at::isFloatingType(cpu.scalar_type()) ? cpu.to(at::kDouble) : cpu);
}

Dict to_dict(const TensorDict& td, const ToDictOptions& options) {
  Dict out;
  out.reserve(td.num_keys());
  for (const auto& [key, entry] : td.items()) {
    const std::string& name = key[0];
    switch (entry.kind()) {
      case Entry::Kind::Tensor:
        if (options.convert_tensors) out.emplace_back(name, tensor_to_json(entry.tensor_unchecked()));
        else out.emplace_back(name, entry.tensor_unchecked());
        break;
      case Entry::Kind::TensorDict:
        out.emplace_back(name, to_dict(entry.tensordict_unchecked(), options));
        break;
      case Entry::Kind::NonTensor: {
        const NonTensorData& data = entry.non_tensor();
        if (!data.is_stack() && data.value().is_null() && !options.retain_none) break;
        out.emplace_back(name, data.is_stack() ? data.tolist() : data.value());
        break;
      }
      case Entry::Kind::Undefined:
        break;
    }
  }
  return out;
}

}  // namespace tensordict
