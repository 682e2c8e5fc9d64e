// Note [Lazy leaves]: the result of an elementwise op over a packed storage makes its leaves on
// the first read of a level's entries; the next elementwise op reads an intact result's storage
// (Note [Intact results]) without making them. These cases check that the leaves are made only then, that every read and
// write sees the values the per-leaf path gives, and that concurrent first reads agree.
#include "support/catch_torch.h"
#include "support/packed_fixtures.h"

#include <algorithm>
#include <functional>
#include <string>
#include <thread>

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/ops.h>

#include "backends/in_memory/tensor_dict_impl.h"
#include "backends/in_memory/intact_result.h"

using namespace tensordict;

namespace {
// Leaves at the root and in a nested level, 1k floats each: consolidate packs them with no gap.
TensorDict fixture() {
  return testing_support::root_and_nested_leaves(12, [](int) { return at::randn({10, 100}); });
}

// Only nested levels under the root (its own level has no leaf to make).
TensorDict groups_only() {
  TensorDict td({}, {4});
  td.set({"a", "x"}, at::randn({4, 8}));
  td.set({"a", "y"}, at::randn({4, 3}));
  td.set({"b", "z"}, at::randn({4, 5}));
  return td;
}

bool intact(const TensorDict& td) { return in_memory::intact_packed_storage(*td.impl()).defined(); }

bool root_unmade(const TensorDict& td) {
  const auto* level = dynamic_cast<const TensorDictImpl*>(td.impl());
  return level != nullptr && (level->is_deferred() || level->has_lazy_leaves());  // not built yet, or built without leaves
}

void require_same(const TensorDict& a, const TensorDict& b) { testing_support::require_same_leaves(a, b); }
}  // namespace

TEST_CASE("a packed op's result makes its leaves on the first read of their level", "[unit][lazy_leaves]") {
  TensorDict plain = fixture();
  TensorDict packed = consolidate(plain);
  TensorDict r = packed * 2;
  REQUIRE(intact(r));
  REQUIRE(root_unmade(r));
  // Keys, kinds and sizes answer without making leaves.
  CHECK(r.keys(true, true).size() == 12);
  CHECK(r.contains("l1"));
  CHECK(r.impl()->kind("l1") == EntryKind::Tensor);
  CHECK(r.num_keys() == plain.num_keys());
  CHECK(root_unmade(r));
  CHECK(intact(r));
  // The first read makes them, as views of one new storage laid out as the operand's; the result
  // stays intact (its leaves are as made).
  const at::Tensor l1 = r.get("l1");
  CHECK_FALSE(root_unmade(r));
  CHECK(intact(r));
  CHECK(l1.storage().is_alias_of(r.get({"n", "l0"}).storage()));
  CHECK_FALSE(l1.storage().is_alias_of(packed.get("l1").storage()));
  require_same(r, plain * 2);
  // A leaf read twice is the same tensor.
  CHECK(r.get("l1").unsafeGetTensorImpl() == l1.unsafeGetTensorImpl());
}

