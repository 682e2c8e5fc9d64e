// Typed classes over an HDF5 file (issue 14, item 5): T::from_tensordict wraps a
// PersistentTensorDict live; field reads read the file, setters and row writes write it.
#include "support/catch_torch.h"

#include <string>
#include <type_traits>
#include <vector>

#include <ATen/ATen.h>

#include <tensordict/backends/persistent.h>

#include "backends/hdf5/h5py_support.h"
#include "records.td.h"
#include "replay.td.h"
#include "replay_row.h"
#include "support/temp_dir.h"

using namespace tensordict;
using replay::Observation;
using replay::Transition;
using at::indexing::Slice;
using h5_test::h5py_read;
using testing_support::TempDir;

namespace {

Transition h5_row(float v, const std::string& info) { return typed_test::replay_row(v, info); }

}  // namespace

TEST_CASE("a typed class over an HDF5 file reads fields from the file and writes them back", "[typed][hdf5]") {
  TempDir dir;
  const std::string path = dir / "buffer.h5";
  PersistentTensorDict::to_h5(Transition::stack({h5_row(0, "a"), h5_row(1, "b"), h5_row(2, "c"), h5_row(3, "d")}), path)
      .close();

  Transition buf = Transition::from_tensordict(PersistentTensorDict::from_h5(path, "r+"));
  CHECK(PersistentTensorDict::is_persistent(buf));
  CHECK(at::equal(buf.reward(), at::arange(4, at::kFloat)));
  CHECK((buf.obs().camera().sizes() == c10::IntArrayRef{4, 3, 8, 8}));
  CHECK(buf.obs().info_list().size() == 4);

  // Whole-field setters, in-place setters and typed row writes all reach the file.
  buf.set_reward_(at::full({4}, 2.f));
  buf.set_action(at::ones({4, 6}));
  buf.index_put_({1}, h5_row(9, "nine"));
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
  PersistentTensorDict::to_h5(Transition::stack({h5_row(0, "a"), h5_row(1, "b")}), path).close();
  Transition ro = Transition::from_tensordict(PersistentTensorDict::from_h5(path, "r"));
  CHECK(at::equal(ro.reward(), at::tensor({0.f, 1.f})));
  REQUIRE_THROWS_AS(ro.set_reward_(at::ones({2})), StorageError);
  REQUIRE_THROWS_WITH(ro.set_reward_(at::ones({2})), Catch::Contains("ro.h5") && Catch::Contains("read-only"));
  REQUIRE_THROWS_AS(ro.index_put_({0}, h5_row(5, "x")), StorageError);
  // A file that does not hold the schema is refused when wrapped.
  const std::string other = dir / "other.h5";
  PersistentTensorDict::to_h5(TensorDict({{"reward", at::zeros({2}, at::kLong)}}, {2}), other).close();
  REQUIRE_THROWS_AS(Transition::from_tensordict(PersistentTensorDict::from_h5(other, "r")), TypeError);
}

TEST_CASE("h5_like preallocates a typed buffer file from the schema alone, as h5py reads it", "[typed][hdf5]") {
  TempDir dir;
  const std::string path = dir / "buffer.h5";
  Transition buffer = Transition::h5_like({64}, path);
  CHECK(PersistentTensorDict::is_persistent(buffer));
  CHECK((buffer.obs().camera().sizes() == c10::IntArrayRef{64, 3, 8, 8}));
  CHECK(buffer.action().scalar_type() == at::kFloat);
  CHECK(buffer.reward().sum().item<float>() == 0.f);
  // The optional string starts null in every row, as memmap_like makes it.
  CHECK_FALSE(buffer.obs().info_list()[5].has_value());
  for (int64_t i = 0; i < 64; i += 2) buffer.index_put_({i}, h5_row(static_cast<float>(i), "row " + std::to_string(i)));
  buffer.index_put_({Slice(1, 64, 2)}, Transition::stack(std::vector<Transition>(32, h5_row(1, "odd"))));
  PersistentTensorDict::from(buffer).close();  // HDF5 locks a file open for writing

  const json::Value seen = h5py_read(path);
  auto member = [&](const char* dataset, const char* field) -> json::Value {
    const json::Value* d = seen.find(dataset);
    INFO(dataset);
    REQUIRE(d != nullptr);
    REQUIRE(d->find(field) != nullptr);
    return *d->find(field);
  };
  CHECK(member("obs/camera", "dtype") == json::Value("uint8"));
  CHECK(member("obs/camera", "shape").dump() == "[64,3,8,8]");
  CHECK(member("action", "shape").dump() == "[64,6]");
  CHECK(member("reward", "value").as_array()[10] == json::Value(10.0));
  const json::Value info = member("obs/info", "value");
  REQUIRE(info.is_array());
  CHECK(info.as_array()[4] == json::Value("row 4"));
  CHECK(info.as_array()[5] == json::Value("odd"));

  // A second h5_like would zero the buffer: refused, naming the file.
  REQUIRE_THROWS_AS(Transition::h5_like({64}, path), StorageError);
  REQUIRE_THROWS_WITH(Transition::h5_like({64}, path), Catch::Contains(path) && Catch::Contains("H5Options::overwrite"));
  Transition again = Transition::from_tensordict(PersistentTensorDict::from_h5(path, "r"));
  CHECK(again.obs().info_list()[4].value() == "row 4");
  PersistentTensorDict::from(again).close();
  H5Options replace;
  replace.overwrite = true;
  CHECK(Transition::h5_like({64}, path, replace).reward().sum().item<float>() == 0.f);

  // Every kind of non-tensor field: required ones "", 0, 0.0, false; optional ones null.
  records::Episode episode = records::Episode::h5_like({3}, dir / "episodes.h5");
  CHECK(episode.record().name_list() == std::vector<std::string>{"", "", ""});
  CHECK_FALSE(episode.record().count_list()[1].has_value());
  CHECK_FALSE(episode.record().scale_list()[0].has_value());
  CHECK((episode.record().x().sizes() == c10::IntArrayRef{3, 4}));
}

