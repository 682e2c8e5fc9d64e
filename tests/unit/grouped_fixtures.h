#pragma once
// What the tests of grouped results share (Note [Grouped results]): a tree of several leaf
// shapes over three levels, and a bit-for-bit comparison of two trees.

#include "support/catch_torch.h"

#include <cmath>
#include <string>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>

#include "backends/in_memory/tensor_dict_impl.h"

namespace grouped_fixtures {

using namespace tensordict;

// Root batch [6], named "t". Leaves of several shapes over three levels: a, b, c and m.r of
// [6, 4] (one group across levels), d of [6] (a group of one), e of [6, 2, 3]; the level n of
// batch [6, 2] with p and q of [6, 2, 5]; a non-tensor entry and an empty level. `nan` puts NaNs
// in a and p.
inline TensorDict mixed_tree(bool nan = false) {
  TensorDict x({}, {6});
  x.set("c", at::randn({6, 4}));
  x.set("a", at::randn({6, 4}));
  x.set("d", at::randn({6}));
  x.set("b", at::randn({6, 4}));
  x.set("e", at::randn({6, 2, 3}));
  x.set_non_tensor("info", json::Value("episode"));
  TensorDict n({}, {6, 2});
  n.set("p", at::randn({6, 2, 5}));
  n.set("q", at::randn({6, 2, 5}));
  x.set("n", n);
  x.set({"m", "r"}, at::randn({6, 4}));
  x.set("empty", TensorDict({}, {6}));
  if (nan) {
    x.get("a").index_put_({1, 2}, NAN);
    x.get({"n", "p"}).index_put_({0, 1, 3}, NAN);
  }
  x.refine_names({std::string("t")});
  return x;
}

// The bits of `t` as integers: signed zeros told apart, every NaN as one (LibTorch's full
// max() of a leaf holding a NaN returns another NaN payload than its max over a dim, which a
// group runs; no op but a bit view tells them apart).
inline at::Tensor bits(const at::Tensor& t) {
  const at::Tensor c = t.is_floating_point() ? t.masked_fill(t.isnan(), NAN).contiguous() : t.contiguous();
  switch (t.scalar_type()) {
    case at::kFloat: return c.view(at::kInt);
    case at::kDouble: return c.view(at::kLong);
    default: return c;
  }
}

// Same keys in the same order, kinds, batch sizes and names at every level; leaves of one dtype,
// sizes and strides, bit for bit.
inline void require_identical(const TensorDict& got, const TensorDict& want) {
  REQUIRE(got.batch_size() == want.batch_size());
  CHECK((got.names() == want.names()));
  CHECK(got.is_locked() == want.is_locked());
  const std::vector<NestedKey> keys = want.keys();
  REQUIRE((got.keys() == keys));
  for (const NestedKey& k : keys) {
    INFO(k.repr());
    const Entry g = got.get_entry(k), w = want.get_entry(k);
    REQUIRE(g.kind() == w.kind());
    if (w.is_tensor()) {
      const at::Tensor x = g.tensor(), y = w.tensor();
      REQUIRE(x.scalar_type() == y.scalar_type());
      REQUIRE(x.sizes() == y.sizes());
      CHECK(x.strides() == y.strides());
      CHECK(x.requires_grad() == y.requires_grad());
      CHECK(at::equal(bits(x), bits(y)));
    } else if (w.is_tensordict()) {
      require_identical(g.tensordict(), w.tensordict());
    } else {
      CHECK(got.get_non_tensor(k) == want.get_non_tensor(k));
    }
  }
}

inline const TensorDictImpl& level_of(const TensorDict& td) { return static_cast<const TensorDictImpl&>(*td.impl()); }
inline bool deferred(const TensorDict& td) { return level_of(td).is_deferred(); }

}  // namespace grouped_fixtures
