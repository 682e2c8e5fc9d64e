// Typed classes over an HDF5 file (issue 14, item 5): T::from_tensordict wraps a
// PersistentTensorDict live; field reads read the file, setters and row writes write it.
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include <tensordict/backends/persistent.h>

#include "replay.td.h"
#include "replay_row.h"
#include "support/temp_dir.h"

using namespace tensordict;
using replay::Observation;
using replay::Transition;
using testing_support::TempDir;

namespace {

Transition row(float v, const std::string& info) { return typed_test::replay_row(v, info); }

}  // namespace

TEST_CASE("a typed class over an HDF5 file reads fields from the file and writes them back", "[typed][hdf5]") {
  TempDir dir;
  const std::string path = dir / "buffer.h5";
  PersistentTensorDict::to_h5(Transition::stack({row(0, "a"), row(1, "b"), row(2, "c"), row(3, "d")}), path)
      .close();

  Transition buf = Transition::from_tensordict(PersistentTensorDict::from_h5(path, "r+"));
  CHECK(PersistentTensorDict::is_persistent(buf));
  CHECK(at::equal(buf.reward(), at::arange(4, at::kFloat)));
  CHECK((buf.obs().camera().sizes() == c10::IntArrayRef{4, 3, 8, 8}));
  CHECK(buf.obs().info_list().size() == 4);

  // Whole-field setters, in-place setters and typed row writes all reach the file.
  buf.set_reward_(at::full({4}, 2.f));
  buf.set_action(at::ones({4, 6}));
  buf.index_put_({1}, row(9, "nine"));
  buf.obs().set_proprio_(at::full({4, 12}, 5.f));

  Transition back = Transition::from_tensordict(PersistentTensorDict::from_h5(path, "r"));
  CHECK(at::equal(back.reward(), at::tensor({2.f, 9.f, 2.f, 2.f})));
  CHECK(at::equal(back.action()[0], at::ones({6})));
  CHECK(at::equal(back.action()[1], at::full({6}, 9.f)));
  CHECK(at::equal(back.obs().proprio(), at::full({4, 12}, 5.f)));
  CHECK(back.done()[1].item<bool>());
  std::vector<std::string> notes;
  for (const auto& n : back.obs().info_list()) notes.push_back(n.value_or("-"));
  CHECK(notes == std::vector<std::string>{"a", "nine", "c", "d"});

  // Rows and samples are typed views: reads select only their rows.
  Transition sample = buf.index({at::tensor({3, 1}, at::kLong)});
  CHECK(at::equal(sample.reward(), at::tensor({2.f, 9.f})));
  CHECK(sample.obs().info_list()[1].value() == "nine");
  // Typed checks still apply: a wrong dtype is refused before anything is written.
  REQUIRE_THROWS_AS(buf.set_reward_(at::zeros({4}, at::kDouble)), TypeError);
  CHECK(at::equal(Transition::from_tensordict(PersistentTensorDict::from_h5(path, "r")).reward()[0],
                  at::scalar_tensor(2.f)));
}

TEST_CASE("a typed class over a read-only file reads, and every write names the file", "[typed][hdf5][errors]") {
  TempDir dir;
  const std::string path = dir / "ro.h5";
  PersistentTensorDict::to_h5(Transition::stack({row(0, "a"), row(1, "b")}), path).close();
  Transition ro = Transition::from_tensordict(PersistentTensorDict::from_h5(path, "r"));
  CHECK(at::equal(ro.reward(), at::tensor({0.f, 1.f})));
  REQUIRE_THROWS_AS(ro.set_reward_(at::ones({2})), StorageError);
  REQUIRE_THROWS_WITH(ro.set_reward_(at::ones({2})), Catch::Contains("ro.h5") && Catch::Contains("read-only"));
  REQUIRE_THROWS_AS(ro.index_put_({0}, row(5, "x")), StorageError);
  // A file that does not hold the schema is refused when wrapped.
  const std::string other = dir / "other.h5";
  PersistentTensorDict::to_h5(TensorDict({{"reward", at::zeros({2}, at::kLong)}}, {2}), other).close();
  REQUIRE_THROWS_AS(Transition::from_tensordict(PersistentTensorDict::from_h5(other, "r")), TypeError);
}
