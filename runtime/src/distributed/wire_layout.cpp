#include "distributed/wire_layout.h"

#include <algorithm>
#include <cstring>
#include <sstream>

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/distributed.h>
#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/non_tensor.h>

#include "core/format.h"

namespace tensordict {
namespace distributed {
namespace wire {

namespace {

// Sorting and structure lines use a separator no key holds in practice, so that {"a.b"} and
// {"a", "b"} stay apart; messages show paths with dots.
constexpr std::string_view kSep = "\x1f";

std::string canonical(const NestedKey& path) { return path.join(kSep); }

std::string shown(std::string_view canonical_path) {
  std::string out(canonical_path);
  std::replace(out.begin(), out.end(), kSep[0], '.');
  return out.empty() ? "(root)" : out;
}

void refuse_lazy_stack(const TensorDict& level, const NestedKey& path) {
  TD_CHECK(!LazyStackedTensorDict::is_lazy_stack(level), NotImplementedError, "the lazy stack at ",
           path.size() ? "'" + path.join(".") + "'" : std::string("the root"),
           " cannot be sent or received: its leaves are stacked copies (densify it with contiguous())");
}

void walk(const TensorDict& level, const NestedKey& prefix, Layout& out, std::vector<std::string>& lines) {
  refuse_lazy_stack(level, prefix);
  lines.push_back(canonical(prefix) + "\tlevel\t" + detail::size_str(level.batch_size()));
  const bool aliases = level.impl()->leaves_alias_storage();
  for (const auto& [key, entry] : level.items(/*include_nested=*/false)) {
    const NestedKey path = prefix.size() ? prefix.child(key[0]) : NestedKey(key[0]);
    std::string sort_key = canonical(path);
    if (entry.is_tensor()) {
      const at::Tensor& t = entry.tensor();
      lines.push_back(sort_key + "\ttensor\t" + torch_dtype_name(t.scalar_type()) + " " + detail::size_str(t.sizes()));
      out.leaves.push_back(Leaf{path, std::move(sort_key), level, key[0], t, aliases && t.device().is_cpu() && t.is_contiguous()});
    } else if (entry.is_tensordict()) {
      walk(entry.tensordict(), path, out, lines);
    } else if (entry.is_non_tensor()) {
      lines.push_back(sort_key + "\tnon-tensor\t");
      out.non_tensors.push_back(NonTensorLeaf{path, std::move(sort_key), level, key[0]});
    }
  }
}

// Where each leaf lies in a consolidated tensordict's storage; 0 when one does not view it.
uint64_t storage_layout_hash(const Layout& layout, const at::Tensor& storage) {
  std::ostringstream text;
  text << layout.structure << "\nstorage " << storage.numel();
  const auto* base = static_cast<const char*>(storage.data_ptr());
  for (const Leaf& leaf : layout.leaves) {
    if (leaf.nbytes() == 0) continue;
    const auto* data = static_cast<const char*>(leaf.tensor.data_ptr());
    const int64_t offset = data - base;
    if (!leaf.tensor.is_contiguous() || offset < 0 || offset + leaf.nbytes() > storage.numel()) return 0;
    text << "\n" << offset;
  }
  return fnv1a(text.str());
}

at::Tensor typed_view(const at::Tensor& bytes, const Leaf& leaf) {
  // Messages place leaves at 8-byte offsets: a 16-byte element (complex128) may sit between
  // two, where a dtype view cannot start.
  const at::Tensor aligned_bytes = bytes.storage_offset() % leaf.tensor.element_size() == 0 ? bytes : bytes.clone();
  return aligned_bytes.view(leaf.tensor.scalar_type()).view(leaf.tensor.sizes());
}

}  // namespace

void deliver_leaf(const Leaf& leaf, const at::Tensor& bytes) {
  if (leaf.writable_in_place && bytes.data_ptr() == leaf.tensor.data_ptr()) return;  // received there
  c10::NoGradGuard no_grad;  // a received value replaces a parameter's data, it is not a step of autograd
  const at::Tensor value = typed_view(bytes, leaf);
  if (leaf.writable_in_place) {
    leaf.tensor.copy_(value);
  } else {
    TensorDict level = leaf.level;
    level.set_(leaf.key, value);  // through the backend's write path (a file, a server)
  }
}

namespace {
int64_t aligned(int64_t n) { return (n + 7) / 8 * 8; }
}  // namespace

uint64_t fnv1a(std::string_view text) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : text) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

Layout describe(const TensorDict& td) {
  Layout out;
  std::vector<std::string> lines;
  walk(td, NestedKey(), out, lines);
  std::sort(lines.begin(), lines.end());
  for (const auto& line : lines) out.structure += line + "\n";
  out.structure_hash = fnv1a(out.structure);
  auto by_path = [](const auto& a, const auto& b) { return a.sort_key < b.sort_key; };
  std::stable_sort(out.leaves.begin(), out.leaves.end(), by_path);
  std::stable_sort(out.non_tensors.begin(), out.non_tensors.end(), by_path);
  for (const Leaf& leaf : out.leaves) out.tensor_bytes += leaf.nbytes();
  if (is_consolidated(td)) {
    at::Tensor storage = consolidated_storage(td);
    if (storage.device().is_cpu()) {
      out.storage_layout_hash = storage_layout_hash(out, storage);
      if (out.storage_layout_hash != 0) out.storage = storage;
    }
  }
  return out;
}

std::string first_difference(const std::string& mine, const std::string& theirs, int their_rank) {
  auto split = [](const std::string& text) {
    std::vector<std::string> lines;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    return lines;
  };
  const std::vector<std::string> a = split(mine), b = split(theirs);
  auto path_of = [](const std::string& line) { return line.substr(0, line.find('\t')); };
  auto what = [](const std::string& line) {
    std::string rest = line.substr(line.find('\t') + 1);
    std::replace(rest.begin(), rest.end(), '\t', ' ');
    while (!rest.empty() && rest.back() == ' ') rest.pop_back();
    return rest;
  };
  const std::string there = "on rank " + std::to_string(their_rank);
  for (size_t i = 0;; ++i) {
    if (i == a.size() && i == b.size()) return "the structures agree";
    if (i == a.size()) return "key '" + shown(path_of(b[i])) + "' is " + there + " only";
    if (i == b.size()) return "key '" + shown(path_of(a[i])) + "' is here only, not " + there;
    if (a[i] == b[i]) continue;
    const std::string pa = path_of(a[i]), pb = path_of(b[i]);
    if (pa == pb) return "key '" + shown(pa) + "': " + what(a[i]) + " here, " + what(b[i]) + " " + there;
    if (pa < pb) return "key '" + shown(pa) + "' is here only, not " + there;
    return "key '" + shown(pb) + "' is " + there + " only";
  }
}

std::vector<Message> plan(const Layout& layout) {
  std::vector<Message> out;
  Message packed;
  packed.packed = true;
  for (size_t i = 0; i < layout.leaves.size(); ++i) {
    const int64_t n = layout.leaves[i].nbytes();
    if (n == 0) continue;
    if (n >= kAloneBytes) {
      out.push_back(Message{{i}, n, false});
    } else {
      packed.leaves.push_back(i);
      packed.nbytes = aligned(packed.nbytes) + n;
    }
  }
  if (!packed.leaves.empty()) out.insert(out.begin(), std::move(packed));
  return out;
}

at::Tensor as_bytes(const at::Tensor& contiguous_cpu) {
  // Detached: a module's parameters (from_module) require grad, and their bytes are just bytes.
  return contiguous_cpu.detach().reshape({-1}).view(at::kByte);
}

at::Tensor outgoing(const Layout& layout, const Message& message) {
  if (!message.packed) {
    const at::Tensor& t = layout.leaves[message.leaves.front()].tensor;
    return as_bytes(t.device().is_cpu() ? t.contiguous() : t.to(at::kCPU).contiguous());
  }
  at::Tensor buffer = at::empty({message.nbytes}, at::kByte);
  auto* out = static_cast<char*>(buffer.data_ptr());
  int64_t offset = 0;
  for (size_t i : message.leaves) {
    const Leaf& leaf = layout.leaves[i];
    offset = aligned(offset);
    const at::Tensor t = leaf.tensor.device().is_cpu() ? leaf.tensor.contiguous() : leaf.tensor.to(at::kCPU).contiguous();
    std::memcpy(out + offset, t.data_ptr(), static_cast<size_t>(leaf.nbytes()));
    offset += leaf.nbytes();
  }
  return buffer;
}

at::Tensor incoming(const Layout& layout, const Message& message) {
  if (!message.packed) {
    const Leaf& leaf = layout.leaves[message.leaves.front()];
    if (leaf.writable_in_place) return as_bytes(leaf.tensor);
  }
  return at::empty({message.nbytes}, at::kByte);
}

void deliver(const Layout& layout, const Message& message, const at::Tensor& received) {
  if (!message.packed) {
    deliver_leaf(layout.leaves[message.leaves.front()], received);
    return;
  }
  int64_t offset = 0;
  for (size_t i : message.leaves) {
    const Leaf& leaf = layout.leaves[i];
    offset = aligned(offset);
    deliver_leaf(leaf, received.narrow(0, offset, leaf.nbytes()));
    offset += leaf.nbytes();
  }
}

std::string non_tensor_values(const Layout& layout) {
  json::Object values;
  for (const NonTensorLeaf& leaf : layout.non_tensors) {
    const NonTensorData data = leaf.level.get_non_tensor(leaf.key);
    json::Object item;
    item.emplace_back("stack", data.is_stack());
    item.emplace_back("value", data.is_stack() ? data.tolist() : data.value());
    values.emplace_back(leaf.sort_key, json::Value(std::move(item)));
  }
  return json::Value(std::move(values)).dump();
}

void set_non_tensor_values(const Layout& layout, std::string_view text, const std::string& source) {
  const json::Value values = json::parse(text, source);
  for (const NonTensorLeaf& leaf : layout.non_tensors) {
    const json::Value* item = values.find(leaf.sort_key);
    TD_CHECK(item != nullptr && item->is_object() && item->find("value") && item->find("stack"), DistributedError,
             source, ": no value for the non-tensor key '", leaf.path.join("."), "'");
    const json::Value& value = *item->find("value");
    TensorDict level = leaf.level;
    if (item->find("stack")->as_bool()) {
      level.set_non_tensor_(leaf.key, NonTensorData::from_list(value, level.batch_size()));
    } else {
      level.set_non_tensor_(leaf.key, NonTensorData(value));
    }
  }
}

}  // namespace wire
}  // namespace distributed
}  // namespace tensordict
