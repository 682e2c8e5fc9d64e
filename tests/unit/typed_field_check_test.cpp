// typed::check_entry over a non-tensor stack whose pool keeps a value no row holds any more (the
// null a first indexed write leaves in the other rows): what from_tensordict checks after a
// field was written row by row. The sanitizer tree runs this suite with an instrumented runtime,
// where judging a pool that is already destroyed is a heap-use-after-free; a batched build of the
// runtime once read it as "an object".

#include "support/catch_torch.h"

#include <string>

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>
#include <tensordict/typed/field.h>

using namespace tensordict;
using typed::FieldDescriptor;
using typed::FieldKind;

namespace {

constexpr FieldDescriptor kName{"name", FieldKind::String, at::kFloat, true, nullptr, -1, /*optional=*/false,
                                nullptr, nullptr, nullptr, nullptr};

// A tensordict of batch [3] whose "name" rows `rows` were written one at a time.
TensorDict written_rows(std::initializer_list<int64_t> rows) {
  TensorDict td = TensorDict::empty_with({3});
  for (int64_t i : rows) td.index_put_({i}, TensorDict({{"name", "n" + std::to_string(i)}}, {}));
  return td;
}

}  // namespace

TEST_CASE("check_entry judges a string stack by the values its rows hold", "[typed][field]") {
  TensorDict full = written_rows({0, 1, 2});
  const NonTensorData names = full.get_non_tensor("name");
  REQUIRE(names.is_stack());
  bool pool_keeps_null = false;
  for (const json::Value& v : names.pool()) pool_keeps_null |= v.is_null();
  REQUIRE(pool_keeps_null);  // what makes the check look past the pool
  CHECK_NOTHROW(typed::check_entry("Record", kName, {3}, full.impl()->get("name")));

  TensorDict partial = written_rows({0, 2});
  CHECK_THROWS_WITH(typed::check_entry("Record", kName, {3}, partial.impl()->get("name")),
                    Catch::Contains("Record.name: expected a string, got null"));
}
