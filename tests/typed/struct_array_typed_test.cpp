// Classes generated from plain-data structs (tests/typed/schemas/poses.h): T::from_struct_array
// views a std::vector of the struct (no copy, writes both ways), to_struct_array copies back, and
// the class's checks apply to the views as to any field.
#include "support/catch_torch.h"

#include <memory>
#include <type_traits>
#include <vector>

#include "poses.td.h"

using namespace tensordict;

static_assert(std::is_same<poses::Pose::Row, poses::schema::Pose>::value, "Row is the schema struct");
static_assert(std::is_same<poses::Sample::Row, poses::schema::Sample>::value, "Row is the schema struct");
static_assert(poses::Pose::Traits::fields_number == 7, "one field per member");
static_assert(poses::Pose::Traits::fields[1].rank == 1 && poses::Pose::Traits::fields[1].shape[0] == 3,
              "float pos[3]: event shape [3]");
static_assert(poses::Pose::Traits::fields[2].rank == 2, "std::array<std::array<int32_t, 2>, 2>: [2, 2]");
static_assert(poses::Sample::Traits::frozen, "TD_FROZEN");

namespace {

std::vector<poses::schema::Pose> pose_rows(int n) {
  std::vector<poses::schema::Pose> rows(static_cast<size_t>(n));
  for (int i = 0; i < n; ++i) {
    poses::schema::Pose& p = rows[static_cast<size_t>(i)];
    p.t = 0.5 * i;
    for (int k = 0; k < 3; ++k) p.pos[k] = static_cast<float>(10 * i + k);
    p.cell = {{{{i, -i}}, {{2 * i, 7}}}};
    p.valid = i % 2 == 0;
    p.id = 100 + i;
  }
  return rows;
}

}  // namespace

TEST_CASE("from_struct_array: the fields are views of the rows' members", "[typed][struct_array]") {
  std::vector<poses::schema::Pose> rows = pose_rows(4);
  poses::Pose p = poses::Pose::from_struct_array(rows);
  CHECK(p.batch_size() == c10::IntArrayRef({4}));
  CHECK(at::equal(p.t(), at::tensor({0.0, 0.5, 1.0, 1.5}, at::kDouble)));
  CHECK(p.pos().sizes() == c10::IntArrayRef({4, 3}));
  CHECK(at::equal(p.pos()[2], at::tensor({20.f, 21.f, 22.f})));
  CHECK(at::equal(p.cell()[3], at::tensor({3, -3, 6, 7}, at::kInt).view({2, 2})));
  CHECK(p.valid().scalar_type() == at::kBool);
  CHECK(at::equal(p.valid(), at::tensor({1, 0, 1, 0}, at::kLong).to(at::kBool)));
  // TD_CPP_NAME: the accessor is object_id(), the stored key "id".
  CHECK(at::equal(p.object_id(), at::tensor({100, 101, 102, 103}, at::kLong)));
  CHECK(p.contains("id"));
  // Members the test did not set hold the struct's initializers.
  CHECK(at::equal(p.flags(), at::full({4}, 3, at::kByte)));
  CHECK(at::equal(p.weight(), at::full({4}, 0.5f)));
  // No copy: the leaves point into the rows.
  CHECK(p.t().data_ptr() == static_cast<void*>(&rows[0].t));
  CHECK(p.pos().data_ptr() == static_cast<void*>(&rows[0].pos[0]));
}

TEST_CASE("from_struct_array: writes through the typed accessors reach the rows, and back", "[typed][struct_array]") {
  std::vector<poses::schema::Pose> rows = pose_rows(3);
  poses::Pose p = poses::Pose::from_struct_array(rows);
  p.set_pos_(at::ones({3, 3}));  // copies into the stored views
  CHECK(rows[2].pos[1] == 1.f);
  p.object_id()[1].fill_(42);
  CHECK(rows[1].id == 42);
  p.set_valid_(at::ones({3}, at::kBool));
  CHECK(rows[1].valid);
  rows[0].t = 9.0;
  CHECK(p.t()[0].item<double>() == 9.0);
  // set_pos (not in place) stores a new tensor: the rows keep their values.
  p.set_pos(at::zeros({3, 3}));
  CHECK(rows[0].pos[0] == 1.f);
}

TEST_CASE("from_struct_array: the class's checks apply to its fields", "[typed][struct_array]") {
  std::vector<poses::schema::Pose> rows = pose_rows(2);
  poses::Pose p = poses::Pose::from_struct_array(rows);
  // Types come from the struct, so the views always pass; later writes are checked as usual.
  CHECK_THROWS_AS(p.set_pos(at::zeros({2, 3}, at::kDouble)), TypeError);
  CHECK_THROWS_AS(p.set_pos(at::zeros({2, 4})), ShapeError);
  CHECK_THROWS_AS(p.set_t(at::zeros({3}, at::kDouble)), ShapeError);  // batch size is [rows]
  // No rows: every field empty, with its event shape.
  std::vector<poses::schema::Pose> none;
  poses::Pose empty = poses::Pose::from_struct_array(none);
  CHECK(empty.batch_size() == c10::IntArrayRef({0}));
  CHECK(empty.cell().sizes() == c10::IntArrayRef({0, 2, 2}));
}

