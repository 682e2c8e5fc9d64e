// The typed replay-buffer workflow of issue 12 (schemas/replay.yaml): preallocate on disk from the
// schema, fill rows with index_put_, sample with an index tensor, read typed fields, reload.
// One test per finding of the issue; each failed before the fix.
#include "support/catch_torch.h"

#include <sstream>
#include <type_traits>

#include <ATen/ATen.h>

#include <tensordict/backends/memmap.h>
#include <tensordict/backends/memory_mapped_tensor.h>

#include "replay.td.h"
#include "replay_row.h"
#include "rl_transition.td.h"
#include "support/copy_on_read_backend.h"
#include "support/temp_dir.h"

using namespace tensordict;
using replay::Observation;
using replay::Transition;
using testing_support::TempDir;

namespace {

Transition row(float v, const std::string& info) { return typed_test::replay_row(v, info); }

// Per-row notes as one string ("a|b|-", '-' for an unset row), so Catch can print them.
std::string joined(const std::vector<std::optional<std::string>>& rows) {
  std::string out;
  for (size_t i = 0; i < rows.size(); ++i) out += (i ? "|" : "") + rows[i].value_or("-");
  return out;
}

}  // namespace

TEST_CASE("finding 1 - per-row strings written into a memmapped typed buffer survive a reload",
          "[typed][replay][memmap]") {
  TempDir dir;
  Transition buf = Transition::memmap_like({8}, dir / "buf");
  CHECK(buf.is_memmap());
  for (int64_t i = 0; i < 8; ++i) buf.index_put_({i}, row(static_cast<float>(i), "row " + std::to_string(i)));
  Transition back = Transition::load_memmap(dir / "buf");
  CHECK(joined(back.obs().info_list()) == "row 0|row 1|row 2|row 3|row 4|row 5|row 6|row 7");
  CHECK(at::equal(back.reward(), at::arange(8, at::kFloat)));
  CHECK(at::equal(back.obs().proprio().select(1, 0), at::arange(8, at::kFloat)));
}

TEST_CASE("memmap_like preallocates from the schema alone, with placeholders for non-tensor fields",
          "[typed][replay][memmap]") {
  TempDir dir;
  Transition buf = Transition::memmap_like({4}, dir / "buf");
  CHECK((buf.action().sizes() == c10::IntArrayRef{4, 6}));
  CHECK(buf.action().scalar_type() == at::kFloat);
  CHECK((buf.obs().camera().sizes() == c10::IntArrayRef{4, 3, 8, 8}));
  CHECK(at::equal(buf.done(), at::zeros({4}, at::kBool)));
  // The leaves map the files (nothing was allocated in memory full-size).
  CHECK(MemoryMappedTensor::filename_of(buf.obs().camera()).value() == dir / "buf/obs/camera.memmap");
  // An optional string starts unset in every row (Python None).
  CHECK(joined(buf.obs().info_list()) == "-|-|-|-");
  // A required tensor field without a concrete event shape cannot be preallocated.
  REQUIRE_THROWS_AS(rl::Transition::memmap_like({4}, dir / "rl"), ValueError);
  REQUIRE_THROWS_WITH(rl::Transition::memmap_like({4}, dir / "rl"),
                      Catch::Contains("Observation.state") && Catch::Contains("[-1]"));
  // load_memmap checks the directory against the schema.
  memmap(TensorDict({{"reward", at::zeros({4}, at::kLong)}}, {4}), dir / "other");
  REQUIRE_THROWS_AS(Transition::load_memmap(dir / "other"), TypeError);
}

TEST_CASE("finding 2 - per-row reads of a non-tensor field, and the uniform accessor names them",
          "[typed][replay]") {
  Transition buf = Transition::stack({row(0, "a"), row(1, "b"), row(2, "a")});
  Transition batch = buf.index({at::tensor({2, 1}, at::kLong)});
  REQUIRE_THROWS_AS(batch.obs().info(), ValueError);
  REQUIRE_THROWS_WITH(batch.obs().info(), Catch::Contains("Observation.info") && Catch::Contains("info_list()"));
  CHECK(joined(batch.obs().info_list()) == "a|b");
  // Rows are row-major over every batch dim; one value everywhere reads through both.
  Transition grid = Transition::stack({row(0, "x"), row(1, "x")}).unsqueeze(0);
  CHECK(grid.obs().info() == "x");
  CHECK(grid.obs().info_list().size() == 2);
  // Untyped: the per-element list.
  CHECK(buf.get_non_tensor({"obs", "info"}).tolist().python_str() == "['a', 'b', 'a']");
}

