#pragma once
// Names of Python tensordict's memmap format shared by the writer and the loader.

#include <string>

#include <c10/util/ArrayRef.h>

#include <tensordict/json.h>
#include <tensordict/non_tensor.h>

namespace tensordict {
namespace memmap_detail {

constexpr const char* kTensorDictType = "<class 'tensordict._td.TensorDict'>";
constexpr const char* kPersistentType = "<class 'tensordict.persistent.PersistentTensorDict'>";
constexpr const char* kNonTensorDataType = "<class 'tensordict.tensorclass.NonTensorData'>";
constexpr const char* kMetaDataType = "<class 'tensordict.tensorclass.MetaData'>";
constexpr const char* kNonTensorStackType = "<class 'tensordict.tensorclass.NonTensorStack'>";
constexpr const char* kLazyStackType = "<class 'tensordict._lazy.LazyStackedTensorDict'>";

/// Keys the TensorDict meta.json uses for its own fields: Python loses entries named so.
bool is_reserved_meta_key(const std::string& key);
/// A key whose raw name may be tried as a legacy (pre-0.13) file name.
bool is_safe_legacy_key(const std::string& key, bool collection);
/// How v0.14 stores one non-tensor entry: the parent's marker ("NonTensorData" or
/// "NonTensorStack"), the child directory's meta.json text (a stack's is compact, with a fixed
/// key order), and the pickle sidecar of an earlier save that this JSON makes stale.
struct NonTensorMeta {
  const char* marker;
  std::string text;
  const char* stale_sidecar;
};
NonTensorMeta non_tensor_meta(const NonTensorData& data);

/// A shape (or batch size) as meta.json writes it: a list of integers.
json::Value shape_json(c10::IntArrayRef shape);

/// `a / b` for a directory and an entry name.
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace memmap_detail
}  // namespace tensordict
