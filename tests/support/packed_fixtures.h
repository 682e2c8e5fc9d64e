#pragma once
// What the packed-op unit tests (lazy leaves, intact results) share: a tree consolidate packs with
// no gap, and a leaf-by-leaf comparison of two trees.

#include <functional>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>

#include "support/catch_torch.h"

namespace testing_support {

using tensordict::NestedKey;
using tensordict::TensorDict;


/// `count` leaves "l<i>" of batch size {10}: at the root, every third one under "n" instead.
inline TensorDict root_and_nested_leaves(int count, const std::function<at::Tensor(int)>& leaf) {
  TensorDict td({}, {10});
  for (int i = 0; i < count; ++i) {
    const NestedKey key = i % 3 == 0 ? NestedKey({"n", "l" + std::to_string(i)}) : NestedKey("l" + std::to_string(i));
    td.set(key, leaf(i));
  }
  return td;
}

/// Every leaf of `a` equals `b`'s under the same key (dim names aside), and both have the same keys.
inline void require_same_leaves(const TensorDict& a, const TensorDict& b) {
  const std::vector<NestedKey> keys = b.keys(true, true);
  REQUIRE(a.keys(true, true).size() == keys.size());
  for (const NestedKey& k : keys) {
    INFO(k.repr());
    REQUIRE(a.contains(k));
    CHECK(at::equal(a.get(k).rename(c10::nullopt), b.get(k).rename(c10::nullopt)));
  }
}

}  // namespace testing_support
