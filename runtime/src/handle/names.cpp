// Batch-dim names (Python's `names`, refine_names, rename, rename_; issue 33) and the rules by
// which operations carry them (core/dim_names.h). Names live on each level (TensorDictBase);
// a nested level's leading names are its parent's.

#include <algorithm>

#include <ATen/ATen.h>

#include <tensordict/batch_index.h>
#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "core/dim_names.h"

namespace tensordict {
namespace detail {

bool any_named(const DimNames& names) {
  return std::any_of(names.begin(), names.end(), [](const auto& n) { return n.has_value(); });
}

DimNames names_of(const TensorDictBase& level) {
  DimNames out = level.dim_names();
  out.resize(static_cast<size_t>(std::max<int64_t>(level.batch_dims(), 0)));
  return out;
}

void assign_names(TensorDictBase& level, const DimNames& names, bool erase) {
  level.set_dim_names(any_named(names) ? names : DimNames{});
  level.for_each_key([&](const std::string& key, EntryKind kind) {
    if (kind != EntryKind::TensorDict) return;
    Entry child = level.get(key);
    TensorDictBase& c = *child.tensordict_unchecked().impl();
    DimNames own = erase ? DimNames{} : names_of(c);
    DimNames merged(names.begin(), names.end());
    merged.resize(std::max(names.size(), static_cast<size_t>(c.batch_dims())));
    for (size_t i = names.size(); i < own.size(); ++i) merged[i] = own[i];
    merged.resize(static_cast<size_t>(c.batch_dims()));
    assign_names(c, merged, erase);
  });
}

namespace {
void copy_names(const TensorDictBase& from, TensorDictBase& to) {
  to.set_dim_names(from.dim_names());
  to.for_each_key([&](const std::string& key, EntryKind kind) {
    if (kind != EntryKind::TensorDict || from.kind(key) != EntryKind::TensorDict) return;
    Entry src = from.get(key);
    Entry dst = to.get(key);
    copy_names(*src.tensordict_unchecked().impl(), *dst.tensordict_unchecked().impl());
  });
}
}  // namespace

TensorDict named_snapshot(const TensorDictBase& level) {
  TensorDict out = level.snapshot();
  if (C10_UNLIKELY(!level.dim_names().empty())) copy_names(level, *out.impl());
  return out;
}

DimNames names_after_index(const DimNames& names, const BatchIndex& index) {
  const auto& items = index.items();
  using Kind = BatchIndex::Item::Kind;
  if (items.size() == 1 && items[0].kind == Kind::Tensor && items[0].tensor.scalar_type() == at::kBool) {
    DimNames out{std::nullopt};
    out.insert(out.end(), names.begin() + std::min<size_t>(items[0].tensor.dim(), names.size()), names.end());
    return out;
  }
  DimNames out;
  size_t dim = 0;
  bool tensor_seen = false;
  for (const auto& item : items) {
    switch (item.kind) {
      case Kind::None:
      case Kind::Boolean:
        out.emplace_back();
        break;
      case Kind::Integer:
        ++dim;
        break;
      case Kind::Slice:
        out.push_back(dim < names.size() ? names[dim] : std::nullopt);
        ++dim;
        break;
      case Kind::Tensor: {
        const bool mask = item.tensor.scalar_type() == at::kBool;
        if (mask) {
          out.emplace_back();  // a mask inside a tuple: its dims become one unnamed dim
          dim += static_cast<size_t>(item.tensor.dim());
        } else {
          if (!tensor_seen) out.insert(out.end(), static_cast<size_t>(item.tensor.dim()), dim < names.size() ? names[dim] : std::nullopt);
          tensor_seen = true;
          ++dim;
        }
        break;
      }
    }
  }
  for (; dim < names.size(); ++dim) out.push_back(names[dim]);
  out.resize(index.result_batch_size().size());
  return out;
}

DimNames names_after_rearrange(const DimNames& names, c10::IntArrayRef source) {
  DimNames out;
  for (int64_t s : source) out.push_back(s >= 0 && static_cast<size_t>(s) < names.size() ? names[s] : std::nullopt);
  return out;
}

}  // namespace detail

using detail::names_of;

namespace {

std::string names_str(const DimNames& names) {
  std::string out = "[";
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += ", ";
    out += names[i] ? "'" + *names[i] + "'" : "None";
  }
  return out + "]";
}

// Python's _set_names checks: unique names first, then one per batch dim.
void check_names(const DimNames& names, int64_t batch_dims) {
  for (size_t i = 0; i < names.size(); ++i) {
    for (size_t j = i + 1; j < names.size(); ++j) {
      TD_CHECK(!(names[i] && names[i] == names[j]), ValueError, "Some dimension names are non-unique: ",
               names_str(names), ".");
    }
  }
  TD_CHECK(static_cast<int64_t>(names.size()) == batch_dims, ValueError,
           "the length of the dimension names must equate the tensordict batch_dims attribute. Got ",
           names_str(names), " for batch_dims ", batch_dims, ".");
}

DimNames renamed(const DimNames& current, const NameMap& mapping) {
  DimNames out = current;
  std::vector<std::string> unknown;
  for (const auto& [from, to] : mapping) {
    auto it = std::find(out.begin(), out.end(), std::optional<std::string>(from));
    if (it == out.end()) {
      unknown.push_back(from);
      continue;
    }
    *it = to;
  }
  if (!unknown.empty()) {
    DimNames u(unknown.begin(), unknown.end());
    TD_THROW(ValueError, "Some names to be renamed were not part of the tensordict names: ", names_str(u),
             " vs ", names_str(current), ".");
  }
  return out;
}

}  // namespace

