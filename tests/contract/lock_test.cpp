// Contract: locking (semantics.md 1.7, cases 1.19.11-12).
#include "support/catch_torch.h"

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using at::indexing::Slice;
using contract::ContractBackends;

namespace {
const char* kLockedMessage = "Cannot modify locked TensorDict";
}  // namespace

TEMPLATE_LIST_TEST_CASE("a locked tensordict refuses structural changes and allows in-place writes (case 11)",
                        "[contract][lock]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({3})}, {"n", {{"x", at::zeros({3, 2})}}}}, {3}));
  td.lock_();
  CHECK(td.is_locked());
  CHECK(td.get_tensordict("n").is_locked());

  REQUIRE_THROWS_AS(td.set("new", at::zeros({3})), LockedError);
  REQUIRE_THROWS_AS(td.set("new", at::zeros({3})), RuntimeError);
  REQUIRE_THROWS_WITH(td.set("new", at::zeros({3})),
                      Catch::Contains("Cannot modify locked TensorDict. For in-place modification, consider "
                                      "using the `set_()` method and make sure the key is present."));
  REQUIRE_THROWS_AS(td.set("a", at::ones({3})), LockedError);  // non-in-place set of an existing key
  REQUIRE_THROWS_AS(td.set({"n", "y"}, at::zeros({3})), LockedError);
  REQUIRE_THROWS_AS(td.set({"m", "y"}, at::zeros({3})), LockedError);
  REQUIRE_THROWS_AS(td.set_non_tensor("s", json::Value("x")), LockedError);
  REQUIRE_THROWS_WITH(td.erase("a"), Catch::Contains(kLockedMessage));
  REQUIRE_THROWS_AS(td.erase({"n", "x"}), LockedError);
  REQUIRE_THROWS_AS(td.pop("a"), LockedError);
  REQUIRE_THROWS_AS(td.pop("zz", Entry()), LockedError);
  REQUIRE_THROWS_AS(td.rename_key_("a", "b"), LockedError);
  REQUIRE_THROWS_AS(td.get_tensordict("n").set("y", at::zeros({3})), LockedError);
  CHECK(td.contains("a"));
  CHECK_FALSE(td.contains("new"));

  // In-place writes are allowed.
  td.set_("a", at::ones({3}));
  CHECK(at::equal(td.get("a"), at::ones({3})));
  td.set_({"n", "x"}, at::ones({3, 2}));
  td.index_put_({0}, 5.0);
  CHECK(td.get("a")[0].item<float>() == 5.0f);
  td.index_put_({Slice(1, 3)}, TensorDict({{"a", at::full({2}, 2.0)}}, {2}));
  CHECK((at::equal(td.get("a"), at::tensor({5.0f, 2.0f, 2.0f}))));
  td.zero_();
  CHECK(at::equal(td.get("a"), at::zeros({3})));
  td.fill_("a", 3.0);
  td.fill_(1.0);
  CHECK((at::equal(td.get({"n", "x"}), at::ones({3, 2}))));
  // Writing a key that does not exist through index_put_ is a structural change.
  REQUIRE_THROWS_AS(td.index_put_({0}, TensorDict({{"zz", at::zeros({})}})), LockedError);
}

TEMPLATE_LIST_TEST_CASE("which results inherit the lock (case 11)", "[contract][lock]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({4, 2})}}, {4}));
  td.lock_();
  CHECK_FALSE(td.clone().is_locked());
  CHECK_FALSE(td.clone(/*recurse=*/false).is_locked());
  // A lazy stack's index gives its members, which its lock_ locked (as Python).
  CHECK(td.index({0}).is_locked() == TestType::kLazyStack);
  CHECK((td.index({at::tensor({0, 1})}).is_locked()) == TestType::kLazyStack);
  CHECK(td.to(at::kDouble).is_locked());
  CHECK(td.detach().is_locked());
  CHECK((td.view({2, 2}).is_locked()));
  CHECK(td.unsqueeze(0).is_locked());
  for (const auto& part : td.split(2)) CHECK(part.is_locked());
  for (const auto& part : td.chunk(2)) CHECK(part.is_locked());
}

TEMPLATE_LIST_TEST_CASE("unlock_ reopens a tensordict and its children", "[contract][lock]", ContractBackends) {
  if (!TestType::kMutableKeys) return;
  TensorDict td = TestType::make(TensorDict({{"n", {{"x", at::zeros({2})}}}}, {2}));
  td.lock_();
  td.unlock_();
  CHECK_FALSE(td.is_locked());
  CHECK_FALSE(td.get_tensordict("n").is_locked());
  td.set("new", at::zeros({2}));
  td.set({"n", "y"}, at::zeros({2}));
  CHECK((td.contains({"n", "y"})));
}

TEST_CASE("a child of a live locked parent cannot be unlocked (case 12)", "[lock]") {
  TensorDict td;
  td.set({"a", "b", "c", "d"}, 1.0);
  td.lock_();
  TensorDict a = td.get_tensordict("a");
  CHECK(a.is_locked());
  REQUIRE_THROWS_AS(a.unlock_(), LockedError);
  REQUIRE_THROWS_WITH(a.unlock_(), Catch::Contains("Cannot unlock a tensordict that is part of a locked graph. "
                                                   "Unlock the root tensordict first."));
  CHECK(a.is_locked());  // stays locked
  CHECK((td.get_tensordict({"a", "b"}).is_locked()));
  REQUIRE_THROWS_AS(td.get_tensordict({"a", "b"}).unlock_(), LockedError);

  // Once the root is gone, the child can be unlocked.
  td = TensorDict();
  a.unlock_();
  CHECK_FALSE(a.is_locked());
  CHECK_FALSE((a.get_tensordict({"b", "c"}).is_locked()));
  a.set("e", at::zeros({}));
}

TEST_CASE("unlocking the root first lets the children unlock", "[lock]") {
  TensorDict td({{"a", {{"b", at::zeros({})}}}});
  td.lock_();
  TensorDict a = td.get_tensordict("a");
  td.unlock_();
  CHECK_FALSE(a.is_locked());
  a.lock_();
  a.unlock_();  // td is unlocked: nothing holds a
  CHECK_FALSE(a.is_locked());
}

TEMPLATE_LIST_TEST_CASE("A22: unbind of a locked tensordict gives unlocked pieces, as v0.14",
                        "[contract][lock][python]", ContractBackends) {
  TensorDict td = TestType::make(TensorDict({{"a", at::zeros({2, 3})}, {"n", {{"x", at::zeros({2})}}}}, {2}));
  td.lock_();
  for (TensorDict& piece : td.unbind(0)) {
    if (TestType::kLazyStack) {
      // A lazy stack's pieces along its stack dim are its members, which its lock locked.
      CHECK(piece.is_locked());
      continue;
    }
    CHECK_FALSE(piece.is_locked());
    CHECK_FALSE(piece.get_tensordict("n").is_locked());
    piece.set("new", at::zeros({3}));
    CHECK(piece.contains("new"));
  }
  CHECK(td.is_locked());
  CHECK_FALSE(td.contains("new"));
}