TEST_CASE("to_struct_array copies the fields back into rows", "[typed][struct_array]") {
  std::vector<poses::schema::Pose> rows = pose_rows(3);
  const std::vector<poses::schema::Pose> back = poses::Pose::from_struct_array(rows).to_struct_array();
  REQUIRE(back.size() == 3);
  for (size_t i = 0; i < 3; ++i) {
    CHECK(back[i].t == rows[i].t);
    CHECK(back[i].pos[2] == rows[i].pos[2]);
    CHECK(back[i].cell == rows[i].cell);
    CHECK(back[i].valid == rows[i].valid);
    CHECK(back[i].id == rows[i].id);
    CHECK(back[i].flags == 3);
  }

  // From an object built with the constructor (the optional weight takes its default)...
  poses::Pose q({{"t", at::arange(2, at::kDouble)},
                 {"pos", at::full({2, 3}, 2.f)},
                 {"cell", at::zeros({2, 2, 2}, at::kInt)},
                 {"valid", at::ones({2}, at::kBool)},
                 {"id", at::tensor({7, 8}, at::kLong)},
                 {"flags", at::full({2}, 9, at::kByte)}},
                /*batch_size=*/{2});
  std::vector<poses::schema::Pose> built = q.to_struct_array();
  REQUIRE(built.size() == 2);
  CHECK(built[1].t == 1.0);
  CHECK(built[1].pos[0] == 2.f);
  CHECK(built[0].id == 7);
  CHECK(built[1].flags == 9);
  CHECK(built[0].weight == 0.5f);
  q.set_weight(at::full({2}, 0.25f));
  CHECK(q.to_struct_array()[1].weight == 0.25f);

  // ... or wrapping a tensordict without the optional field: the member keeps Row's initializer.
  TensorDict td({{"t", at::zeros({1}, at::kDouble)},
                 {"pos", at::zeros({1, 3})},
                 {"cell", at::zeros({1, 2, 2}, at::kInt)},
                 {"valid", at::zeros({1}, at::kBool)},
                 {"id", at::zeros({1}, at::kLong)},
                 {"flags", at::zeros({1}, at::kByte)}},
                {1});
  poses::Pose bare = poses::Pose::from_tensordict(td);
  CHECK_FALSE(bare.has_weight());
  CHECK(bare.to_struct_array()[0].weight == 0.5f);

  // One batch dim, a row per element.
  poses::Pose grid = poses::Pose::from_tensordict(td.unsqueeze(0));
  CHECK_THROWS_AS(grid.to_struct_array(), ShapeError);
}

TEST_CASE("from_struct_array over a shared vector keeps the rows alive", "[typed][struct_array]") {
  auto rows = std::make_shared<std::vector<poses::schema::Pose>>(pose_rows(2));
  std::weak_ptr<std::vector<poses::schema::Pose>> watch = rows;
  at::Tensor ids = poses::Pose::from_struct_array(std::move(rows)).object_id();
  CHECK_FALSE(watch.expired());
  CHECK(ids[1].item<int64_t>() == 101);
  ids.reset();
  CHECK(watch.expired());
}

TEST_CASE("a plain-data tensorclass: frozen, nested C arrays", "[typed][struct_array]") {
  std::vector<poses::schema::Sample> rows(2);
  for (int i = 0; i < 2; ++i) {
    rows[static_cast<size_t>(i)].code = static_cast<int16_t>(i - 5);
    for (int a = 0; a < 2; ++a)
      for (int b = 0; b < 4; ++b) rows[static_cast<size_t>(i)].taps[a][b] = static_cast<int8_t>(10 * a + b - i);
  }
  poses::Sample s = poses::Sample::from_struct_array(rows);
  CHECK(s.is_locked());  // TD_FROZEN locks what from_struct_array wraps
  CHECK(s.code().scalar_type() == at::kShort);
  CHECK(at::equal(s.code(), at::tensor({-5, -4}, at::kShort)));
  CHECK(s.taps().sizes() == c10::IntArrayRef({2, 2, 4}));
  CHECK(s.taps()[1][1][3].item<int8_t>() == 12);
  // Locked, but in-place writes are allowed and reach the rows.
  s.set_code_(at::tensor({1, 2}, at::kShort));
  CHECK(rows[1].code == 2);
  std::vector<poses::schema::Sample> back = s.to_struct_array();
  CHECK(back[0].taps[1][2] == 12);
  CHECK(back[1].code == 2);
}
