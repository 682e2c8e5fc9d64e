// Unit tests of the in-memory backend's key table (TensorDictImpl): per-slot key hashes, the
// linear scan below 16 keys, the hash index above, and the constructor's duplicate check,
// which only scans when a key's hash bit was seen before.
#include "support/catch_torch.h"

#include <set>
#include <string>
#include <vector>

#include <tensordict/tensor_dict_impl.h>
#include <tensordict/tensordict.h>

using namespace tensordict;

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

}  // namespace

TEST_CASE("the awkward keys are distinct", "[unit][slots]") {
  const std::vector<std::string> keys = awkward_keys();
  CHECK(std::set<std::string>(keys.begin(), keys.end()).size() == keys.size());
}

TEST_CASE("key_hash is stable and separates keys that differ in one byte", "[unit][slots]") {
  CHECK(TensorDictImpl::key_hash("abcd") == TensorDictImpl::key_hash(std::string("abcd")));
  CHECK(TensorDictImpl::key_hash("abcdefgh") != TensorDictImpl::key_hash("abcdefgi"));
  CHECK(TensorDictImpl::key_hash("abcdefghi") != TensorDictImpl::key_hash("bbcdefghi"));
  CHECK(TensorDictImpl::key_hash("") != TensorDictImpl::key_hash(std::string(1, '\0')));
}

TEST_CASE("every key is found at its position, below and above the index threshold", "[unit][slots]") {
  const std::vector<std::string> keys = awkward_keys();
  for (size_t count : {size_t{5}, size_t{16}, size_t{17}, keys.size()}) {
    TensorDictImpl impl({2}, std::nullopt);
    for (size_t i = 0; i < count; ++i) impl.insert_or_assign(keys[i], at::full({2}, static_cast<double>(i)));
    REQUIRE(impl.num_entries() == count);
    for (size_t i = 0; i < count; ++i) {
      INFO("count " << count << ", key #" << i << " '" << keys[i] << "'");
      CHECK(impl.find_slot(keys[i]) == static_cast<int64_t>(i));
      CHECK(impl.get(keys[i]).tensor()[0].item<double>() == static_cast<double>(i));
    }
    for (size_t i = count; i < keys.size(); ++i) CHECK(impl.find_slot(keys[i]) == -1);
    CHECK(impl.find_slot("not there") == -1);
  }
}

TEST_CASE("erase and rename keep lookups right on both sides of the threshold", "[unit][slots]") {
  const std::vector<std::string> keys = awkward_keys();
  TensorDictImpl impl({}, std::nullopt);
  for (size_t i = 0; i < 20; ++i) impl.insert_or_assign(keys[i], at::full({}, static_cast<double>(i)));
  impl.rename(keys[19], "renamed");
  CHECK(impl.find_slot(keys[19]) == -1);
  CHECK(impl.find_slot("renamed") == 19);
  // Erasing down to 16 keys drops the index; the scan must still see the renamed key.
  for (size_t i = 0; i < 4; ++i) impl.erase(keys[i]);
  CHECK(impl.num_entries() == 16);
  CHECK(impl.find_slot("renamed") == 15);
  impl.rename("renamed", keys[0]);
  CHECK(impl.find_slot(keys[0]) == 15);
  CHECK(impl.get(keys[0]).tensor().item<double>() == 19.0);
  for (size_t i = 4; i < 19; ++i) CHECK(impl.find_slot(keys[i]) == static_cast<int64_t>(i - 4));
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
