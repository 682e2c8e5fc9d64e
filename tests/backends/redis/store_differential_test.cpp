// The random op test of tests/unit/op_differential_test.cpp again, against a real redis-server:
// half its trees (operands, and so the results of ops on them) are Redis stores, laid out by
// leaf (Python's layout) or by row. A store laid out by rows refuses to add or remove a leaf
// (StorageError) once unlocked; the program checks that nothing changed, as for any refusal.
#include "support/catch_torch.h"
#include "support/redis_server.h"
#include "support/temp_dir.h"
#include "unit/op_differential_steps.h"

#include <tensordict/backends/store.h>

using namespace tensordict;

// 300 programs by default; TD_DIFF_PROGRAMS / TD_DIFF_SEED as in the unit test.
TEST_CASE("random op sequences over Redis stores agree with ops run leaf by leaf", "[store][op_differential]") {
  const uint32_t programs = op_differential::env_or("TD_DIFF_PROGRAMS", 300);
  const uint32_t first = op_differential::env_or("TD_DIFF_SEED", 1);
  testing_support::TempDir dir("td_op_differential_store");
  testing_support::RedisServer server;
  const auto to_store = [&](const TensorDict& td, bool by_rows) -> TensorDict {
    StoreOptions options = testing_support::store_options(server);
    options.layout = by_rows ? StoreLayout::per_row : StoreLayout::per_leaf;
    return TensorDictStore::from_tensordict(td, options);
  };
  for (uint32_t seed = first; seed < first + programs; ++seed) op_differential::run(seed, 12, dir.path(), to_store);
}
