// Unit tests of the in-memory backend's key table, through the TensorDict handle: per-slot key
// hashes, the linear scan below 16 keys, the hash index above, O(1) erase with tombstones and
// compaction (insertion order kept), the constructor's duplicate check (which only scans when a
// key's bit in its filter was seen before), and slots allocated with the level.
#include "support/catch_torch.h"

#include <set>
#include <thread>
#include <string>
#include <vector>

#include <tensordict/backends/consolidated.h>
#include <tensordict/tensordict.h>

#include "backends/in_memory/key_hash.h"

using namespace tensordict;
using in_memory::key_hash;

namespace {

// Keys that stress the hash's length classes: empty, 1-3 bytes, 4-8 (overlapping words),
// exactly 8 and 9 (one full word plus a tail), and long keys with shared prefixes and suffixes.
// All distinct (checked by the first test).
std::vector<std::string> awkward_keys() {
  std::vector<std::string> keys = {"", "a", "b", "ab", "ba", "abc", "acb", "abcd", "abdc",
                                   "abcdefgh", "abcdefgi", "abcdefghi", "bbcdefghi"};
  for (int i = 1; i <= 40; ++i) {
    keys.push_back("observation/pixels/" + std::to_string(i) + "/left");
    keys.push_back(std::string(static_cast<size_t>(i), 'x'));
  }
  keys.push_back(std::string("nul\0in", 6));
  keys.push_back(std::string("nul\0im", 6));
  return keys;
}

// Position of `key` in the listing order, or -1.
int64_t position(const TensorDict& td, const std::string& key) {
  const std::vector<NestedKey> keys = td.keys();
  for (size_t i = 0; i < keys.size(); ++i) {
    if (keys[i] == NestedKey(key)) return static_cast<int64_t>(i);
  }
  return -1;
}

}  // namespace

TEST_CASE("the awkward keys are distinct", "[unit][slots]") {
  const std::vector<std::string> keys = awkward_keys();
  CHECK(std::set<std::string>(keys.begin(), keys.end()).size() == keys.size());
}

TEST_CASE("key_hash is stable and separates keys that differ in one byte", "[unit][slots]") {
  CHECK(key_hash("abcd") == key_hash(std::string("abcd")));
  CHECK(key_hash("abcdefgh") != key_hash("abcdefgi"));
  CHECK(key_hash("abcdefghi") != key_hash("bbcdefghi"));
  CHECK(key_hash("") != key_hash(std::string(1, '\0')));
}

TEST_CASE("key_hash separates every one-byte change, at any position and key length",
          "[unit][slots]") {
  // Keys of up to 8 bytes are read exactly, and one multiply keeps a change in any byte visible
  // in the 32-bit result; longer keys go through a multiply per word.
  size_t collisions = 0;
  for (size_t length = 1; length <= 24; ++length) {
    std::string base(length, 'k');
    for (size_t i = 0; i < length; ++i) base[i] = static_cast<char>('a' + i);
    const uint32_t base_hash = key_hash(base);
    for (size_t pos = 0; pos < length; ++pos) {
      for (int byte = 0; byte < 256; ++byte) {
        std::string changed = base;
        if (static_cast<unsigned char>(changed[pos]) == byte) continue;
        changed[pos] = static_cast<char>(byte);
        if (key_hash(changed) == base_hash) ++collisions;
      }
    }
  }
  CHECK(collisions == 0);
  // The length is part of the hash: a key and its zero-padded extension differ.
  CHECK(key_hash("ab") != key_hash(std::string("ab\0", 3)));
  CHECK(key_hash("abcd") != key_hash(std::string("abcd\0\0\0\0", 8)));
}

TEST_CASE("key_equals tells every one-byte change and length apart, at any position", "[unit][slots]") {
  // Short keys are compared in two overlapping loads a side: every byte must still count.
  size_t wrong = 0;
  for (size_t length = 0; length <= 40; ++length) {
    std::string base(length, 'k');
    for (size_t i = 0; i < length; ++i) base[i] = static_cast<char>('a' + i % 26);
    if (!in_memory::key_equals(base, std::string(base))) ++wrong;
    if (in_memory::key_equals(base, base + "x") || in_memory::key_equals(base + "x", base)) ++wrong;
    for (size_t pos = 0; pos < length; ++pos) {
      for (int byte = 0; byte < 256; ++byte) {
        std::string changed = base;
        if (static_cast<unsigned char>(changed[pos]) == byte) continue;
        changed[pos] = static_cast<char>(byte);
        if (in_memory::key_equals(base, changed) || in_memory::key_equals(changed, base)) ++wrong;
      }
    }
  }
  CHECK(wrong == 0);
  // Views into longer buffers compare their own bytes only.
  const std::string buffer = "abcdefghXabcdefghY";
  CHECK(in_memory::key_equals(std::string_view(buffer).substr(0, 8), std::string_view(buffer).substr(9, 8)));
  CHECK_FALSE(in_memory::key_equals(std::string_view(buffer).substr(0, 9), std::string_view(buffer).substr(9, 9)));
}

