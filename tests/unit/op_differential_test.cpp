// Random op sequences against a per-leaf model (issue 34's "correctness first"). The ops' fast
// paths key on a tensordict's internal state: one kernel over a packed storage, results whose
// leaves are made on first read, levels read in place by position, td-op-td in one walk, leaves
// written in place. Each must be exact where it applies and give way where it does not. The
// hand-written cases test the states one at a time; here every program starts from a random
// tree in a random state (constructed, keys reordered, consolidated, a packed result, read or
// unread, leaves tiling one storage by hand, non-contiguous, a lazy stack of its rows,
// memory-mapped, an HDF5 file, locked), runs random ops on it,
// and after every op compares each leaf with a model that ran the same op leaf by leaf on
// plain tensors. A failure prints the program's seed and its steps. The steps are in
// op_differential_steps.h; store_tests runs them again with Redis stores among the states.
//
// TD_DIFF_PROGRAMS / TD_DIFF_SEED run more programs or another seed by hand.
#include "support/catch_torch.h"
#include "support/temp_dir.h"
#include "unit/op_differential_steps.h"

TEST_CASE("random op sequences over tensordicts in every internal state agree with ops run leaf by leaf",
          "[unit][op_differential]") {
  const uint32_t programs = op_differential::env_or("TD_DIFF_PROGRAMS", 1000);
  const uint32_t first = op_differential::env_or("TD_DIFF_SEED", 1);
  testing_support::TempDir dir("td_op_differential");
  for (uint32_t seed = first; seed < first + programs; ++seed) op_differential::run(seed, 12, dir.path());
}