TEST_CASE("clone, stack, iteration and update of a typed class over an HDF5 file", "[typed][hdf5][ops]") {
  TempDir dir;
  const std::string path = dir / "ops.h5";
  PersistentTensorDict::to_h5(Transition::stack({h5_row(0, "a"), h5_row(1, "b"), h5_row(2, "c")}), path).close();
  Transition buf = Transition::from_tensordict(PersistentTensorDict::from_h5(path, "r+"));

  // clone: the class, read into memory, independent of the file.
  Transition copy = buf.clone();
  static_assert(std::is_same_v<decltype(buf.clone()), Transition>);
  CHECK_FALSE(PersistentTensorDict::is_persistent(copy));
  CHECK(at::equal(copy.reward(), at::tensor({0.f, 1.f, 2.f})));
  CHECK(at::equal(copy.obs().camera(), buf.obs().camera()));
  CHECK(copy.obs().info_list()[1].value() == "b");
  copy.set_reward_(at::full({3}, 5.f));
  CHECK(at::equal(buf.reward(), at::tensor({0.f, 1.f, 2.f})));

  // Iteration: each row is a Transition reading its row of the file.
  std::vector<float> rewards;
  std::vector<std::string> notes;
  for (auto r : buf) {
    static_assert(std::is_same_v<decltype(r), Transition>);
    CHECK(r.batch_size().empty());
    rewards.push_back(r.reward().item<float>());
    notes.push_back(r.obs().info());
  }
  CHECK(rewards == std::vector<float>{0.f, 1.f, 2.f});
  CHECK(notes == std::vector<std::string>{"a", "b", "c"});

  // stack: rows of the file, and the file object with an in-memory one, as the class.
  Transition picked = Transition::stack({buf.index({2}), buf.index({0})});
  CHECK(at::equal(picked.reward(), at::tensor({2.f, 0.f})));
  CHECK(picked.obs().info_list()[0].value() == "c");
  Transition both = stack(std::vector<Transition>{buf, copy});
  CHECK((both.batch_size() == c10::IntArrayRef{2, 3}));
  CHECK(at::equal(both.reward(), at::stack({at::tensor({0.f, 1.f, 2.f}), at::full({3}, 5.f)})));

  // update / update_: checked first, then written to the file.
  REQUIRE_THROWS_AS(buf.update(TensorDict({{"reward", at::zeros({3}, at::kLong)}}, {3})), TypeError);
  REQUIRE_THROWS_AS(buf.update_(TensorDict({{"action", at::zeros({3, 5})}}, {3})), ShapeError);
  CHECK(at::equal(buf.reward(), at::tensor({0.f, 1.f, 2.f})));
  buf.update(Transition::stack({h5_row(7, "x"), h5_row(8, "y"), h5_row(9, "z")}));
  buf.update_(TensorDict({{"action", at::full({3, 6}, 4.f)}}, {3}));
  Transition back = Transition::from_tensordict(PersistentTensorDict::from_h5(path, "r"));
  CHECK(at::equal(back.reward(), at::tensor({7.f, 8.f, 9.f})));
  CHECK(at::equal(back.action(), at::full({3, 6}, 4.f)));
  CHECK(at::equal(back.obs().proprio()[2], at::full({12}, 9.f)));
  std::vector<std::string> updated;
  for (const auto& n : back.obs().info_list()) updated.push_back(n.value_or("-"));
  CHECK(updated == std::vector<std::string>{"x", "y", "z"});
  CHECK(back.done()[2].item<bool>());
}
