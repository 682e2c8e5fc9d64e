// BorrowedTensors (core/borrowed_tensors.h): the list stack and cat hand to LibTorch holds the
// members' leaves without touching their reference counts, and gives them back the same way,
// on success and when LibTorch refuses.
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include <tensordict/errors.h>
#include <tensordict/tensordict.h>

#include "core/borrowed_tensors.h"

using tensordict::detail::BorrowedTensors;

TEST_CASE("BorrowedTensors holds the tensors themselves and leaves their reference counts as they were",
          "[unit][borrowed]") {
  const at::Tensor a = at::arange(6, at::kFloat).reshape({2, 3});
  const at::Tensor b = at::ones({2, 3});
  const size_t a_uses = a.use_count(), b_uses = b.use_count();
  {
    BorrowedTensors list;
    list.reserve(2);
    list.push_back(a);
    list.push_back(b);
    CHECK(a.use_count() == a_uses);
    CHECK(b.use_count() == b_uses);
    REQUIRE(list.size() == 2);
    CHECK(list[0].is_same(a));
    CHECK(list[1].is_same(b));
    const at::Tensor joined = at::cat(list.list(), 0);
    CHECK(at::equal(joined, at::cat({a, b}, 0)));
    list.clear();
    CHECK(list.size() == 0);
    CHECK(a.use_count() == a_uses);
    list.push_back(b);  // reused after clear, then given back by the destructor
  }
  CHECK(a.use_count() == a_uses);
  CHECK(b.use_count() == b_uses);
  CHECK(at::equal(a, at::arange(6, at::kFloat).reshape({2, 3})));  // still alive and whole
}

TEST_CASE("stack and cat leave their members' leaves as they were, also when LibTorch refuses", "[unit][borrowed]") {
  using namespace tensordict;
  TensorDict x = TensorDict::empty_with({2});
  x.set("a", at::zeros({2, 3}));
  x.set({"n", "b"}, at::ones({2}));
  TensorDict y = x.clone();
  const at::Tensor xa = x.get("a"), ya = y.get("a");
  const size_t xa_uses = xa.use_count(), ya_uses = ya.use_count();
  for (int i = 0; i < 3; ++i) {
    const TensorDict s = stack({x, y}, 0);
    const TensorDict c = cat({x, y}, 0);
    CHECK(at::equal(s.get("a"), at::zeros({2, 2, 3})));
    CHECK(at::equal(c.get({"n", "b"}), at::ones({4})));
  }
  CHECK(xa.use_count() == xa_uses);
  CHECK(ya.use_count() == ya_uses);
  // A leaf of another dtype and shape: LibTorch refuses, the error names the key, counts unchanged.
  y.set("a", at::zeros({2, 4}, at::kDouble));
  const at::Tensor y2 = y.get("a");
  const size_t y2_uses = y2.use_count();
  CHECK_THROWS_AS(stack({x, y}, 0), ShapeError);
  CHECK_THROWS_WITH(cat({x, y}, 0), Catch::Contains("'a'"));
  CHECK(xa.use_count() == xa_uses);
  CHECK(y2.use_count() == y2_uses);
  CHECK(at::equal(x.get("a"), at::zeros({2, 3})));
}
