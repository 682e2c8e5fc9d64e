#pragma once
// What a tensordict looks like on the wire: its leaves in sorted key order, the canonical text
// of its structure (and that text's hash, which both sides of a transfer compare before any
// data moves), and how the leaves are grouped into messages.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include <tensordict/json.h>
#include <tensordict/key.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace distributed {
namespace wire {

/// A tensor leaf: the level holding it and its key there, and the tensor a read gives.
struct Leaf {
  NestedKey path;
  std::string sort_key;  // the path joined with a separator no key holds: the wire order
  TensorDict level;
  std::string key;
  at::Tensor tensor;
  /// Writing into `tensor` writes the tensordict (the backend hands out its own tensors and
  /// this one is a contiguous CPU tensor); otherwise a received value goes through set_.
  bool writable_in_place = false;
  int64_t nbytes() const { return tensor.numel() * static_cast<int64_t>(tensor.element_size()); }
};

struct NonTensorLeaf {
  NestedKey path;
  std::string sort_key;
  TensorDict level;
  std::string key;
};

struct Layout {
  std::vector<Leaf> leaves;                // sorted by path
  std::vector<NonTensorLeaf> non_tensors;  // sorted by path
  /// One line per level, leaf and non-tensor entry, sorted: what must agree between ranks.
  std::string structure;
  uint64_t structure_hash = 0;
  /// The one storage every leaf views (a consolidated tensordict), with a hash of where each
  /// leaf lies in it; undefined / 0 otherwise.
  at::Tensor storage;
  uint64_t storage_layout_hash = 0;
  int64_t tensor_bytes = 0;
};

/// The layout of `td`. NotImplementedError for a lazy stack anywhere in it (its leaves would be
/// stacked copies, and a receive into them would be lost).
Layout describe(const TensorDict& td);

/// "key 'a.b': float32 [4, 3] here, float64 [4, 3] on rank 1" for the first line that differs.
std::string first_difference(const std::string& mine, const std::string& theirs, int their_rank);

uint64_t fnv1a(std::string_view text);

/// A group of leaves sent as one message: several small ones packed, or one large one as is.
struct Message {
  std::vector<size_t> leaves;  // indices into Layout::leaves
  int64_t nbytes = 0;
  bool packed = false;
};
/// Leaves of at least this many bytes go alone, without a copy.
constexpr int64_t kAloneBytes = int64_t{1} << 20;
std::vector<Message> plan(const Layout& layout);

/// The bytes of one message to send (packed leaves are copied, each at an 8-byte offset).
at::Tensor outgoing(const Layout& layout, const Message& message);
/// Where to receive one message: the leaf itself when it can be written in place, otherwise a
/// new buffer that deliver() copies from.
at::Tensor incoming(const Layout& layout, const Message& message);
/// Writes one leaf's received bytes into the tensordict (in place, or through set_).
void deliver_leaf(const Leaf& leaf, const at::Tensor& bytes);
/// Writes a received message into the tensordict.
void deliver(const Layout& layout, const Message& message, const at::Tensor& received);

/// A contiguous CPU tensor's bytes, as a flat uint8 tensor sharing its memory.
at::Tensor as_bytes(const at::Tensor& contiguous_cpu);

/// The non-tensor values, by path: {"a.b": {"stack": false, "value": ...}, ...}.
std::string non_tensor_values(const Layout& layout);
/// Sets the values non_tensor_values() wrote (`source` names the peer in errors).
void set_non_tensor_values(const Layout& layout, std::string_view text, const std::string& source);

}  // namespace wire
}  // namespace distributed
}  // namespace tensordict
