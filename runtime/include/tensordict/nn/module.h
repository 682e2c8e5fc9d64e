#pragma once
// tensordict::nn: modules that read their inputs from a tensordict and write their outputs
// back into it (Python's tensordict.nn.TensorDictModule). Kept out of the umbrella header: it
// pulls in <torch/nn/module.h>.
//
//   auto actor = std::make_shared<nn::TensorDictModule>(torch::nn::Linear(64, 8),
//                                                       nn::Keys{"obs"}, nn::Keys{"action"});
//   batch = (*actor)(batch);                      // batch["action"] = linear(batch["obs"])
//   torch::optim::Adam opt(actor->parameters());  // the Linear's parameters

#include <functional>
#include <memory>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <ATen/core/Tensor.h>
#include <torch/nn/module.h>
#include <torch/nn/pimpl.h>

#include <tensordict/errors.h>
#include <tensordict/key.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace nn {

using Keys = std::vector<NestedKey>;

/// What every module over tensordicts has: the keys it reads and writes, and forward(td),
/// which writes its outputs into `td` and returns it. A torch::nn::Module, so parameters(),
/// to(), train()/eval() and torch::optim see the modules it wraps.
class TensorDictModuleBase : public torch::nn::Module {
 public:
  /// The keys forward reads, in the order the wrapped callable takes them.
  const Keys& in_keys() const { return in_keys_; }
  /// The keys forward writes: every output unless select_out_keys narrowed them.
  const Keys& out_keys() const { return out_keys_; }
  /// Every output the module computes, whatever select_out_keys chose.
  const Keys& all_out_keys() const { return all_out_keys_; }

  /// Reads in_keys from `td`, computes, writes out_keys into `td` and returns it.
  virtual TensorDict forward(TensorDict td) = 0;
  TensorDict operator()(TensorDict td) { return forward(std::move(td)); }

  /// Writes only `keys` (each one of all_out_keys(); ValueError naming the first that is not).
  /// The others are still computed (a later module of a sequence may read them) but not written.
  void select_out_keys(const Keys& keys);
  /// Writes every output again.
  void reset_out_keys() { out_keys_ = all_out_keys_; }

  /// How errors name this module: "TensorDictModule(Linear)", "TensorDictSequential".
  virtual std::string label() const = 0;

 protected:
  TensorDictModuleBase(Keys in_keys, Keys out_keys);
  void set_keys(Keys in_keys, Keys out_keys);
  bool narrowed() const { return out_keys_.size() != all_out_keys_.size(); }

 private:
  Keys in_keys_;
  Keys out_keys_;
  Keys all_out_keys_;
};

/// A callable over tensors: the in_keys' tensors in, one tensor per out_key out.
using TensorFunction = std::function<std::vector<at::Tensor>(const std::vector<at::Tensor>&)>;