TEST_CASE("a chain of elementwise ops over intact results reads none of their leaves", "[unit][lazy_leaves]") {
  TensorDict plain = fixture();
  TensorDict packed = consolidate(plain);
  TensorDict a = packed * 2;
  TensorDict b = a.exp();
  TensorDict c = b.sub(1);
  CHECK(intact(a));
  CHECK(intact(b));
  CHECK(intact(c));
  TensorDict d = a + c;  // two intact results of one layout: one kernel, another intact result
  TensorDict e = a.gt(c);
  TensorDict f = c.to(at::kDouble);
  TensorDict g = c.clone();
  CHECK(intact(a));
  CHECK(intact(c));
  CHECK(intact(d));
  CHECK(intact(e));
  CHECK(intact(f));
  CHECK(intact(g));
  require_same(c, (plain * 2).exp().sub(1));
  require_same(d, plain * 2 + (plain * 2).exp().sub(1));
  require_same(e, (plain * 2).gt((plain * 2).exp().sub(1)));
  require_same(f, (plain * 2).exp().sub(1).to(at::kDouble));
  require_same(g, c);
  CHECK(f.get("l1").scalar_type() == at::kDouble);
  // Reads over all leaves run over the storage and make no leaf either.
  TensorDict twice = consolidate(plain) * 2, twice_again = consolidate(plain) * 2;
  TensorDict greater = (consolidate(plain) * 3).gt(twice);
  const at::Tensor sum = twice.sum(reduce), mean = twice.mean(reduce);
  const bool all_equal = (twice == twice_again).all(), any_nan = twice.isnan().any();
  const bool all_greater = greater.all(), any_greater = greater.any();
  CHECK(intact(twice));
  CHECK(intact(twice_again));
  CHECK(intact(greater));
  // Sums compare with a margin too: the data is random in every run (LibTorch seeds its default
  // generator so), a sum of it may nearly cancel, and the two sides round in another order; the
  // relative tolerance alone failed about one run in 24.
  CHECK(sum.item<float>() == Approx((plain * 2).sum(reduce).item<float>()).epsilon(1e-4).margin(1e-3));
  CHECK(mean.item<float>() == Approx((plain * 2).mean(reduce).item<float>()).epsilon(1e-4).margin(1e-5));
  CHECK(all_equal);
  CHECK_FALSE(any_nan);
  CHECK(all_greater == (plain * 3).gt(plain * 2).all());
  CHECK(any_greater == (plain * 3).gt(plain * 2).any());
  CHECK_FALSE((twice == c).all());
  // A clone owns its storage.
  CHECK_FALSE(g.get("l1").storage().is_alias_of(c.get("l1").storage()));
}

TEST_CASE("in-place ops on an intact result change the storage its leaves will view", "[unit][lazy_leaves]") {
  TensorDict plain = fixture();
  TensorDict r = consolidate(plain) * 2;
  r.mul_(3);
  r.add_(1);
  r.exp_();
  r.add_(consolidate(plain) * 0);  // binary, both unread: one kernel, the leaves still not made
  CHECK(root_unmade(r));
  CHECK(intact(r));
  TensorDict filled = consolidate(plain) * 2;
  filled.fill_(3);
  CHECK(root_unmade(filled));
  require_same(filled, plain * 0 + 3);
  require_same(r, ((plain * 2) * 3 + 1).exp());
  // Once made, in-place ops change the leaves handed out.
  const at::Tensor l1 = r.get("l1");
  r.zero_();
  CHECK(at::equal(l1, at::zeros_like(l1)));
}

TEST_CASE("writes to an intact result make its leaves first and are kept", "[unit][lazy_leaves]") {
  TensorDict plain = fixture();
  TensorDict packed = consolidate(plain);
  // Results of ops on a locked tensordict (consolidate's) are locked: unlocked here to write.
  SECTION("overwriting a leaf") {
    TensorDict r = packed * 2;
    r.unlock_();
    r.set("l1", at::zeros({10, 100}));
    CHECK(at::equal(r.get("l1"), at::zeros({10, 100})));
    CHECK(at::equal(r.get("l2"), plain.get("l2") * 2));
  }
  SECTION("a new key, an erase and a rename") {
    TensorDict r = packed * 2;
    r.unlock_();
    r.set("new", at::ones({10}));
    r.erase("l2");
    r.rename_key_("l4", "four");
    CHECK_FALSE(r.contains("l2"));
    CHECK(at::equal(r.get("four"), plain.get("l4") * 2));
    CHECK(at::equal(r.get("new"), at::ones({10})));
    CHECK(at::equal(r.get("l5"), plain.get("l5") * 2));
    // Changed, it is no intact result: the next op takes the packed or per-leaf path, exactly.
    CHECK_FALSE(intact(r));
    require_same(r.exp(), r.apply([](const at::Tensor& t) { return t.exp(); }));
  }
  SECTION("a nested level written through its handle") {
    TensorDict r = packed * 2;
    r.unlock_();
    CHECK(intact(r));  // unlocking reads no leaf
    TensorDict n = r.get_tensordict("n");
    n.set("l0", at::full({10, 100}, 7.0));
    CHECK_FALSE(intact(r));
    TensorDict s = r + 1;
    CHECK(at::equal(s.get({"n", "l0"}), at::full({10, 100}, 8.0)));
    CHECK(at::equal(s.get("l1"), plain.get("l1") * 2 + 1));
  }
  SECTION("update and clear") {
    TensorDict r = packed * 2;
    r.unlock_();
    r.update(TensorDict({{"l1", at::ones({10, 100})}}, {10}));
    CHECK(at::equal(r.get("l1"), at::ones({10, 100})));
    CHECK(at::equal(r.get("l7"), plain.get("l7") * 2));
    TensorDict q = packed * 2;
    q.unlock_();
    q.clear();
    CHECK(q.num_keys() == 0);
  }
}

