#pragma once
// The key path of the level a walk is in, linked on the stack one level at a time: going down a
// nested level allocates nothing, and a NestedKey is made only when one is needed (an error
// message, a callback that takes the key, a collected key).

#include <algorithm>
#include <string>
#include <string_view>
#include <vector>

#include <tensordict/key.h>

namespace tensordict {
namespace detail {

struct KeyChain {
  const KeyChain* parent = nullptr;  // nullptr: the root (the empty path)
  std::string_view key;              // this level's key in its parent; viewed, not owned

  bool empty() const { return parent == nullptr; }
  /// The chain one level down, at `k` (which must outlive it, as a key of the walked level does).
  KeyChain child(std::string_view k) const { return KeyChain{this, k}; }
  NestedKey path() const {
    std::vector<std::string> parts;
    for (const KeyChain* c = this; !c->empty(); c = c->parent) parts.emplace_back(c->key);
    std::reverse(parts.begin(), parts.end());
    return NestedKey(std::move(parts));
  }
  /// The full key of the entry `k` of this level.
  NestedKey child_path(std::string_view k) const { return child(k).path(); }
  std::string repr() const { return path().repr(); }
};

}  // namespace detail
}  // namespace tensordict
