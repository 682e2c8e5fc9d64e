#include "backends/consolidated/metadata_reader.h"

#include <algorithm>
#include <string_view>
#include <utility>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <c10/util/strides.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "backends/in_memory/level_builder.h"

namespace tensordict {
namespace consolidated {

namespace {

[[noreturn]] void bad_metadata(const std::string& source, const std::string& what) {
  TD_THROW(StorageError, source, ": malformed consolidated metadata: ", what);
}

// `v`'s integers appended to `out`; false when `v` is not a list of integers.
bool read_ints_into(const json::Value& v, c10::SmallVectorImpl<int64_t>& out) {
  if (!v.is_array()) return false;
  out.reserve(out.size() + v.as_array().size());
  for (const auto& x : v.as_array()) {
    if (!x.is_int()) return false;
    out.push_back(x.as_int());
  }
  return true;
}

std::vector<int64_t> read_ints(const json::Value& v, const std::string& source, const std::string& what) {
  c10::SmallVector<int64_t, 8> out;
  if (!read_ints_into(v, out)) bad_metadata(source, what + " is not a list of integers");
  return std::vector<int64_t>(out.begin(), out.end());
}

// A nested level: an in-memory level (or a lazy stack of them) whose leaves view `storage`.
TensorDict build_level(const at::Tensor& storage, const LeafFlats* flats, const json::Value& meta,
                       std::optional<at::Device> device, const std::string& source);

}  // namespace

size_t entry_count(const json::Value& meta) {
  size_t n = 0;
  for (const auto& [key, value] : meta.as_object()) {
    if (!is_metadata_field(key)) {
      ++n;
    } else if ((key == "leaves" || key == "non_tensors") && value.is_object()) {
      n += value.as_object().size();
    }
  }
  return n;
}

std::vector<const json::Value*> lazy_members(const json::Value& meta) {
  size_t children = 0;
  for (const auto& field : meta.as_object()) children += is_metadata_field(field.first) ? 0 : 1;
  std::vector<const json::Value*> out(children, nullptr);
  for (const auto& [key, value] : meta.as_object()) {
    // "0", "1", ... as std::to_string writes them: no sign, no leading zero.
    if (is_metadata_field(key) || key.empty() || key.size() > 19 || (key.size() > 1 && key[0] == '0')) continue;
    size_t i = 0;
    bool digits = true;
    for (const char c : key) {
      digits = digits && c >= '0' && c <= '9';
      i = i * 10 + static_cast<size_t>(c - '0');
    }
    if (digits && i < children) out[i] = &value;  // the parser kept one member a key
  }
  return out;
}

const std::string& level_class(const json::Value& meta, const std::string& source) {
  if (!meta.is_object()) bad_metadata(source, "a level is not an object");
  const json::Value* cls = meta.find("cls");
  if (!cls || !cls->is_string()) bad_metadata(source, "a level has no \"cls\"");
  TD_CHECK(cls->as_string() == "TensorDict" || cls->as_string() == kLazyClass, StorageError, source,
           ": consolidated class ", cls->as_string(), " is not supported by the C++ loader");
  return cls->as_string();
}

std::vector<int64_t> level_batch(const json::Value& meta, const std::string& source) {
  TD_CHECK(level_class(meta, source) == "TensorDict", StorageError, source, ": expected a TensorDict level, got ",
           kLazyClass);
  const json::Value* cm = meta.find("cls_metadata");
  if (!cm || !cm->is_object() || !cm->find("batch_size")) bad_metadata(source, "no cls_metadata.batch_size");
  return read_ints(*cm->find("batch_size"), source, "batch_size");
}

DimNames level_names(const json::Value& meta, size_t batch_dims) {
  const json::Value* cm = meta.find("cls_metadata");
  const json::Value* names = cm && cm->is_object() ? cm->find("names") : nullptr;
  if (!names || !names->is_array() || names->as_array().size() != batch_dims) return {};
  DimNames out;
  bool any = false;
  for (const json::Value& n : names->as_array()) {
    if (!n.is_null() && !n.is_string()) return {};
    out.push_back(n.is_string() ? std::optional<std::string>(n.as_string()) : std::nullopt);
    any = any || n.is_string();
  }
  return any ? out : DimNames{};
}

void fill_level(LevelBuilder& out, const at::Tensor& storage, const LeafFlats* flats, const json::Value& meta,
                std::optional<at::Device> device, const std::string& source) {
  const int64_t total = storage.numel();
  // A key may name one entry of a level: a leaf, non-tensor data or a nested level. Checked on
  // the sorted keys before the nested levels are built (no set allocated a key).
  c10::SmallVector<std::string_view, 32> keys;
  c10::SmallVector<int64_t, 8> shape;
  if (const json::Value* leaves = meta.find("leaves")) {
    if (!leaves->is_object()) bad_metadata(source, "\"leaves\" is not an object");
    for (const auto& [key, spec] : leaves->as_object()) {
      keys.push_back(key);
      // Only an error names the leaf, so its name is made then.
      auto what = [&key = key] { return "leaf " + NestedKey(key).repr(); };
      if (!spec.is_array() || spec.as_array().size() < 5) bad_metadata(source, what() + " is not [dtype, shape, start, stop, pad]");
      const auto& a = spec.as_array();
      if (!a[0].is_string() || !a[2].is_int() || !a[3].is_int()) bad_metadata(source, what() + " has a bad entry");
      auto dtype = dtype_from_torch_name(a[0].as_string());
      TD_CHECK(dtype.has_value(), StorageError, source, ": unknown dtype ", a[0].as_string(), " for ", what());
      shape.clear();
      if (!read_ints_into(a[1], shape)) bad_metadata(source, what() + " shape is not a list of integers");
      int64_t numel = 1;
      for (int64_t s : shape) {
        if (s < 0) bad_metadata(source, what() + " has a negative size (jagged tensors are not supported)");
        numel *= s;
      }
      const int64_t start = a[2].as_int();
      const int64_t stop = a[3].as_int();
      const auto item = static_cast<int64_t>(c10::elementSize(*dtype));
      const int64_t n = numel * item;
      // Aligned to the element (Python pads leaves to 8 bytes only when dtypes differ).
      TD_CHECK(start >= 0 && start % item == 0 && stop >= start + n && stop <= total, StorageError, source, ": ", what(),
               " spans bytes [", start, ", ", stop, ") which do not hold ", n, " aligned bytes inside the ", total,
               "-byte storage");
      if (const at::Tensor* flat = flats != nullptr ? flats->find(*dtype, start, n) : nullptr) {
        out.append_lazy_view(key, *flat, start / item, shape, c10::contiguous_strides(shape));
      } else {
        out.append(key, storage.narrow(0, start, n).view(*dtype).view(shape));
      }
    }
  }
  if (const json::Value* nts = meta.find("non_tensors")) {
    if (!nts->is_object()) bad_metadata(source, "\"non_tensors\" is not an object");
    for (const auto& [key, spec] : nts->as_object()) {
      keys.push_back(key);
      if (!spec.is_array() || spec.as_array().empty()) bad_metadata(source, "non-tensor " + key + " is not [data, batch_size, device]");
      out.append(key, NonTensorData(spec.as_array()[0]));
    }
  }
  for (const auto& field : meta.as_object()) {
    if (!is_metadata_field(field.first)) keys.push_back(field.first);
  }
  std::sort(keys.begin(), keys.end());
  const auto twice = std::adjacent_find(keys.begin(), keys.end());
  if (twice != keys.end())
    bad_metadata(source, "the key " + NestedKey(*twice).repr() + " names two entries of one level");
  for (const auto& [key, value] : meta.as_object()) {
    if (is_metadata_field(key)) continue;
    out.append(key, build_level(storage, flats, value, device, source));
  }
}

TensorDict build_lazy_stack(const at::Tensor& storage, const json::Value& meta, std::optional<at::Device> device,
                            const std::string& source) {
  const json::Value* cm = meta.find("cls_metadata");
  const json::Value* dim = cm && cm->is_object() ? cm->find("stack_dim") : nullptr;
  if (!dim || !dim->is_int()) bad_metadata(source, "a LazyStackedTensorDict level has no integer cls_metadata.stack_dim");
  for (const char* own : {"leaves", "non_tensors"}) {
    const json::Value* v = meta.find(own);
    if (v && !(v->is_object() && v->as_object().empty()))
      bad_metadata(source, std::string("a LazyStackedTensorDict level has ") + own + " of its own");
  }
  const std::vector<const json::Value*> by_index = lazy_members(meta);
  std::vector<TensorDict> members;
  members.reserve(by_index.size());
  for (size_t i = 0; i < by_index.size(); ++i) {
    if (!by_index[i]) bad_metadata(source, "a LazyStackedTensorDict level has " + std::to_string(by_index.size()) +
                                               " children but no member \"" + std::to_string(i) + "\"");
    members.push_back(build_level(storage, nullptr, *by_index[i], device, source));
  }
  TD_CHECK(!members.empty(), StorageError, source, ": a LazyStackedTensorDict level has no members");
  try {
    return LazyStackedTensorDict(std::move(members), dim->as_int());
  } catch (const Error& e) {
    TD_THROW(StorageError, source, ": the members of a LazyStackedTensorDict level do not stack: ", e.message());
  }
}

namespace {

TensorDict build_level(const at::Tensor& storage, const LeafFlats* flats, const json::Value& meta,
                       std::optional<at::Device> device, const std::string& source) {
  if (level_class(meta, source) == kLazyClass) return build_lazy_stack(storage, meta, device, source);
  const std::vector<int64_t> batch = level_batch(meta, source);
  LevelBuilder child(batch, device, entry_count(meta));
  if (flats != nullptr) {
    child.mark_packed_result();
    child.list_flats(flats->all(), !flats->tiles());
  }
  fill_level(child, storage, flats, meta, device, source);
  TensorDict out = child.finish();
  out.impl()->set_dim_names(level_names(meta, batch.size()));
  return out;
}

}  // namespace

}  // namespace consolidated
}  // namespace tensordict
