// ls[a:b] on the stack dim shares the stack's member list when it holds at least half of it
// (issue 34): the sub-stack sees the same member handles, a later change to either stack's list
// (append, insert) stays with that stack, a sub-stack outlives the stack it came from, and a
// small slice holds only its own members.

#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>

using namespace tensordict;
using at::indexing::None;
using at::indexing::Slice;
using Sizes = std::vector<int64_t>;

namespace {

std::vector<TensorDict> numbered_members(int n) {
  std::vector<TensorDict> out;
  for (int i = 0; i < n; ++i) out.push_back(TensorDict({{"x", at::full({2}, double(i))}}));
  return out;
}

// The value of "x" in each member of `td`, a lazy stack along dim 0.
std::vector<double> member_values(const TensorDict& td) {
  std::vector<double> out;
  for (const TensorDict& m : LazyStackedTensorDict::from(td).members()) out.push_back(m.get("x")[0].item<double>());
  return out;
}

}  // namespace

TEST_CASE("a slice's sub-stack holds the selected members themselves, slices of slices too", "[lazy][indexing]") {
  std::vector<TensorDict> ms = numbered_members(6);
  LazyStackedTensorDict ls = lazy_stack(ms);
  TensorDict mid = ls.index({Slice(1, 5)});
  CHECK((mid.batch_size().vec() == Sizes{4}));
  CHECK(member_values(mid) == std::vector<double>{1, 2, 3, 4});
  for (int64_t i = 0; i < 4; ++i) CHECK(LazyStackedTensorDict::from(mid).member(i).is_same(ms[static_cast<size_t>(i + 1)]));
  TensorDict inner = mid.index({Slice(2, None)});
  CHECK(member_values(inner) == std::vector<double>{3, 4});
  CHECK(LazyStackedTensorDict::from(inner).member(-1).is_same(ms[4]));
  CHECK(member_values(ls.index({Slice(-2, None)})) == std::vector<double>{4, 5});
  CHECK(member_values(mid.index({Slice(None, None, 2)})) == std::vector<double>{1, 3});  // step 2 copies handles
  CHECK(member_values(ls.index({Slice(4, 100)})) == std::vector<double>{4, 5});          // clamped like Python
  // Reads and writes through the sub-stack see and reach only its members.
  CHECK(at::equal(mid.get("x"), at::tensor({1., 1., 2., 2., 3., 3., 4., 4.}).view({4, 2}).to(at::kFloat)));
  mid.set("x", at::zeros({4, 2}));
  CHECK(member_values(ls) == std::vector<double>{0, 0, 0, 0, 0, 5});
}

TEST_CASE("growing a stack or its sub-stack leaves the other's members as they were", "[lazy][indexing]") {
  std::vector<TensorDict> ms = numbered_members(4);
  LazyStackedTensorDict ls = lazy_stack(ms);
  LazyStackedTensorDict head = LazyStackedTensorDict::from(ls.index({Slice(0, 2)}));
  head.append(TensorDict({{"x", at::full({2}, 9.0)}}));
  CHECK(member_values(head) == std::vector<double>{0, 1, 9});
  CHECK((head.batch_size().vec() == Sizes{3}));
  CHECK(member_values(ls) == std::vector<double>{0, 1, 2, 3});
  CHECK((ls.batch_size().vec() == Sizes{4}));

  LazyStackedTensorDict tail = LazyStackedTensorDict::from(ls.index({Slice(2, 4)}));
  ls.insert(0, TensorDict({{"x", at::full({2}, 7.0)}}));
  CHECK(member_values(ls) == std::vector<double>{7, 0, 1, 2, 3});
  CHECK(member_values(tail) == std::vector<double>{2, 3});
  tail.insert(1, TensorDict({{"x", at::full({2}, 8.0)}}));
  CHECK(member_values(tail) == std::vector<double>{2, 8, 3});
  CHECK(member_values(ls) == std::vector<double>{7, 0, 1, 2, 3});
  // A stack that shares its list with no one grows it in place, members still the same handles.
  LazyStackedTensorDict alone = lazy_stack(numbered_members(2));
  const TensorDict first = alone.member(0);
  alone.append(TensorDict({{"x", at::full({2}, 5.0)}}));
  CHECK(alone.member(0).is_same(first));
  CHECK(member_values(alone) == std::vector<double>{0, 1, 5});
}

TEST_CASE("a sub-stack outlives the stack it was sliced from", "[lazy][indexing]") {
  std::vector<TensorDict> ms = numbered_members(5);
  TensorDict sub;
  {
    TensorDict ls = lazy_stack(ms);
    sub = ls.index({Slice(2, 5)});
  }
  CHECK(member_values(sub) == std::vector<double>{2, 3, 4});
  CHECK(LazyStackedTensorDict::from(sub).member(0).is_same(ms[2]));
  CHECK(at::equal(sub.get("x")[2], at::full({2}, 4.f)));
}

TEST_CASE("a slice pins at most twice the members it selects", "[lazy][indexing]") {
  std::vector<TensorDict> ms = numbered_members(8);
  // References to member i besides `ms` itself: the stacks and slices holding it.
  auto holders = [&](size_t i) { return c10::raw::intrusive_ptr::use_count(ms[i].impl()) - 1; };
  TensorDict small, half;
  {
    TensorDict ls = lazy_stack(ms);
    small = ls.index({Slice(0, 3)});  // 3 of 8: its own handles
  }
  CHECK(holders(0) == 1);
  CHECK(holders(5) == 0);  // not selected, not kept
  {
    TensorDict ls = lazy_stack(ms);
    half = ls.index({Slice(4, 8)});  // 4 of 8: the stack's list, shared
  }
  CHECK(holders(5) == 1);
  CHECK(holders(3) == 1);  // the shared list holds the other half too
  CHECK(holders(0) == 2);
  small = TensorDict();
  half = TensorDict();
  for (size_t i = 0; i < ms.size(); ++i) CHECK(holders(i) == 0);
}

TEST_CASE("locking a sub-stack locks its members only", "[lazy][indexing]") {
  std::vector<TensorDict> ms = numbered_members(4);
  LazyStackedTensorDict ls = lazy_stack(ms);
  TensorDict sub = ls.index({Slice(1, 3)});
  sub.lock_();
  CHECK(ms[1].is_locked());
  CHECK(ms[2].is_locked());
  CHECK_FALSE(ms[0].is_locked());
  CHECK_FALSE(ls.is_locked());
  CHECK_THROWS_AS(sub.set("x", at::zeros({2, 2})), LockedError);
  sub.unlock_();
  CHECK_FALSE(ms[1].is_locked());
}
