#pragma once
// What the tests of packed runs share (Note [Packed runs], Note [Intact runs]): a kernel counter,
// a tree of three interleaved dtypes, and the per-leaf comparison of results.

#include "support/catch_torch.h"

#include <memory>
#include <set>
#include <string>
#include <vector>

#include <ATen/record_function.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

namespace runs_fixtures {

using tensordict::Entry;
using tensordict::NestedKey;
using tensordict::TensorDict;

// How many times `run` calls the ATen op `op` through the dispatcher (on this thread).
class KernelCount {
 public:
  template <typename Run>
  static int of(const char* op, Run&& run) {
    name() = op;
    calls() = 0;
    const at::CallbackHandle handle =
        at::addThreadLocalCallback(at::RecordFunctionCallback(&on_start).scopes({at::RecordScope::FUNCTION}));
    try {
      run();
    } catch (...) {
      at::removeCallback(handle);
      throw;
    }
    at::removeCallback(handle);
    return calls();
  }

 private:
  static std::string& name() {
    static thread_local std::string n;
    return n;
  }
  static int& calls() {
    static thread_local int c = 0;
    return c;
  }
  static std::unique_ptr<at::ObserverContext> on_start(const at::RecordFunction& fn) {
    if (name() == fn.name()) ++calls();
    return nullptr;
  }
};

// 9 leaves of 3 dtypes whose keys interleave the dtypes, some nested: consolidate lays them out
// as 3 runs (float, double, int64), with no padding.
inline TensorDict mixed() {
  TensorDict td({}, {4});
  td.set("f0", at::randn({4, 3}));
  td.set("d0", at::randn({4}, at::kDouble));
  td.set("i0", at::randint(1, 9, {4, 2}, at::kLong));
  td.set({"n", "f1"}, at::randn({4, 5}));
  td.set({"n", "d1"}, at::randn({4, 2}, at::kDouble));
  td.set("f2", at::randn({4, 0}));  // 0-size
  td.set("i1", at::randint(1, 9, {4}, at::kLong));
  td.set({"n", "i2"}, at::randint(1, 9, {4, 3}, at::kLong));
  td.set("f3", at::randn({4, 2}));
  return td;
}

// Every leaf of `a` has `b`'s dtype, shape and values under the same key.
inline void require_same(const TensorDict& a, const TensorDict& b) {
  const std::vector<NestedKey> keys = b.keys(true, true);
  REQUIRE(a.keys(true, true).size() == keys.size());
  for (const NestedKey& k : keys) {
    INFO(k.repr());
    const at::Tensor x = a.get(k), y = b.get(k);
    REQUIRE(x.scalar_type() == y.scalar_type());
    REQUIRE(x.sizes() == y.sizes());
    CHECK(at::allclose(x, y, 1e-6, 1e-6, /*equal_nan=*/true));
  }
}

// Fixture F's shape, small: two levels of 5 float leaves [8, 4] and a deeper leaf [8, 2]; values
// in [low, low + 1).
inline TensorDict two_levels(double low) {
  TensorDict td({}, {8});
  for (int g = 0; g < 2; ++g)
    for (int x = 0; x < 5; ++x) td.set({"g" + std::to_string(g), "x" + std::to_string(x)}, at::rand({8, 4}) + low);
  td.set({"g1", "deep", "y"}, at::rand({8, 2}) + low);
  return td;
}

// Every leaf of `td`, read (so made) and held.
inline std::vector<at::Tensor> read_all(const TensorDict& td) {
  std::vector<at::Tensor> out;
  for (const Entry& e : td.values(true, true)) out.push_back(e.tensor());
  return out;
}

// How many storages the leaves of `td` sit in.
inline size_t storages(const TensorDict& td) {
  std::set<const void*> seen;
  for (const Entry& e : td.values(true, true)) seen.insert(e.tensor().storage().unsafeGetStorageImpl());
  return seen.size();
}

}  // namespace runs_fixtures