TEST_CASE("finding 3 - accessors on temporaries return handles, not references", "[typed][replay]") {
  // An lvalue object hands out a reference (no copy, no refcount); a temporary, a value.
  static_assert(std::is_same_v<decltype(std::declval<Observation&>().proprio()), const at::Tensor&>);
  static_assert(std::is_same_v<decltype(std::declval<const Observation&>().proprio()), const at::Tensor&>);
  static_assert(std::is_same_v<decltype(std::declval<Observation>().proprio()), at::Tensor>);
  static_assert(std::is_same_v<decltype(std::declval<Transition>().reward()), at::Tensor>);
  static_assert(std::is_same_v<decltype(std::declval<Observation>().tensordict()), TensorDict>);
  static_assert(std::is_same_v<decltype(std::declval<Observation&>().tensordict()), const TensorDict&>);
  TempDir dir;
  Transition buf = Transition::memmap_like({4}, dir / "buf");
  const at::Tensor& p = buf.obs().proprio();  // lifetime-extended value, not a dangling reference
  buf.obs().set_proprio_(at::ones({4, 12}));
  CHECK(at::equal(p, at::ones({4, 12})));  // the same storage: the file mapping
}

TEST_CASE("finding 4 - typed writes check dtype and event shape like the setters", "[typed][replay][errors]") {
  Transition buf = Transition::stack({row(0, "a"), row(1, "b"), row(2, "c")});
  Transition bad = row(9, "z");
  bad.typed_storage().set("action", at::zeros({6}, at::kDouble));  // untyped: unchecked
  REQUIRE_THROWS_AS(buf.index_put_({1}, bad), TypeError);
  REQUIRE_THROWS_WITH(buf.index_put_({1}, bad),
                      Catch::Contains("Transition.action: expected dtype float32, got float64"));
  // A broadcastable but wrong event shape: [2, 1] for two rows of [6].
  TensorDict two({{"action", at::zeros({2, 1})}}, {2});
  REQUIRE_THROWS_AS(buf.index_put_({at::indexing::Slice(0, 2)}, two), ShapeError);
  REQUIRE_THROWS_WITH(buf.index_put_({at::indexing::Slice(0, 2)}, two),
                      Catch::Contains("Transition.action: expected shape [2, 6]"));
  // Nested fields are checked against their class.
  TensorDict nested({{"obs", {{"proprio", at::zeros({12}, at::kHalf)}}}});
  REQUIRE_THROWS_WITH(buf.index_put_({0}, nested), Catch::Contains("Observation.proprio: expected dtype float32"));
  // The update family and set_at_.
  REQUIRE_THROWS_AS(buf.update_(TensorDict({{"reward", at::zeros({3}, at::kDouble)}}, {3})), TypeError);
  REQUIRE_THROWS_AS(buf.update(TensorDict({{"action", at::zeros({3, 5})}}, {3})), ShapeError);
  REQUIRE_THROWS_AS(buf.update_at_(TensorDict({{"action", at::zeros({6}, at::kInt)}}), {0}), TypeError);
  REQUIRE_THROWS_AS(buf.set_at_("action", at::zeros({1}), {0}), ShapeError);
  REQUIRE_THROWS_WITH(buf.set_at_({"obs", "proprio"}, at::zeros({2, 12}, at::kDouble), {at::indexing::Slice(0, 2)}),
                      Catch::Contains("Observation.proprio: expected dtype float32, got float64"));
  // Nothing was written by the refused calls.
  CHECK(at::equal(buf.action(), at::arange(3, at::kFloat).unsqueeze(1).expand({3, 6})));
  // Checked writes that pass go through.
  buf.set_at_("action", at::full({6}, 7.f), {1});
  buf.update_at_(TensorDict({{"reward", at::scalar_tensor(5.f)}}), {2});
  CHECK(buf.action()[1][0].item<float>() == 7.f);
  CHECK(buf.reward()[2].item<float>() == 5.f);
  // Documented choice: a plain number or tensor fills every tensor field of the region (as fill_).
  buf.index_put_({0}, at::scalar_tensor(1));
  CHECK(buf.done()[0].item<bool>());
  CHECK(buf.obs().camera()[0].max().item<int64_t>() == 1);
}

