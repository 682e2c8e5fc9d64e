#pragma once
// Small helpers shared by the contract tests.

#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include <tensordict/tensordict.h>

namespace contract {

/// True when both tensors view the same storage (a view, not a copy).
inline bool shares_storage(const at::Tensor& a, const at::Tensor& b) {
  return a.storage().unsafeGetStorageImpl() == b.storage().unsafeGetStorageImpl();
}

/// The keys of `td` as strings joined with ".", in listing order.
inline std::vector<std::string> joined_keys(const tensordict::TensorDict& td, bool include_nested = false,
                                            bool leaves_only = false) {
  std::vector<std::string> out;
  for (const auto& k : td.keys(include_nested, leaves_only)) out.push_back(k.join("."));
  return out;
}

/// A 1-d bool mask from 0/1 values (at::tensor has no bool overload in LibTorch 1.13).
inline at::Tensor mask(std::initializer_list<int64_t> values) {
  return at::tensor(std::vector<int64_t>(values), at::kLong).ne(0);
}

using Strings = std::vector<std::string>;
using Sizes = std::vector<int64_t>;

/// Sizes as a vector, comparable in CHECK without unparenthesised commas.
inline Sizes sizes_of(c10::IntArrayRef s) { return Sizes(s.begin(), s.end()); }
/// A bool tensor of `values` (0 or 1).
inline at::Tensor bools(std::initializer_list<int64_t> values) { return at::tensor(values).to(at::kBool); }

/// A repr written for the in-memory backend, with the class names and default device `Backend`
/// shows instead (MemoryMappedTensor and cpu for memory-mapped tensordicts, as in Python), and
/// a lazy stack's extra parts when `lazy` (a reference the lazy backend keeps in memory is not).
template <typename Backend>
std::string for_backend(std::string repr, bool lazy = Backend::kLazyStack) {
  auto replace_all = [&](const std::string& from, const std::string& to) {
    for (size_t pos = repr.find(from); pos != std::string::npos; pos = repr.find(from, pos + to.size()))
      repr.replace(pos, from.size(), to);
  };
  replace_all(": Tensor(", std::string(": ") + Backend::kLeafClass + "(");
  if (std::string(Backend::kTypeName) != "TensorDict") replace_all("TensorDict(\n", std::string(Backend::kTypeName) + "(\n");
  replace_all("device=None", std::string("device=") + Backend::kDefaultDevice);
  if (lazy) {
    // Python's lazy repr: exclusive_fields after the fields, stack_dim last.
    std::string out;
    size_t start = 0;
    while (start < repr.size()) {
      size_t end = repr.find('\n', start);
      std::string line = repr.substr(start, end == std::string::npos ? std::string::npos : end - start);
      const std::string pad = line.substr(0, line.find_first_not_of(' '));
      if (line.compare(pad.size(), 11, "batch_size=") == 0) out += pad + "exclusive_fields={\n" + pad + "},\n";
      const size_t closing = line.find("is_shared=False)");
      if (closing == pad.size()) line.replace(closing, 16, "is_shared=False,\n" + pad + "stack_dim=0)");
      out += line;
      if (end == std::string::npos) break;
      out += '\n';
      start = end + 1;
    }
    repr = out;
  }
  return repr;
}

}  // namespace contract
