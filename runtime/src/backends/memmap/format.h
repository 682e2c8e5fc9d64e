#pragma once
// Names of Python tensordict's memmap format shared by the writer and the loader.

#include <string>

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
/// `a / b` for a directory and an entry name.
std::string join_path(const std::string& dir, const std::string& name);

}  // namespace memmap_detail
}  // namespace tensordict