TEST_CASE("every key is found at its position, below and above the index threshold", "[unit][slots]") {
  const std::vector<std::string> keys = awkward_keys();
  for (size_t count : {size_t{5}, size_t{16}, size_t{17}, keys.size()}) {
    TensorDict td({}, {2});
    for (size_t i = 0; i < count; ++i) td.set(keys[i], at::full({2}, static_cast<double>(i)));
    REQUIRE(td.num_keys() == count);
    for (size_t i = 0; i < count; ++i) {
      INFO("count " << count << ", key #" << i << " '" << keys[i] << "'");
      CHECK(position(td, keys[i]) == static_cast<int64_t>(i));
      CHECK(td.get(keys[i])[0].item<double>() == static_cast<double>(i));
    }
    for (size_t i = count; i < keys.size(); ++i) CHECK_FALSE(td.contains(keys[i]));
    CHECK_FALSE(td.contains("not there"));
  }
}

TEST_CASE("erase and rename keep lookups right on both sides of the threshold", "[unit][slots]") {
  const std::vector<std::string> keys = awkward_keys();
  TensorDict td;
  for (size_t i = 0; i < 20; ++i) td.set(keys[i], at::full({}, static_cast<double>(i)));
  td.rename_key_(keys[19], "renamed");
  CHECK_FALSE(td.contains(keys[19]));
  CHECK(position(td, "renamed") == 19);
  // Erasing down to 16 keys leaves tombstones in the indexed table; lookups skip them.
  for (size_t i = 0; i < 4; ++i) td.erase(keys[i]);
  CHECK(td.num_keys() == 16);
  CHECK(position(td, "renamed") == 15);
  td.rename_key_("renamed", keys[0]);
  CHECK(position(td, keys[0]) == 15);
  CHECK(td.get(keys[0]).item<double>() == 19.0);
  for (size_t i = 4; i < 19; ++i) CHECK(position(td, keys[i]) == static_cast<int64_t>(i - 4));
}

TEST_CASE("a small level erases a key at any position, each scan length, and keeps the others in order",
          "[unit][slots]") {
  // The lookup scans four hashes a step, then the rest one by one; an erase looks from the last
  // slot back. Every level size up to the index threshold, every position.
  const std::vector<std::string> keys = awkward_keys();
  for (size_t count = 1; count <= 16; ++count) {
    for (size_t gone = 0; gone < count; ++gone) {
      TensorDict td({}, {2});
      for (size_t i = 0; i < count; ++i) td.set(keys[i], at::full({2}, static_cast<double>(i)));
      td.erase(keys[gone]);
      INFO("count " << count << ", erased #" << gone);
      REQUIRE(td.num_keys() == count - 1);
      CHECK_FALSE(td.contains(keys[gone]));
      CHECK_THROWS_AS(td.erase(keys[gone]), KeyError);
      for (size_t i = 0; i < count; ++i) {
        if (i == gone) continue;
        CHECK(position(td, keys[i]) == static_cast<int64_t>(i < gone ? i : i - 1));
        CHECK(td.get(keys[i])[0].item<double>() == static_cast<double>(i));
      }
      td.set(keys[gone], at::full({2}, -1.0));  // back, at the end
      CHECK(position(td, keys[gone]) == static_cast<int64_t>(count - 1));
    }
  }
}

