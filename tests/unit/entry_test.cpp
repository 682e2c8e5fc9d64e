// Unit tests of Entry, the value a key holds: a tagged union of three intrusive handles (a
// tensor, a tensordict, boxed non-tensor data). Copies share, moves transfer and empty the
// source, and every kind is released exactly once.
#include "support/catch_torch.h"

#include <utility>

#include <tensordict/entry.h>
#include <tensordict/tensordict.h>

using namespace tensordict;

namespace {
// Strong references to a tensor's impl: the test's own handle plus those held by entries.
size_t uses(const at::Tensor& t) { return t.use_count(); }
}  // namespace

TEST_CASE("an Entry is two words whatever it holds", "[unit][entry]") {
  // The slot table's memory footprint relies on it; NonTensorData is boxed for this.
  STATIC_REQUIRE(sizeof(Entry) == 2 * sizeof(void*));
}

TEST_CASE("copies of a tensor entry share the tensor and release it once each", "[unit][entry]") {
  at::Tensor t = at::arange(3);
  {
    Entry a(t);
    CHECK(uses(t) == 2);
    Entry b(a);
    CHECK(uses(t) == 3);
    CHECK(b.tensor().is_same(t));
    Entry c;
    c = b;
    CHECK(uses(t) == 4);
    c = c;  // self-assignment keeps the value
    CHECK(c.is_tensor());
    CHECK(uses(t) == 4);
  }
  CHECK(uses(t) == 1);
}

TEST_CASE("moving an entry transfers the reference and empties the source", "[unit][entry]") {
  at::Tensor t = at::arange(3);
  Entry a(t);
  Entry b(std::move(a));
  CHECK_FALSE(a.defined());  // NOLINT(bugprone-use-after-move): the moved-from state is specified
  CHECK(b.is_tensor());
  CHECK(uses(t) == 2);
  Entry c;
  c = std::move(b);
  CHECK_FALSE(b.defined());  // NOLINT(bugprone-use-after-move)
  CHECK(uses(t) == 2);
  c = Entry();
  CHECK(uses(t) == 1);
}

TEST_CASE("non-tensor entries share one box and keep their value", "[unit][entry]") {
  Entry a(NonTensorData("hello"));
  Entry b = a;
  CHECK(&a.non_tensor() == &b.non_tensor());  // one box, two references
  a = Entry(at::zeros({1}));
  CHECK(a.is_tensor());
  REQUIRE(b.is_non_tensor());
  CHECK(b.non_tensor().value().as_string() == "hello");
  Entry c(std::move(b));
  CHECK_FALSE(b.defined());  // NOLINT(bugprone-use-after-move)
  CHECK(c.non_tensor().value().as_string() == "hello");
  // A stack keeps its id tensor through copies.
  NonTensorData stack = NonTensorData::from_ids({json::Value("x"), json::Value("y")},
                                                at::tensor({int64_t{1}, int64_t{0}}));
  Entry d(stack);
  Entry e = d;
  CHECK(e.non_tensor().is_stack());
  CHECK(e.non_tensor().ids().is_same(stack.ids()));
}

TEST_CASE("assignment replaces one kind by another and releases the old value",
          "[unit][entry]") {
  at::Tensor t = at::arange(2);
  TensorDict td({{"a", at::zeros({2})}}, {2});
  Entry e(t);
  e = Entry(td);
  CHECK(uses(t) == 1);
  REQUIRE(e.is_tensordict());
  CHECK(e.tensordict().is_same(td));
  e = Entry(NonTensorData(json::Value(3)));
  CHECK(e.is_non_tensor());
  CHECK(td.impl_ptr().use_count() == 1);
  e = Entry(t);
  CHECK(e.tensor().is_same(t));
}

TEST_CASE("typed access to the wrong kind is a TypeError naming both kinds", "[unit][entry][errors]") {
  Entry e(NonTensorData("x"));
  CHECK_THROWS_AS(e.tensor(), TypeError);
  CHECK_THROWS_WITH(e.tensor(), Catch::Contains("expected a tensor") &&
                                    Catch::Contains("non-tensor data"));
  CHECK_THROWS_WITH(e.tensordict(), Catch::Contains("expected a TensorDict"));
  CHECK_THROWS_WITH(Entry().non_tensor(), Catch::Contains("holds nothing"));
}
