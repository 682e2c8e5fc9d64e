// TensorClass generated from schemas, over the in-memory backend: non-tensor fields, unknown
// keys refused, live wrapping, typed results. Cases follow semantics.md section 3.
#include "support/catch_torch.h"

#include <ATen/ATen.h>

#include "ifeval.td.h"
#include "records.td.h"
#include "rl_transition.td.h"

// Last: glog (through c10/util/Logging.h) defines its own CHECK macro, which must not replace
// Catch's.

using namespace tensordict;
using records::Episode;
using records::LabeledRecord;
using records::Record;

namespace {
Record make_record(int64_t n = 3) {
  return Record({{"x", at::zeros({n, 4})}, {"name", "a"}}, {n});
}
}  // namespace

TEST_CASE("a TensorClass holds tensor and non-tensor fields", "[typed][tc]") {
  Record r({{"x", at::zeros({3, 4})}, {"name", "a"}, {"count", 7}, {"scale", 0.5}, {"valid", true}}, {3});
  CHECK((r.batch_size() == c10::IntArrayRef{3}));
  CHECK((r.x().sizes() == c10::IntArrayRef{3, 4}));
  CHECK(r.name() == "a");
  CHECK(r.count() == 7);
  CHECK(r.scale() == 0.5);
  CHECK(r.valid());
  r.set_name("b").set_count(-2).set_scale(2.0).set_valid(false);
  CHECK(r.name() == "b");
  CHECK(r.count() == -2);
  CHECK(r.scale() == 2.0);
  CHECK_FALSE(r.valid());
  CHECK(r.tensordict().get_non_tensor("name").value().as_string() == "b");
  CHECK_FALSE((std::is_base_of<TensorDict, Record>::value));
}

TEST_CASE("TensorClass construction names missing arguments and refuses unknown ones", "[typed][tc][errors]") {
  REQUIRE_THROWS_AS(Record({{"name", "a"}}, {3}), TypeError);
  REQUIRE_THROWS_WITH(Record({{"name", "a"}}, {3}),
                      Catch::Contains("Record.__init__() missing 1 required positional argument: 'x'"));
  REQUIRE_THROWS_WITH(Record({}, {3}),
                      Catch::Contains("missing 2 required positional arguments: 'x', 'name'"));
  REQUIRE_THROWS_AS(Record({{"x", at::zeros({3, 4})}, {"name", "a"}, {"z", 1}}, {3}), AttributeError);
  REQUIRE_THROWS_WITH(Record({{"x", at::zeros({3, 4})}, {"name", "a"}, {"z", 1}}, {3}),
                      Catch::Contains("Cannot set the attribute 'z', expected attributes are {") &&
                          Catch::Contains("'count'"));
  REQUIRE_THROWS_WITH(Record({{"x", at::zeros({3, 4})}, {"x", at::zeros({3, 4})}, {"name", "a"}}, {3}),
                      Catch::Contains("The key x is already set in kwargs"));
  REQUIRE_THROWS_AS(Record({{"x", at::zeros({4, 4})}, {"name", "a"}}, {3}), ShapeError);
}

TEST_CASE("non-tensor fields check the kind of their values", "[typed][tc][errors]") {
  REQUIRE_THROWS_WITH(Record({{"x", at::zeros({3, 4})}, {"name", 3}}, {3}),
                      Catch::Contains("Record.name: expected a string"));
  REQUIRE_THROWS_WITH(Record({{"x", at::zeros({3, 4})}, {"name", "a"}, {"count", "seven"}}, {3}),
                      Catch::Contains("Record.count: expected an int, got a string"));
  Record r = make_record();
  r.tensordict().impl();  // the backend is reachable, and a wrong kind there is reported on read:
  TensorDict td = r.tensordict();
  td.set_non_tensor("count", json::Value("x"));
  REQUIRE_THROWS_AS(r.count(), TypeError);
}

TEST_CASE("TensorClass::set refuses undeclared names and checks declared ones", "[typed][tc][errors]") {
  Record r = make_record();
  REQUIRE_THROWS_AS(r.set("y", at::zeros({3})), AttributeError);
  REQUIRE_THROWS_WITH(r.set("y", at::zeros({3})), Catch::Contains("Cannot set the attribute 'y'"));
  r.set("n", at::ones({3}));
  CHECK(at::equal(r.n(), at::ones({3})));
  REQUIRE_THROWS_AS(r.set("x", at::zeros({3, 5})), ShapeError);
}

TEST_CASE("TensorClass optional fields read as declared but not set", "[typed][tc]") {
  Record r = make_record();
  CHECK_FALSE(r.has_count());
  REQUIRE_THROWS_AS(r.count(), AttributeError);
  REQUIRE_THROWS_WITH(r.n(), Catch::Contains("'Record' has field 'n' declared but not set"));
}