TEST_CASE("erase_if_present says whether it removed the key, scanned or indexed, and erase raises on a missing one",
          "[unit][slots][errors]") {
  const std::vector<std::string> keys = awkward_keys();
  for (size_t count : {size_t{5}, size_t{20}}) {
    INFO("count " << count);
    TensorDict td({}, {2});
    for (size_t i = 0; i < count; ++i) td.set(keys[i], at::full({2}, static_cast<double>(i)));
    CHECK(td.impl()->erase_if_present(keys[1]));
    CHECK_FALSE(td.impl()->erase_if_present(keys[1]));  // gone already
    CHECK_FALSE(td.impl()->erase_if_present("not there"));
    CHECK(td.num_keys() == count - 1);
    CHECK(position(td, keys[2]) == 1);
    CHECK_THROWS_AS(td.erase(keys[1]), KeyError);
    td.set({"sub", "kept"}, at::zeros({2}));
    CHECK_THROWS_WITH(td.erase({"sub", "not there"}), Catch::Contains("not there"));  // level there, key not
    CHECK(td.contains({"sub", "kept"}));
    td.erase("sub");
    td.erase(keys[0]);
    CHECK(td.num_keys() == count - 2);
  }
  // The default (has, then erase) of a backend that does not override it, a lazy stack's level.
  TensorDict a({{"x", at::zeros({2})}, {"y", at::ones({2})}}, {2});
  TensorDict lazy = lazy_stack({a, a.clone()}, 0);
  CHECK(lazy.impl()->erase_if_present("x"));
  CHECK_FALSE(lazy.impl()->erase_if_present("x"));
  CHECK_FALSE(lazy.contains("x"));
  CHECK(lazy.contains("y"));
  // A consolidated level (a TableBackend over an in-memory table) answers from its table.
  TensorDict packed = consolidate(TensorDict({{"x", at::zeros({2})}, {"y", at::ones({2})}}, {2}));
  const uint64_t version = packed.impl()->layout_version();
  CHECK(packed.impl()->erase_if_present("x"));
  CHECK(packed.impl()->layout_version() != version);  // cached entry addresses are dropped
  CHECK_FALSE(packed.impl()->erase_if_present("x"));
  CHECK_FALSE(packed.contains("x"));
  CHECK(at::equal(packed.get("y"), at::ones({2})));
}

TEST_CASE("insert_or_assign_at replaces at the hinted position, else looks the key up or appends it", "[unit][slots]") {
  const std::vector<std::string> keys = awkward_keys();
  for (size_t count : {size_t{5}, size_t{20}}) {
    INFO("count " << count);
    TensorDict td({}, {2});
    for (size_t i = 0; i < count; ++i) td.set(keys[i], at::full({2}, static_cast<double>(i)));
    td.impl()->insert_or_assign_at(keys[3], 3, at::full({2}, -3.0));  // the hint holds the key
    td.impl()->insert_or_assign_at(keys[4], 0, at::full({2}, -4.0));  // it holds another key
    td.impl()->insert_or_assign_at(keys[1], 99, at::full({2}, -1.0));  // past the end
    td.impl()->insert_or_assign_at("new", 2, at::full({2}, -9.0));  // a new key is appended
    // In an indexed level an erased slot stays as a tombstone: a hint pointing at it looks up.
    td.erase(keys[2]);
    td.impl()->insert_or_assign_at(keys[2], 2, at::full({2}, -2.0));
    CHECK(td.num_keys() == count + 1);
    CHECK(at::equal(td.get(keys[0]), at::full({2}, 0.0)));
    CHECK(at::equal(td.get(keys[1]), at::full({2}, -1.0)));
    CHECK(at::equal(td.get(keys[2]), at::full({2}, -2.0)));
    CHECK(at::equal(td.get(keys[3]), at::full({2}, -3.0)));
    CHECK(at::equal(td.get(keys[4]), at::full({2}, -4.0)));
    CHECK(at::equal(td.get("new"), at::full({2}, -9.0)));
    CHECK(position(td, keys[3]) == 2);  // keys[2] was erased before it and appended again
    CHECK(position(td, keys[2]) == static_cast<int64_t>(count));
    CHECK(td.keys().back() == NestedKey(keys[2]));
  }
  // A backend that does not override it (a lazy stack) gets insert_or_assign.
  TensorDict a({{"x", at::zeros({2})}}, {2});
  TensorDict lazy = lazy_stack({a, a.clone()}, 0);
  lazy.impl()->insert_or_assign_at("x", 0, at::ones({2, 2}));
  CHECK(at::equal(lazy.get("x"), at::ones({2, 2})));
}

