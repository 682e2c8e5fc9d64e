#pragma once
// TypedTensorDict<Derived>: a typed class that IS a TensorDict (Python's TypedTensorDict). It
// derives from the TensorDict handle, so it goes wherever a TensorDict is expected and has the
// whole TensorDict API; generated accessors add typed, checked access to its tensor fields.
// The data live in whatever backend the handle points to: `from_tensordict(td)` wraps `td`
// live, without copying.
//
//   class Step : public tensordict::TypedTensorDict<Step> { ... };                // generated
//   class Transition : public tensordict::TypedTensorDict<Transition, Step> { ... };  // extends Step

#include <initializer_list>
#include <optional>
#include <utility>
#include <vector>

#include <tensordict/tensor_dict.h>
#include <tensordict/typed/accessors.h>
#include <tensordict/typed/field.h>
#include <tensordict/typed/typed_ops.h>

namespace tensordict {
namespace typed {

/// Builds the tensordict of a TypedTensorDict constructor: TypeError naming the missing
/// required fields (checked first) or the unexpected ones, Shape/TypeError for a bad value.
TensorDict build_typed_tensordict(const Schema& schema, c10::ArrayRef<TensorDict::Item> items,
                                  c10::IntArrayRef batch_size, std::optional<at::Device> device);
/// from_tensordict's check: required fields among the top-level keys (TypeError naming the
/// missing ones), declared fields that are present well-typed. Extra keys are accepted.
void check_typed_tensordict(const Schema& schema, const TensorDict& td);

/// The root of every TypedTensorDict hierarchy: the TensorDict handle itself.
class TypedTensorDictRoot : public TensorDict {
 public:
  TypedTensorDictRoot() = default;
  TypedTensorDictRoot(Unchecked, TensorDict td) : TensorDict(std::move(td)) {}

  /// The TensorDict holding the fields: this object itself.
  const TensorDict& typed_storage() const { return *this; }
  TensorDict& typed_storage() { return *this; }
};

}  // namespace typed

template <class Derived, class Base = typed::TypedTensorDictRoot>
class TypedTensorDict : public typed::TypedOps<Derived, Base> {
  using Ops = typed::TypedOps<Derived, Base>;

 public:
  /// An empty object (batch size [], no fields): fill it with the generated setters.
  TypedTensorDict() = default;
  /// Wraps `td` without checking it.
  TypedTensorDict(typed::Unchecked tag, TensorDict td) : Ops(tag, std::move(td)) {}
  /// A new in-memory object from field -> value pairs (Python `State(x=..., batch_size=...)`):
  /// every required field must be given and no undeclared one.
  TypedTensorDict(c10::ArrayRef<TensorDict::Item> items, c10::IntArrayRef batch_size,
                  std::optional<at::Device> device)
      : Ops(typed::unchecked,
            typed::build_typed_tensordict(Derived::Traits::schema, items, batch_size, device)) {}

  /// Wraps `td` live (no copy: writes go to `td`'s backend). With `check`, the required fields
  /// must be present and declared fields well-typed (agreeing on named dims); extra keys are
  /// allowed. A frozen class locks `td`.
  static Derived from_tensordict(TensorDict td, bool check = true) {
    if (check) typed::check_typed_tensordict(Derived::Traits::schema, td);
    // A frozen class locks what it wraps: its objects are never writable (Python leaves them so).
    if (Derived::Traits::schema.frozen) td.lock_();
    return Derived(typed::unchecked, std::move(td));
  }
};

}  // namespace tensordict