TEST_CASE("an intact result whose root only holds nested levels follows changes of its root",
          "[unit][lazy_leaves]") {
  TensorDict plain = groups_only();
  TensorDict r = consolidate(plain) * 2;
  r.unlock_();
  REQUIRE(intact(r));
  SECTION("an erased nested level") {
    r.erase("a");
    CHECK_FALSE(intact(r));  // its storage holds elements no leaf views any longer
    CHECK(r.sum(reduce).item<float>() == Approx((plain.get({"b", "z"}) * 2).sum().item<float>()).margin(1e-3));
    TensorDict s = r.exp();
    CHECK_FALSE(s.contains("a"));
    CHECK(at::equal(s.get({"b", "z"}), (plain.get({"b", "z"}) * 2).exp()));
    // An op with an intact result of another size falls back to the matched path.
    CHECK_THROWS_AS(s + (consolidate(plain) * 2), KeyError);
  }
  SECTION("a nested level from another storage") {
    r.set("c", TensorDict({{"w", at::ones({4, 2})}}, {4}));
    CHECK_FALSE(intact(r));
    TensorDict s = r + 1;
    CHECK(at::equal(s.get({"c", "w"}), at::full({4, 2}, 2.0)));
    CHECK(at::equal(s.get({"a", "x"}), plain.get({"a", "x"}) * 2 + 1));
  }
  SECTION("a nested level shared under two keys") {
    r.set("b2", r.get_tensordict("b"));
    CHECK_FALSE(intact(r));  // its elements are seen twice
    TensorDict s = r * 3;
    CHECK(at::equal(s.get({"b2", "z"}), plain.get({"b", "z"}) * 6));
    CHECK(at::equal(s.get({"b", "z"}), plain.get({"b", "z"}) * 6));
  }
}

TEST_CASE("a nested level replaced by another of the same size is caught", "[unit][lazy_leaves]") {
  // Dropping one level and holding another twice keeps the element count: the leaves must tile.
  TensorDict plain({}, {4});
  plain.set({"a", "x"}, at::randn({4, 5}));
  plain.set({"b", "z"}, at::randn({4, 5}));
  TensorDict r = consolidate(plain) * 2;
  r.unlock_();
  r.set("b", r.get_tensordict("a"));
  CHECK_FALSE(intact(r));
  const at::Tensor x2 = plain.get({"a", "x"}) * 2;
  CHECK(r.sum(reduce).item<float>() == Approx((x2.sum() * 2).item<float>()).epsilon(1e-4).margin(1e-3));
  CHECK((r + 1).sum(reduce).item<float>() == Approx(((x2 + 1).sum() * 2).item<float>()).epsilon(1e-4).margin(1e-3));
  CHECK(r.all() == (x2.all().item<bool>()));
  // A level of another result over the same storage (to() of the same dtype aliases it).
  TensorDict q = consolidate(plain) * 2;
  q.unlock_();
  TensorDict alias = q.to(at::kFloat);
  q.set("b", alias.get_tensordict("a"));
  CHECK_FALSE(intact(q));
  CHECK(q.sum(reduce).item<float>() == Approx((x2.sum() * 2).item<float>()).epsilon(1e-4).margin(1e-3));
}