TEST_CASE("erasing most of a large level keeps the order and every lookup (tombstones compacted)",
          "[unit][slots]") {
  // Note [Erasing in O(1)]: tombstones pile up, then the slots are compacted in order.
  TensorDict td;
  const int n = 1000;
  for (int i = 0; i < n; ++i) td.set("k" + std::to_string(i), at::full({}, static_cast<double>(i)));
  // Every other key from the front, then most of the rest from the back.
  for (int i = 0; i < n; i += 2) td.erase("k" + std::to_string(i));
  CHECK(td.num_keys() == static_cast<size_t>(n / 2));
  for (int i = n - 1; i >= 40; i -= 2) td.erase("k" + std::to_string(i));
  REQUIRE(td.num_keys() == 20);
  std::vector<NestedKey> keys = td.keys();
  for (int j = 0; j < 20; ++j) {
    const std::string key = "k" + std::to_string(2 * j + 1);
    CHECK(keys[static_cast<size_t>(j)] == NestedKey(key));
    CHECK(td.get(key).item<double>() == 2 * j + 1);
  }
  for (int i = 0; i < n; i += 2) CHECK_FALSE(td.contains("k" + std::to_string(i)));
  // The table keeps working: re-adding an erased key appends it at the end.
  td.set("k0", at::zeros({}));
  CHECK(td.keys().back() == NestedKey("k0"));
  CHECK(td.num_keys() == 21);
  // Down to a handful: back to the linear scan, still in order.
  for (int j = 0; j < 18; ++j) td.erase("k" + std::to_string(2 * j + 1));
  std::vector<std::string> left;
  for (const auto& k : td.keys()) left.push_back(k.front());
  CHECK((left == std::vector<std::string>{"k37", "k39", "k0"}));
}

TEST_CASE("select_ on a large level clears it at once and keeps the selection order", "[unit][slots]") {
  // select_ drops the whole table (the clear hook) and re-inserts what it keeps.
  TensorDict td;
  for (int i = 0; i < 500; ++i) td.set("k" + std::to_string(i), at::full({}, static_cast<double>(i)));
  td.erase("k7");  // a tombstone in the table being cleared
  td.select_({"k300", "k3", "k499"});
  std::vector<std::string> left;
  for (const auto& k : td.keys()) left.push_back(k.front());
  CHECK((left == std::vector<std::string>{"k300", "k3", "k499"}));
  CHECK(td.get("k3").item<double>() == 3);
  CHECK_FALSE(td.contains("k4"));
  // The cleared level grows its index again past the linear-scan threshold.
  for (int i = 0; i < 100; ++i) td.set("n" + std::to_string(i), at::full({}, static_cast<double>(i)));
  CHECK(td.num_keys() == 103);
  CHECK(td.get("n77").item<double>() == 77);
  CHECK(position(td, "n0") == 3);
}

TEST_CASE("renaming in a large level keeps positions and frees the old key", "[unit][slots]") {
  TensorDict td;
  for (int i = 0; i < 100; ++i) td.set("k" + std::to_string(i), at::full({}, static_cast<double>(i)));
  for (int i = 0; i < 100; i += 3) td.rename_key_("k" + std::to_string(i), "r" + std::to_string(i));
  for (int i = 0; i < 100; ++i) {
    const std::string now = (i % 3 == 0 ? "r" : "k") + std::to_string(i);
    CHECK(position(td, now) == i);
    CHECK(td.get(now).item<double>() == i);
  }
  CHECK_FALSE(td.contains("k0"));
  td.set("k0", at::ones({}));  // the old name is free again
  CHECK(position(td, "k0") == 100);
}

TEST_CASE("the constructor finds a duplicate key wherever it is", "[unit][slots][errors]") {
  const std::vector<std::string> keys = awkward_keys();
  // A duplicate of every earlier key, at every position: the 64-bit seen mask must never let one
  // through (with 100 keys every bit is taken, so the scan runs; with few keys it must too).
  for (size_t n : {size_t{2}, size_t{9}, size_t{30}, keys.size()}) {
    for (size_t dup : {size_t{0}, n / 2, n - 1}) {
      std::vector<TensorDict::Item> items;
      for (size_t i = 0; i < n; ++i) items.emplace_back(keys[i], at::zeros({1}));
      items.emplace_back(keys[dup], at::ones({1}));
      INFO(n << " keys, duplicate of #" << dup);
      REQUIRE_THROWS_AS(TensorDict(items, {1}), ValueError);
      REQUIRE_THROWS_WITH(TensorDict(items, {1}), Catch::Contains("duplicate key") &&
                                                      Catch::Contains("in TensorDict constructor"));
    }
  }
  std::vector<TensorDict::Item> unique;
  for (const auto& k : keys) unique.emplace_back(k, at::zeros({1}));
  CHECK(TensorDict(unique, {1}).num_keys() == keys.size());
}

