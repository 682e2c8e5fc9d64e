// Contract: map / map_iter over chunks in a thread pool, to_dict, get_item_shape and pin_memory_
// (issue 33), on every backend.
#include "support/catch_torch.h"

#include <atomic>
#include <set>
#include <thread>

#include <tensordict/dict.h>
#include <tensordict/map.h>

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using contract::ContractBackends;
using contract::Sizes;
using contract::sizes_of;

namespace {
TensorDict rows() {
  return TensorDict({{"x", at::arange(20, at::kFloat).view({10, 2})}, {"n", {{"i", at::arange(10, at::kLong)}}}}, {10});
}
}  // namespace

TEMPLATE_LIST_TEST_CASE("map applies fn to chunks on several threads and concatenates in order", "[contract][map]",
                        ContractBackends) {
  TensorDict td = TestType::make(rows());
  std::mutex m;
  std::set<std::thread::id> threads;
  MapOptions options;
  options.num_workers = 3;
  options.chunksize = 2;
  std::optional<TensorDict> out = map(
      td,
      [&](const TensorDict& chunk) {
        {
          std::lock_guard<std::mutex> lock(m);
          threads.insert(std::this_thread::get_id());
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(5));  // so the workers overlap
        return chunk * 2;
      },
      options);
  REQUIRE(out);
  CHECK(at::equal(out->get("x"), rows().get("x") * 2));
  CHECK(at::equal(out->get({"n", "i"}), rows().get({"n", "i"}) * 2));
  CHECK(threads.size() > 1);
  // chunksize 0: single rows without the dim, stacked back.
  options.chunksize = 0;
  out = map(td, [](const TensorDict& row) {
    CHECK(row.batch_dims() == 0);
    return row + 1;
  }, options);
  CHECK(at::equal(out->get("x"), rows().get("x") + 1));
  // Null results are dropped; all null gives nullopt.
  options.chunksize = std::nullopt;
  options.num_chunks = 5;
  CHECK_FALSE(map(td, [](const TensorDict&) { return std::optional<TensorDict>(); }, options));
}

TEMPLATE_LIST_TEST_CASE("map writes into out, map_iter yields in order or shuffled, errors are rethrown",
                        "[contract][map]", ContractBackends) {
  TensorDict td = TestType::make(rows());
  TensorDict out = rows().apply([](const at::Tensor& t) { return at::zeros_like(t); });
  MapOptions options;
  options.num_chunks = 3;
  map(td, [](const TensorDict& c) { return c - 1; }, out, options);
  CHECK(at::equal(out.get("x"), rows().get("x") - 1));

  options.num_chunks = std::nullopt;
  options.chunksize = 3;
  MapIter it = map_iter(td, [](const TensorDict& c) { return c.clone(); }, options);
  CHECK(it.num_chunks() == 4);
  std::vector<int64_t> firsts;
  while (auto r = it.next()) firsts.push_back(r->get({"n", "i"})[0].item<int64_t>());
  CHECK(firsts == std::vector<int64_t>{0, 3, 6, 9});

  options.shuffle = true;
  options.seed = 7;
  options.chunksize = 1;
  MapIter shuffled = map_iter(td, [](const TensorDict& c) { return c.clone(); }, options);
  std::vector<int64_t> seen;
  while (auto r = shuffled.next()) seen.push_back(r->get({"n", "i"})[0].item<int64_t>());
  CHECK(seen.size() == 10);
  CHECK(std::set<int64_t>(seen.begin(), seen.end()).size() == 10);
  CHECK_FALSE(std::is_sorted(seen.begin(), seen.end()));

  options.shuffle = false;
  MapIter failing = map_iter(td, [](const TensorDict& c) -> std::optional<TensorDict> {
    if (c.get({"n", "i"})[0].item<int64_t>() == 4) throw ValueError("chunk 4 is bad");
    return c;
  }, options);
  CHECK_THROWS_WITH([&] { while (failing.next()) {} }(), Catch::Contains("chunk 4 is bad"));
  options.num_chunks = 2;
  CHECK_THROWS_AS(map(td, [](const TensorDict& c) { return c; }, options), ValueError);  // both set
}

TEMPLATE_LIST_TEST_CASE("to_dict gives nested records in key order", "[contract][to_dict]", ContractBackends) {
  TensorDict ref = rows();
  ref.set_non_tensor("tag", json::Value("run"));
  TensorDict td = TestType::make(ref);
  Dict d = to_dict(td);
  REQUIRE(d.size() == 3);
  std::vector<std::string> keys;
  for (const auto& [k, v] : d) keys.push_back(k);
  auto at_key = [&](const Dict& dict, const std::string& key) -> const DictValue& {
    for (const auto& [k, v] : dict)
      if (k == key) return v;
    FAIL("no key " << key);
    throw;
  };
  // The tensordict's key order (a backend may list leaves before nested levels).
  std::vector<std::string> td_keys;
  for (const auto& k : td.keys()) td_keys.push_back(k[0]);
  CHECK(keys == td_keys);
  CHECK(at::equal(std::get<at::Tensor>(at_key(d, "x")), ref.get("x")));
  CHECK(std::get<Dict>(at_key(d, "n"))[0].first == "i");
  CHECK(std::get<json::Value>(at_key(d, "tag")) == json::Value("run"));
  ToDictOptions lists;
  lists.convert_tensors = true;
  Dict l = to_dict(td, lists);
  CHECK(std::get<json::Value>(at_key(l, "x")).as_array()[1] == json::parse("[2.0, 3.0]"));
}

TEMPLATE_LIST_TEST_CASE("get_item_shape reads shapes without reading data", "[contract][structure]", ContractBackends) {
  TensorDict td = TestType::make(rows());
  CHECK(td.get_item_shape("x") == std::vector<int64_t>{10, 2});
  CHECK(td.get_item_shape({"n", "i"}) == std::vector<int64_t>{10});
  CHECK(td.get_item_shape("n") == std::vector<int64_t>{10});
  CHECK_THROWS_AS(td.get_item_shape("missing"), KeyError);
}

TEMPLATE_LIST_TEST_CASE("pin_memory_ keeps the values (a no-op without CUDA)", "[contract][structure]",
                        ContractBackends) {
  TensorDict td = TestType::make(rows());
  if (!at::hasCUDA()) {
    CHECK(&td.pin_memory_() == &td);
  } else {
    // With CUDA, a backend whose leaves cannot be rebound to pinned copies says so and is left
    // as it was; the others pin every leaf.
    bool pinned = false;
    try {
      pinned = &td.pin_memory_() == &td;
    } catch (const NotImplementedError& e) {
      CHECK_THAT(e.what(), Catch::Contains("pin_memory in place"));
    }
    if (pinned) CHECK(td.get("x").is_pinned());
  }
  CHECK(at::equal(td.get("x"), rows().get("x")));
}