TEST_CASE("intact results of different layouts are matched by key", "[unit][lazy_leaves]") {
  TensorDict plain = fixture();
  TensorDict a = consolidate(plain) * 2;
  TensorDict other = fixture();
  // The same keys, inserted in another order: another layout.
  TensorDict reordered({}, {10});
  for (const NestedKey& k : other.keys(true, true)) reordered.set(k, other.get(k));
  TensorDict shuffled({}, {10});
  std::vector<NestedKey> keys = reordered.keys(true, true);
  std::reverse(keys.begin(), keys.end());
  for (const NestedKey& k : keys) shuffled.set(k, reordered.get(k));
  TensorDict b = consolidate(shuffled) * 1;
  REQUIRE(intact(b));
  TensorDict s = a + b;
  for (const NestedKey& k : plain.keys(true, true)) {
    INFO(k.repr());
    CHECK(at::equal(s.get(k), plain.get(k) * 2 + other.get(k)));
  }
}

TEST_CASE("concurrent first reads of an intact result see the same leaves", "[unit][lazy_leaves]") {
  TensorDict plain = fixture();
  TensorDict packed = consolidate(plain);
  const TensorDict expected = plain * 2;
  for (int round = 0; round < 20; ++round) {
    TensorDict r = packed * 2;
    std::vector<std::vector<const void*>> seen(4);
    std::vector<int> mismatches(4, 0);
    std::vector<std::thread> readers;
    for (int t = 0; t < 4; ++t) {
      readers.emplace_back([&, t] {
        for (const NestedKey& k : r.keys(true, true)) {
          const at::Tensor leaf = r.get(k);
          seen[t].push_back(leaf.unsafeGetTensorImpl());
          if (!at::equal(leaf, expected.get(k))) ++mismatches[t];
        }
      });
    }
    // Readers of kinds do not wait for the leaves: they see tensor entries throughout.
    int wrong_kinds = 0;
    readers.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        r.impl()->for_each_key([&](const std::string&, EntryKind kind) {
          if (kind != EntryKind::Tensor && kind != EntryKind::TensorDict) ++wrong_kinds;
        });
      }
    });
    for (std::thread& reader : readers) reader.join();
    CHECK(wrong_kinds == 0);
    for (int t = 0; t < 4; ++t) {
      CHECK(mismatches[t] == 0);
      CHECK((seen[t] == seen[0]));
    }
  }
}

TEST_CASE("concurrent ops reading an unread result's slots in place agree", "[unit][lazy_leaves]") {
  // stack and cat (AlignedLevel over each member), a + b (over b), unsqueeze (map_level over the
  // slots) and update_'s check: each builds the level and makes its leaves on its first read, from
  // four threads at once, while none of the result's leaves is made yet.
  TensorDict plain = fixture();
  TensorDict packed = consolidate(plain);
  const TensorDict doubled = plain * 2;
  const TensorDict stacked = stack({doubled, plain});
  const TensorDict joined = cat({plain, doubled});
  const TensorDict summed = plain + doubled;
  const TensorDict unsqueezed = doubled.unsqueeze(0);
  for (int round = 0; round < 20; ++round) {
    TensorDict r = packed * 2;
    REQUIRE(root_unmade(r));
    std::vector<TensorDict> got(4);
    std::vector<std::string> errors(4);  // no Catch assertion from a worker thread
    const std::vector<std::function<TensorDict()>> ops = {[&] { return stack({r, plain}); },
                                                          [&] { return cat({plain, r}); },
                                                          [&] { return plain + r; },
                                                          [&] { return r.unsqueeze(0); }};
    std::vector<std::thread> threads;
    for (size_t t = 0; t < ops.size(); ++t) {
      threads.emplace_back([&, t] {
        try {
          got[t] = ops[t]();
        } catch (const std::exception& e) {
          errors[t] = e.what();
        }
      });
    }
    for (std::thread& t : threads) t.join();
    for (const std::string& error : errors) CHECK(error.empty());
    require_same(got[0], stacked);
    require_same(got[1], joined);
    require_same(got[2], summed);
    require_same(got[3], unsqueezed);
    TensorDict target = plain.clone();
    target.update_(r);  // update_'s check reads r's slots in place too
    require_same(target, doubled);
  }
}