TEST_CASE("a level made with room for its slots grows past it and keeps every entry",
          "[unit][slots]") {
  const std::vector<std::string> keys = awkward_keys();
  at::Tensor shared = at::zeros({3});
  for (size_t capacity : {size_t{0}, size_t{1}, size_t{4}, size_t{40}}) {
    INFO("inline capacity " << capacity);
    {
      // A constructor sizes the level's inline block to its items.
      TensorDict td = [&] {
        std::vector<TensorDict::Item> items;
        for (size_t i = 0; i < std::min<size_t>(capacity, 30); ++i) items.emplace_back(keys[i], i % 2 == 0 ? shared : at::full({3}, double(i)));
        return TensorDict(items, {3});
      }();
      for (size_t i = std::min<size_t>(capacity, 30); i < 30; ++i) {
        td.set(keys[i], i % 2 == 0 ? shared : at::full({3}, static_cast<double>(i)));
        // Lookups stay right as the slots move from the inline block to the heap.
        REQUIRE(position(td, keys[i / 2]) == static_cast<int64_t>(i / 2));
      }
      CHECK(shared.use_count() == 16);
      td.erase(keys[0]);
      td.erase(keys[29]);
      CHECK(td.num_keys() == 28);
      CHECK(shared.use_count() == 15);
      for (size_t i = 1; i < 29; ++i) CHECK(position(td, keys[i]) == static_cast<int64_t>(i - 1));
      CHECK(td.get(keys[5]).equal(at::full({3}, 5.0)));
    }
    // The level and every slot are gone with the last handle.
    CHECK(shared.use_count() == 1);
  }
}

TEST_CASE("the constructor and batch ops build levels of the right size in one block",
          "[unit][slots]") {
  TensorDict td({{"a", at::zeros({4, 2})}, {"b", {{"c", at::ones({4})}, {"d", at::ones({4, 1})}}}},
                {4});
  // Appending to a level whose inline block is full moves it to the heap; nothing is lost.
  td.set({"b", "e"}, at::zeros({4}));
  td.set("f", at::zeros({4}));
  CHECK(td.keys(true, true).size() == 5);
  TensorDict half = td.index({at::indexing::Slice(0, 2)});
  half.set({"b", "g"}, at::zeros({2}));
  CHECK(half.get({"b", "c"}).sizes() == c10::IntArrayRef({2}));
  CHECK(half.get({"b", "g"}).sizes() == c10::IntArrayRef({2}));
  CHECK_FALSE(td.contains({"b", "g"}));
}

#include "backends/in_memory/level_builder.h"

TEST_CASE("a level built with its index made once finds every key, appends mixed with checked ones",
          "[unit][slots]") {
  // LevelBuilder::append leaves the index to finish(); try_append (a lookup, then an indexed
  // append) may come in between, and appends after it must keep that index whole.
  for (int before : {10, 40}) {
    LevelBuilder builder({2}, std::nullopt, 4);
    std::vector<std::string> keys;
    auto add = [&](const std::string& k) {
      builder.append(k, at::full({2}, static_cast<double>(keys.size())));
      keys.push_back(k);
    };
    for (int i = 0; i < before; ++i) add("a" + std::to_string(i));
    CHECK_FALSE(builder.try_append("a3", at::zeros({2})));  // found by a scan: no index yet
    REQUIRE(builder.try_append("checked", at::full({2}, static_cast<double>(keys.size()))));
    keys.push_back("checked");
    for (int i = 0; i < 30; ++i) add("b" + std::to_string(i));
    CHECK_FALSE(builder.try_append("b29", at::zeros({2})));
    TensorDict td = builder.finish();
    INFO("appended before the checked one: " << before);
    REQUIRE(td.impl()->keys() == keys);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!td.contains(keys[i]) || td.get(keys[i])[0].item<double>() != static_cast<double>(i)) FAIL("lost " << keys[i]);
    }
    CHECK_FALSE(td.contains("b30"));
    td.erase("a5");
    td.set("late", at::ones({2}));
    CHECK_FALSE(td.contains("a5"));
    CHECK(td.contains("late"));
    CHECK(td.contains("b17"));
  }
}