DimNames TensorDict::names() const { return names_of(*impl_); }

TensorDict& TensorDict::set_names(const DimNames& names) {
  if (!detail::any_named(names)) {
    detail::assign_names(*impl_, {}, /*erase=*/true);
    return *this;
  }
  check_names(names, batch_dims());
  detail::assign_names(*impl_, names);
  return *this;
}

TensorDict& TensorDict::refine_names(const DimNames& names) {
  const std::optional<std::string> ellipsis("...");
  const auto n_ellipsis = std::count(names.begin(), names.end(), ellipsis);
  TD_CHECK(n_ellipsis <= 1, ValueError, "refine_names: at most one '...' is allowed, got ", names_str(names));
  const DimNames current = names_of(*impl_);
  // '...' stands for the current names of the dims it covers.
  DimNames wanted;
  for (const auto& name : names) {
    if (name != ellipsis) {
      wanted.push_back(name);
      continue;
    }
    const int64_t fill = batch_dims() - static_cast<int64_t>(names.size()) + 1;
    for (int64_t i = 0; i < fill; ++i) wanted.push_back(current[wanted.size()]);
  }
  TD_CHECK(wanted.size() <= current.size(), IndexError, "refine_names: ", names.size(),
           " names for a tensordict with ", batch_dims(), " batch dims");
  for (size_t i = 0; i < wanted.size(); ++i) {
    if (!current[i] || wanted[i] == current[i]) continue;
    TD_THROW(RuntimeError, "refine_names: cannot coerce TensorDict names ", names_str(current), " with ",
             names_str(names), ".");
  }
  return set_names(wanted);
}

TensorDict TensorDict::rename(const DimNames& names) const {
  TensorDict out = clone(/*recurse=*/false);
  out.rename_(names);
  return out;
}

TensorDict TensorDict::rename(const NameMap& mapping) const {
  TensorDict out = clone(/*recurse=*/false);
  out.rename_(mapping);
  return out;
}

TensorDict& TensorDict::rename_(const DimNames& names) {
  TD_CHECK(!names.empty() || batch_dims() == 0, ValueError,
           "Neither a name map nor a name list was passed. Only one is accepted.");
  return set_names(names);
}

TensorDict& TensorDict::rename_(const NameMap& mapping) {
  TD_CHECK(!mapping.empty() || batch_dims() == 0, ValueError,
           "Neither a name map nor a name list was passed. Only one is accepted.");
  return set_names(renamed(names_of(*impl_), mapping));
}

}  // namespace tensordict
