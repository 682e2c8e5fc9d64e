// from_struct_array / to_struct_array: a vector of plain structs as a tensordict of strided views
// (no copy, writes reach the rows) and back.
#include "support/catch_torch.h"

#include <tensordict/entry.h>
#include <tensordict/ops.h>
#include <tensordict/struct_array.h>

using namespace tensordict;

namespace {
struct Pose {
  double t;
  float pos[3];
  std::array<std::array<int32_t, 2>, 2> cell;
  bool valid;
  int64_t id;
};

StructLayout<Pose> pose_layout() {
  return StructLayout<Pose>()
      .field("t", &Pose::t)
      .field({"state", "pos"}, &Pose::pos)
      .field({"state", "cell"}, &Pose::cell)
      .field("valid", &Pose::valid)
      .field("id", &Pose::id);
}

std::vector<Pose> poses(int n) {
  std::vector<Pose> rows(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    Pose& p = rows[static_cast<size_t>(i)];
    p.t = 0.5 * i;
    for (int k = 0; k < 3; ++k) p.pos[k] = static_cast<float>(10 * i + k);
    p.cell = {{{{i, -i}}, {{2 * i, 7}}}};
    p.valid = i % 2 == 0;
    p.id = 100 + i;
  }
  return rows;
}
}  // namespace

TEST_CASE("from_struct_array views every field of the rows without a copy", "[unit][struct_array]") {
  std::vector<Pose> rows = poses(4);
  TensorDict td = from_struct_array(rows, pose_layout());
  CHECK(td.batch_size() == c10::IntArrayRef({4}));
  CHECK(at::equal(td.get("t"), at::tensor({0.0, 0.5, 1.0, 1.5}, at::kDouble)));
  CHECK(at::equal(td.get({"state", "pos"})[2], at::tensor({20.f, 21.f, 22.f})));
  CHECK(td.get({"state", "cell"}).sizes() == c10::IntArrayRef({4, 2, 2}));
  CHECK(at::equal(td.get({"state", "cell"})[3], at::tensor({3, -3, 6, 7}, at::kInt).view({2, 2})));
  CHECK(td.get("valid").scalar_type() == at::kBool);
  CHECK(at::equal(td.get("id"), at::tensor({100, 101, 102, 103}, at::kLong)));
  // Views of the rows themselves: writes go both ways.
  CHECK(td.get("t").data_ptr() == static_cast<void*>(&rows[0].t));
  td.get({"state", "pos"}).index_put_({1, 2}, 99.f);
  CHECK(rows[1].pos[2] == 99.f);
  rows[3].id = 7;
  CHECK(td.get("id")[3].item<int64_t>() == 7);
  // Batch ops work on the views (index, then clone copies out of the rows).
  TensorDict evens = td.index({at::tensor({0, 2}, at::kLong)});
  CHECK(at::equal(evens.get("id"), at::tensor({100, 102}, at::kLong)));
}

TEST_CASE("to_struct_array copies a tensordict back into rows; shapes are checked", "[unit][struct_array]") {
  std::vector<Pose> rows = poses(3);
  TensorDict td = from_struct_array(rows, pose_layout()).clone() * 2;
  std::vector<Pose> back = to_struct_array(td, pose_layout());
  REQUIRE(back.size() == 3);
  CHECK(back[2].t == 2.0);
  CHECK(back[1].pos[1] == 22.f);
  CHECK(back[2].cell[1][0] == 8);
  CHECK(back[1].id == 202);
  TensorDict wrong({{"t", at::zeros({3})}, {"state", {{"pos", at::zeros({3, 2})}}}}, {3});
  CHECK_THROWS_AS(to_struct_array(wrong, StructLayout<Pose>().field({"state", "pos"}, &Pose::pos)), ShapeError);
  CHECK_THROWS_AS(to_struct_array(td, StructLayout<Pose>().field("missing", &Pose::t)), KeyError);
}

TEST_CASE("a shared vector of rows stays alive as long as a view of it", "[unit][struct_array]") {
  auto rows = std::make_shared<std::vector<Pose>>(poses(2));
  std::weak_ptr<std::vector<Pose>> watch = rows;
  at::Tensor ids = from_struct_array(std::move(rows), pose_layout()).get("id");
  CHECK_FALSE(watch.expired());
  CHECK(ids[1].item<int64_t>() == 101);
  ids.reset();
  CHECK(watch.expired());
  // No rows: empty leaves of the fields' shapes.
  std::vector<Pose> none;
  CHECK(from_struct_array(none, pose_layout()).get({"state", "cell"}).sizes() == c10::IntArrayRef({0, 2, 2}));
}

namespace {
#pragma pack(push, 1)
struct Packed {
  char tag;
  float value;  // at byte 1: no stride in floats reaches it
};
#pragma pack(pop)
}  // namespace

TEST_CASE("a field not aligned to its element size is a ValueError", "[unit][struct_array]") {
  std::vector<Packed> rows(2);
  CHECK_THROWS_WITH(from_struct_array(rows, StructLayout<Packed>().field("value", &Packed::value)),
                    Catch::Contains("'value'") && Catch::Contains("not aligned"));
}