TEST_CASE("a level built whole gets its index on the first lookup, from any reader or write",
          "[unit][slots]") {
  // LevelBuilder::finish leaves a level of more than 16 keys without its index until a lookup by
  // key (or a write) needs it; walks need none.
  auto build = [] {
    LevelBuilder builder({2}, std::nullopt, 40);
    for (int i = 0; i < 40; ++i) builder.append("k" + std::to_string(i), at::full({2}, static_cast<double>(i)));
    return builder.finish();
  };
  auto value_of = [](const TensorDict& td, const std::string& key) { return td.get(key)[0].item<double>(); };
  SECTION("walked, then looked up") {
    TensorDict td = build();
    REQUIRE(td.impl()->keys().size() == 40);
    CHECK(td.impl()->keys()[39] == "k39");
    for (int i = 0; i < 40; ++i) CHECK(value_of(td, "k" + std::to_string(i)) == i);
    CHECK_FALSE(td.contains("k40"));
  }
  SECTION("erased from first") {
    TensorDict td = build();
    td.erase("k7");
    td.erase("k39");
    CHECK_FALSE(td.contains("k7"));
    CHECK(td.impl()->keys().size() == 38);
    for (int i = 8; i < 39; ++i) CHECK(value_of(td, "k" + std::to_string(i)) == i);
  }
  SECTION("renamed first") {
    TensorDict td = build();
    td.rename_key_("k3", "three");
    CHECK(value_of(td, "three") == 3);
    CHECK_FALSE(td.contains("k3"));
    CHECK(position(td, "three") == 3);
    CHECK(value_of(td, "k30") == 30);
  }
  SECTION("appended to first") {
    TensorDict td = build();
    td.set("k40", at::full({2}, 40.0));
    td.set("k5", at::full({2}, -5.0));  // replaces
    CHECK(td.impl()->keys().size() == 41);
    for (int i = 6; i <= 40; ++i) CHECK(value_of(td, "k" + std::to_string(i)) == i);
    CHECK(value_of(td, "k5") == -5);
  }
  SECTION("looked up first by concurrent readers") {
    for (int round = 0; round < 20; ++round) {
      TensorDict td = build();
      std::vector<int> wrong(4, 0);
      std::vector<std::thread> readers;
      for (int t = 0; t < 4; ++t) {
        readers.emplace_back([&, t] {
          for (int i = 0; i < 40; ++i) {
            if (!td.impl()->has("k" + std::to_string((i + 10 * t) % 40))) ++wrong[t];
          }
          if (td.impl()->has("missing")) ++wrong[t];
        });
      }
      for (std::thread& r : readers) r.join();
      for (int t = 0; t < 4; ++t) CHECK(wrong[t] == 0);
    }
  }
  SECTION("flatten_keys") {
    TensorDict nested({}, {2});
    for (int g = 0; g < 4; ++g) {
      for (int x = 0; x < 10; ++x) nested.set({"g" + std::to_string(g), "x" + std::to_string(x)}, at::full({2}, g * 10.0 + x));
    }
    TensorDict flat = nested.flatten_keys(".");
    REQUIRE(flat.num_keys() == 40);
    for (int g = 0; g < 4; ++g) {
      for (int x = 0; x < 10; ++x) CHECK(value_of(flat, "g" + std::to_string(g) + "." + std::to_string(x).insert(0, "x")) == g * 10 + x);
    }
  }
  SECTION("flatten_keys joins key parts of every length, each copy's short paths and the long one") {
    // Parts of 0 to 40 bytes (each length of the copy's cases and their edges), three levels
    // deep, with separators of 1 to 3 bytes: every flattened key is the parts joined.
    const auto part = [](size_t n, char c) {
      std::string s(n, c);
      for (size_t i = 0; i < n; ++i) s[i] = static_cast<char>(c + i % 7);  // no two bytes alike in a row
      return s;
    };
    for (const std::string sep : {".", "::", "<->"}) {
      TensorDict nested({}, {2});
      std::vector<std::string> want;
      for (size_t a = 0; a <= 40; a += 3) {
        for (size_t b = 0; b <= 20; ++b) {
          const std::string outer = part(a, 'a') + "A", inner = part(b, 'k');
          nested.set({outer, "m", inner}, at::zeros({2}));
          want.push_back(outer + sep + "m" + sep + inner);
        }
      }
      const TensorDict flat = nested.flatten_keys(sep);
      std::vector<std::string> got;
      for (const NestedKey& k : flat.keys()) got.push_back(k[0]);
      CHECK(got == want);
    }
  }
}