TEST_CASE("finding 5 - typed in-place setters work on a locked memmapped buffer", "[typed][replay][memmap]") {
  TempDir dir;
  Transition buf = Transition::memmap_like({3}, dir / "buf");
  REQUIRE(buf.is_locked());
  REQUIRE_THROWS_AS(buf.set_reward(at::ones({3})), LockedError);
  buf.set_reward_(at::ones({3}));
  buf.obs().set_info_("same note");
  Observation obs({{"camera", at::zeros({3, 3, 8, 8}, at::kByte)}, {"proprio", at::full({3, 12}, 2.f)}}, {3});
  buf.set_obs_(obs);
  REQUIRE_THROWS_AS(buf.set_reward_(at::ones({3}, at::kDouble)), TypeError);
  Transition back = Transition::load_memmap(dir / "buf");
  CHECK(at::equal(back.reward(), at::ones({3})));
  CHECK(back.obs().info() == "same note");
  CHECK(at::equal(back.obs().proprio(), at::full({3, 12}, 2.f)));
}

TEST_CASE("finding 6 - memmap_like onto an existing buffer refuses instead of zero-filling it",
          "[typed][replay][memmap][errors]") {
  TempDir dir;
  Transition buf = Transition::memmap_like({2}, dir / "buf");
  buf.set_reward_(at::full({2}, 3.f));
  REQUIRE_THROWS_AS(Transition::memmap_like({2}, dir / "buf"), StorageError);
  CHECK(at::equal(Transition::load_memmap(dir / "buf").reward(), at::full({2}, 3.f)));
  MemmapOptions overwrite;
  overwrite.overwrite = true;
  CHECK(at::equal(Transition::memmap_like({2}, dir / "buf", overwrite).reward(), at::zeros({2})));
}

TEST_CASE("finding 7 - typed objects in constructors, printing with the class name, iteration over rows",
          "[typed][replay]") {
  Transition buf = Transition::stack({row(0, "a"), row(1, "b"), row(2, "c")});
  std::ostringstream t, o, plain;
  t << buf;
  o << buf.obs();
  plain << buf.typed_storage();
  CHECK(t.str().rfind("Transition(", 0) == 0);
  CHECK(o.str().rfind("Observation(", 0) == 0);
  CHECK(plain.str().rfind("TensorDict(", 0) == 0);
  // Range-for over dim 0: rows of the class, as Python's iteration.
  float expected = 0;
  for (Transition r : buf) {
    CHECK(r.batch_dims() == 0);
    CHECK(r.reward().item<float>() == expected++);
  }
  CHECK(expected == 3);
  int rows = 0;
  for (TensorDict r : buf.typed_storage()) rows += r.batch_dims() == 0;
  CHECK(rows == 3);
  std::vector<std::string> notes;
  for (Observation r : buf.obs()) notes.push_back(r.info());
  CHECK(notes == std::vector<std::string>{"a", "b", "c"});
  REQUIRE_THROWS_AS(row(0, "x").begin(), ValueError);
  // A TensorClass as a value of set / a setter.
  TensorDict plain_td = TensorDict::empty_with({});
  plain_td.set("obs", row(4, "n").obs());
  CHECK(plain_td.get({"obs", "proprio"})[0].item<float>() == 4);
}

TEST_CASE("the typed workflow over the copy-on-read proving backend loses nothing", "[typed][replay][backend]") {
  Transition dense = Transition::stack({row(0, "a"), row(1, "b"), row(2, "c")});
  Transition buf = Transition::from_tensordict(testing_backends::CopyOnRead::from(dense.to_tensordict()));
  buf.index_put_({1}, row(7, "seven"));
  buf.set_reward_(at::full({3}, 2.f));
  buf.obs().set_proprio_(at::full({3, 12}, 4.f));
  CHECK(joined(buf.obs().info_list()) == "a|seven|c");
  CHECK(at::equal(buf.reward(), at::full({3}, 2.f)));
  CHECK(at::equal(buf.obs().proprio(), at::full({3, 12}, 4.f)));
  CHECK(buf.action()[1][0].item<float>() == 7.f);
  REQUIRE_THROWS_AS(buf.index_put_({0}, TensorDict({{"action", at::zeros({6}, at::kDouble)}})), TypeError);
}
