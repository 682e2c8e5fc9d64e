// Contract: construction, batch-size validation, empty and zero-sized batches.
// ATen before Catch: c10/util/logging's CHECK macro would otherwise replace Catch's CHECK
// (a failing CHECK would abort instead of being reported).
#include <ATen/ATen.h>

#include "contract/backends.h"

#include <catch2/catch.hpp>

using namespace tensordict;
using contract::ContractBackends;

TEMPLATE_LIST_TEST_CASE("a tensordict keeps its leaves, batch size and key order", "[contract][construction]",
                        ContractBackends) {
  TensorDict ref({{"b", at::zeros({3, 4})}, {"a", at::ones({3})}, {"n", {{"x", at::zeros({3, 2})}}}}, {3});
  TensorDict td = TestType::make(ref);
  CHECK((td.batch_size() == c10::IntArrayRef{3}));
  REQUIRE(td.keys().size() == 3);
  CHECK(td.keys()[0] == NestedKey("b"));
  CHECK(td.keys()[1] == NestedKey("a"));
  CHECK((td.get({"n", "x"}).sizes() == c10::IntArrayRef{3, 2}));
  CHECK(at::equal(td.get("a"), at::ones({3})));
}

TEST_CASE("a leaf whose leading dims differ from the batch size is refused, naming key and shapes",
          "[construction][errors]") {
  REQUIRE_THROWS_AS(TensorDict({{"a", at::zeros({3})}}, {4}), ShapeError);
  REQUIRE_THROWS_WITH(TensorDict({{"n", {{"a", at::zeros({3})}}}}, {4}),
                      Catch::Contains("batch dimension mismatch") &&
                          Catch::Contains("torch.Size([4])") && Catch::Contains("torch.Size([3])") &&
                          Catch::Contains("'a'"));
}