TEST_CASE("TensorClass from_tensordict wraps live and refuses unknown keys", "[typed][tc]") {
  TensorDict td({{"x", at::zeros({3, 4})}, {"name", "a"}}, {3});
  Record r = Record::from_tensordict(td);
  CHECK(r.tensordict().is_same(td));
  td.set("x", at::ones({3, 4}));
  CHECK(at::equal(r.x(), at::ones({3, 4})));
  r.set_n(at::full({3}, 2.0));
  CHECK(td.contains("n"));
  REQUIRE_THROWS_AS(r.count(), AttributeError);

  TensorDict extra({{"x", at::zeros({3, 4})}, {"z", at::zeros({3})}}, {3});
  REQUIRE_THROWS_AS(Record::from_tensordict(extra), ValueError);
  REQUIRE_THROWS_WITH(Record::from_tensordict(extra),
                      Catch::Contains("Keys from the tensordict ({'x', 'z'}) must correspond to the class attributes"));
}

TEST_CASE("TensorClass wraps a TypedTensorDict live", "[typed][tc]") {
  rl::Observation obs = rl::Observation::from_tensordict(
      TensorDict({{"pixels", at::zeros({2, 84, 84, 3}, at::kByte)}, {"state", at::zeros({2, 3})}}, {2}));
  rl::Observation same = rl::Observation::from_tensordict(obs.tensordict());
  same.set_label("camera");
  CHECK(obs.label() == "camera");
}

TEST_CASE("TensorClass operations return the class and keep non-tensor fields", "[typed][tc][ops]") {
  Record r = make_record(4);
  Record row = r.index({1});
  CHECK(row.batch_size().empty());
  CHECK(row.name() == "a");
  CHECK((r.index({at::indexing::Slice(0, 2)}).x().sizes() == c10::IntArrayRef{2, 4}));
  Record copy = r.clone();
  CHECK_FALSE(copy.x().is_same(r.x()));
  CHECK(copy.name() == "a");
  std::vector<Record> rows = r.unbind(0);
  REQUIRE(rows.size() == 4);
  CHECK(rows[3].name() == "a");
  Record stacked = stack(std::vector<Record>{r, r});
  CHECK((stacked.batch_size() == c10::IntArrayRef{2, 4}));
  CHECK(stacked.name() == "a");
  CHECK((Record::cat({r, r}).batch_size() == c10::IntArrayRef{8}));
  CHECK((r.reshape({2, 2}).x().sizes() == c10::IntArrayRef{2, 2, 4}));
  TensorDict plain = r.to_tensordict();
  CHECK(plain.contains("name"));
  CHECK(r.repr().rfind("Record(", 0) == 0);
}

TEST_CASE("TensorClass inheritance and nesting", "[typed][tc][inheritance]") {
  LabeledRecord l({{"x", at::zeros({2, 4})}, {"name", "b"}, {"label", at::ones({2}, at::kLong)}}, {2});
  const Record& base = l;
  CHECK(base.name() == "b");
  CHECK((l.label().sizes() == c10::IntArrayRef{2}));
  static_assert(std::is_same<decltype(l.index({0})), LabeledRecord>::value, "index keeps the class");

  Episode e({{"record", make_record(3).tensordict()}, {"reward", at::zeros({3})}}, {3});
  CHECK(e.record().name() == "a");
  e.record().set_count(5);
  CHECK(e.record().count() == 5);
  CHECK(e.index({2}).record().x().dim() == 1);
}

TEST_CASE("IFEvalScoreData: four optional float scores", "[typed][tc][ifeval]") {
  torchrl::llm::IFEvalScoreData scores({}, {8});
  CHECK_FALSE(scores.has_prompt_level_strict_acc());
  REQUIRE_THROWS_AS(scores.inst_level_loose_acc(), AttributeError);
  scores.set_prompt_level_strict_acc(at::rand({8})).set_inst_level_strict_acc(at::rand({8}));
  scores.set_prompt_level_loose_acc(at::rand({8})).set_inst_level_loose_acc(at::rand({8}));
  CHECK(scores.keys().size() == 4);
  REQUIRE_THROWS_AS(scores.set_inst_level_loose_acc(at::rand({8}, at::kDouble)), TypeError);
  CHECK((scores.index({at::indexing::Slice(0, 2)}).prompt_level_loose_acc().sizes() == c10::IntArrayRef{2}));
}

TEST_CASE("a field a tensordict lacked, written row by row, holds null until every row is written",
          "[typed][tc]") {
  // Python v0.14: the first indexed write creates the key, null (None) in the rows not written.
  TensorDict td = TensorDict::empty_with({3});
  Record r = Record::from_tensordict(td, /*check=*/false);
  r.index_put_({0}, Record({{"x", at::zeros({4})}, {"name", "n0"}}, {}));
  r.index_put_({1}, Record({{"x", at::ones({4})}, {"name", "n1"}}, {}));
  // Row 2 has no name yet: a required string field refuses it.
  REQUIRE_THROWS_AS(Record::from_tensordict(td), TypeError);
  r.index_put_({2}, Record({{"x", at::ones({4})}, {"name", "n2"}}, {}));
  CHECK(Record::from_tensordict(td).name_list() == std::vector<std::string>{"n0", "n1", "n2"});
  CHECK(at::equal(Record::from_tensordict(td).x().sum(1), at::tensor({0.f, 4.f, 4.f})));
}