namespace detail {

inline std::vector<at::Tensor> as_outputs(at::Tensor t) { return {std::move(t)}; }
inline std::vector<at::Tensor> as_outputs(std::vector<at::Tensor> v) { return v; }
template <class... T>
std::vector<at::Tensor> as_outputs(std::tuple<T...> t) {
  return std::apply([](auto&&... x) { return std::vector<at::Tensor>{at::Tensor(std::move(x))...}; }, std::move(t));
}

template <size_t>
using tensor_at = at::Tensor;

template <class M, class Seq, class = void>
struct takes : std::false_type {};
template <class M, size_t... I>
struct takes<M, std::index_sequence<I...>, std::void_t<decltype(std::declval<M&>().forward(std::declval<tensor_at<I>>()...))>>
    : std::true_type {};

template <class M, size_t... I>
std::vector<at::Tensor> call_indexed(M& m, const std::vector<at::Tensor>& in, std::index_sequence<I...>) {
  return as_outputs(m.forward(in[I]...));
}

/// Calls m.forward with the N tensors of `in` (N = in.size(), up to 6), when forward takes N.
template <class M, size_t N>
std::vector<at::Tensor> call_with(M& m, const std::vector<at::Tensor>& in) {
  if constexpr (takes<M, std::make_index_sequence<N>>::value) {
    return call_indexed(m, in, std::make_index_sequence<N>());
  } else {
    (void)m;
    (void)in;
    TD_THROW(TypeError, "the module's forward does not take ", N, " tensors (one per in_key)");
  }
}

template <class T, class = void>
struct is_module_holder : std::false_type {};
template <class T>
struct is_module_holder<T, std::void_t<typename T::ContainedType>>
    : std::is_base_of<torch::nn::ModuleHolder<typename T::ContainedType>, T> {};

/// A callable TensorDictModule takes as a TensorFunction (a ModuleHolder is not one: its call
/// operator is not SFINAE-friendly, so it is ruled out first).
template <class F>
using is_tensor_function =
    std::conjunction<std::negation<is_module_holder<std::decay_t<F>>>,
                     std::is_invocable_r<std::vector<at::Tensor>, F&, const std::vector<at::Tensor>&>>;

/// "torch::nn::Linear" for "torch::nn::LinearImpl": the name users write.
inline std::string holder_name(std::string name) {
  const std::string impl = "Impl";
  if (name.size() > impl.size() && name.compare(name.size() - impl.size(), impl.size(), impl) == 0)
    name.resize(name.size() - impl.size());
  return name;
}

template <class M>
TensorFunction forward_of(std::shared_ptr<M> m) {
  return [m](const std::vector<at::Tensor>& in) -> std::vector<at::Tensor> {
    switch (in.size()) {
      case 0: return call_with<M, 0>(*m, in);
      case 1: return call_with<M, 1>(*m, in);
      case 2: return call_with<M, 2>(*m, in);
      case 3: return call_with<M, 3>(*m, in);
      case 4: return call_with<M, 4>(*m, in);
      case 5: return call_with<M, 5>(*m, in);
      case 6: return call_with<M, 6>(*m, in);
      default: TD_THROW(ValueError, "a torch::nn module takes at most 6 in_keys here; wrap it in a TensorFunction");
    }
  };
}

}  // namespace detail

/// Python's TensorDictModule: forward reads in_keys (nested keys allowed), calls the wrapped
/// callable with their tensors in that order, and writes its outputs to out_keys in order
/// ("_" discards one). Errors name the module and the key: a missing in_key (KeyError), an
/// output count other than out_keys' (ValueError), an output whose leading dims are not the
/// batch size (ShapeError).
class TensorDictModule : public TensorDictModuleBase {
 public:
  /// Any callable over tensors (a TensorFunction); `name` is how errors and the repr call it.
  template <class F, std::enable_if_t<detail::is_tensor_function<F>::value, int> = 0>
  TensorDictModule(F function, Keys in_keys, Keys out_keys, std::string name = "function")
      : TensorDictModule(TensorFunction(std::move(function)), std::move(in_keys), std::move(out_keys), std::move(name),
                         0) {}
  /// A torch::nn module (Linear(...), Sequential(...), a TORCH_MODULE of yours): its forward
  /// takes one tensor per in_key and returns a tensor, a tuple or a vector of tensors. It is
  /// registered as the submodule "module", so parameters() and optimizers see it.
  template <class M>
  TensorDictModule(torch::nn::ModuleHolder<M> module, Keys in_keys, Keys out_keys)
      : TensorDictModule(detail::forward_of(module.ptr()), std::move(in_keys), std::move(out_keys), detail::holder_name(module->name()), 0) {
    register_module("module", module.ptr());
  }

  TensorDict forward(TensorDict td) override;
  std::string label() const override { return "TensorDictModule(" + name_ + ")"; }
  void pretty_print(std::ostream& stream) const override;

  /// The tensors of in_keys, read from `td` (KeyError naming this module and the key).
  std::vector<at::Tensor> read_inputs(const TensorDict& td) const;
  /// Writes `outputs` (one per out_key) into `td`, only the selected out_keys.
  void write_outputs(TensorDict& td, const std::vector<at::Tensor>& outputs) const;

 private:
  TensorDictModule(TensorFunction function, Keys in_keys, Keys out_keys, std::string name, int /*tag*/);
  [[noreturn]] void throw_failed(const std::vector<at::Tensor>& inputs, const std::string& why) const;

  TensorFunction function_;
  std::string name_;
};

}  // namespace nn
}  // namespace tensordict