TEST_CASE("intact results keep locks, names, non-tensor entries and drop empty levels as the per-leaf path",
          "[unit][lazy_leaves]") {
  TensorDict plain = fixture();
  plain.set_non_tensor("text", json::Value("hello"));
  plain.set("empty", TensorDict({}, {10}));
  plain.set_names({"batch"});
  TensorDict packed = consolidate(plain);
  REQUIRE(packed.is_locked());
  TensorDict r = packed.exp();
  CHECK(intact(r));
  CHECK(r.is_locked());
  CHECK(r.contains("text"));
  CHECK_FALSE(r.contains("empty"));  // Python's math ops drop empty nested levels
  CHECK((r.names() == packed.names()));
  TensorDict s = r * 2;
  CHECK(intact(s));
  CHECK(s.is_locked());
  CHECK((s.names() == packed.names()));
  CHECK(s.get_non_tensor("text").value() == json::Value("hello"));
  CHECK(at::equal(s.get("l1"), plain.get("l1").exp() * 2));
  CHECK(at::equal(s.get({"n", "l3"}), plain.get({"n", "l3"}).exp() * 2));
}

TEST_CASE("a consolidated tensordict nobody has read is an intact result", "[unit][lazy_leaves]") {
  TensorDict plain = fixture();
  plain.set_names({"batch"});
  TensorDict packed = consolidate(plain);
  REQUIRE(is_consolidated(packed));
  CHECK(intact(packed));
  CHECK(packed.num_keys() == plain.num_keys());
  // Ops read its storage; their results are intact too, with the root's names.
  TensorDict twice = packed * 2;
  CHECK(intact(packed));
  CHECK(intact(twice));
  CHECK((twice.names() == plain.names()));
  CHECK(packed.sum(reduce).item<float>() == Approx(plain.sum(reduce).item<float>()).epsilon(1e-4).margin(1e-3));
  // In place, through the storage the leaves (made later) view.
  packed.add_(1);
  CHECK(intact(packed));
  require_same(twice, plain * 2);
  const at::Tensor l1 = packed.get("l1");
  CHECK(intact(packed));  // read, not written
  CHECK(at::equal(l1, plain.get("l1") + 1));
  CHECK(l1.storage().is_alias_of(consolidated_storage(packed).storage()));
  require_same(packed, plain + 1);
  // Its leaves are views autograd knows, as they were made before (one version counter with the
  // storage: an in-place change of the storage after a leaf was saved for backward is caught).
  CHECK(l1.is_view());
  const auto version = l1._version();
  consolidated_storage(packed).add_(0);
  CHECK(l1._version() > version);
  // Its bytes round-trip; what from_bytes rebuilds is intact again.
  TensorDict back = from_bytes(to_bytes(packed));
  CHECK(intact(back));
  require_same(back, plain + 1);
}

TEST_CASE("consolidated tensordicts of mixed dtypes or padded leaves make their leaves at once",
          "[unit][lazy_leaves]") {
  TensorDict mixed = fixture();
  mixed.set("ints", at::arange(10));
  TensorDict padded({}, {3});
  padded.set("a", at::randn({3}));  // 12 bytes, padded to 16
  padded.set("b", at::randn({3}));
  for (const TensorDict& plain : {mixed, padded}) {
    TensorDict packed = consolidate(plain);
    CHECK_FALSE(intact(packed));
    require_same(packed, plain);
    require_same(packed.exp(), plain.exp());
  }
}
