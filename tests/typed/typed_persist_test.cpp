// Python tensorclass's saving and loading members on generated classes (issue 33 part 6):
// memmap / memmap_ / save / dumps / load / load_ / memmap_refresh_, state_dict /
// load_state_dict, maybe_dense_stack, fromkeys and from_modules, each returning the class and
// keeping its checks; and a TensorClass wrapping a TypedTensorDict.
#include "support/catch_torch.h"

#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <ATen/ATen.h>
#include <torch/nn/module.h>
#include <torch/nn/modules/linear.h>

#include <tensordict/backends/lazy_stack.h>
#include <tensordict/backends/memmap.h>

#include "ifeval.td.h"
#include "params.td.h"
#include "records.td.h"
#include "replay.td.h"
#include "replay_row.h"
#include "rl_transition.td.h"
#include "support/temp_dir.h"

using namespace tensordict;
using records::Episode;
using records::Record;
using replay::Observation;
using replay::Transition;
using testing_support::TempDir;

namespace {

Transition persist_row(float v, const std::string& info) { return typed_test::replay_row(v, info); }

Transition rows(std::initializer_list<float> values) {
  std::vector<Transition> items;
  for (float v : values) items.push_back(persist_row(v, "r" + std::to_string(static_cast<int>(v))));
  return Transition::stack(items);
}

// Per-row values of an optional string field, "-" for null (a vector of optionals does not print).
std::vector<std::string> texts(const std::vector<std::optional<std::string>>& values) {
  std::vector<std::string> out;
  for (const auto& v : values) out.push_back(v.value_or("-"));
  return out;
}

Record persist_record(float x, const std::string& name, int64_t n = 3) {
  return Record({{"x", at::full({n, 4}, x)}, {"name", name}}, {n});
}

// A module with a submodule and a parameter of its own: from_modules nests "fc".
struct HeadModule : torch::nn::Module {
  HeadModule() {
    fc = register_module("fc", torch::nn::Linear(3, 2));
    scale = register_parameter("scale", torch::ones({1}));
  }
  torch::nn::Linear fc{nullptr};
  torch::Tensor scale;
};

}  // namespace

TEST_CASE("the saving and loading members return the class", "[typed][persist]") {
  static_assert(std::is_same_v<decltype(std::declval<const Transition&>().memmap("")), Transition>);
  static_assert(std::is_same_v<decltype(std::declval<const Transition&>().save("")), Transition>);
  static_assert(std::is_same_v<decltype(std::declval<const Transition&>().dumps("")), Transition>);
  static_assert(std::is_same_v<decltype(std::declval<Transition&>().memmap_("")), Transition&>);
  static_assert(std::is_same_v<decltype(Transition::load("")), Transition>);
  static_assert(std::is_same_v<decltype(std::declval<Transition&>().load_("")), Transition&>);
  static_assert(std::is_same_v<decltype(std::declval<Transition&>().memmap_refresh_()), Transition&>);
  static_assert(std::is_same_v<decltype(std::declval<const Transition&>().state_dict()), StateDict>);
  static_assert(std::is_same_v<decltype(std::declval<Transition&>().load_state_dict(StateDict())), Transition&>);
  static_assert(std::is_same_v<decltype(Transition::maybe_dense_stack({})), Transition>);
  static_assert(std::is_same_v<decltype(maybe_dense_stack(std::vector<Transition>{})), Transition>);
  static_assert(std::is_same_v<decltype(Transition::fromkeys({"reward"}, 0.5)), Transition>);
  // The same on a TensorClass, and on a class extending another (the extending class).
  static_assert(std::is_same_v<decltype(std::declval<const Record&>().save("")), Record>);
  static_assert(std::is_same_v<decltype(std::declval<Record&>().load_("")), Record&>);
  static_assert(std::is_same_v<decltype(Record::load("")), Record>);
  static_assert(std::is_same_v<decltype(Record::fromkeys({"x"}, at::zeros({4}))), Record>);
  static_assert(std::is_same_v<decltype(std::declval<Record&>().load_state_dict(StateDict())), Record&>);
  static_assert(std::is_same_v<decltype(records::LabeledRecord::load("")), records::LabeledRecord>);
  static_assert(std::is_same_v<decltype(std::declval<rl::Transition&>().memmap_("")), rl::Transition&>);
  static_assert(std::is_same_v<decltype(params::Linear::from_modules(torch::nn::Linear(3, 2))), params::Linear>);
  static_assert(std::is_same_v<decltype(params::LinearDict::from_modules(
                                   std::vector<std::shared_ptr<torch::nn::Module>>{})),
                               params::LinearDict>);
  SUCCEED();
}

TEST_CASE("memmap, save and dumps write the object and return it as the class over the files", "[typed][persist]") {
  TempDir dir;
  Transition t = rows({1, 2, 3});
  Transition mapped = t.memmap(dir / "m");
  CHECK(mapped.is_memmap());
  CHECK(mapped.is_locked());
  CHECK_FALSE(t.is_memmap());  // memmap copies; the object itself stays in memory
  CHECK(at::equal(mapped.reward(), at::tensor({1.f, 2.f, 3.f})));
  CHECK(texts(mapped.obs().info_list()) == std::vector<std::string>{"r1", "r2", "r3"});
  // The result's leaves are the files: an in-place write is read back from the directory.
  mapped.set_reward_(at::full({3}, 8.f));
  CHECK(at::equal(Transition::load(dir / "m").reward(), at::full({3}, 8.f)));
  CHECK(at::equal(t.reward(), at::tensor({1.f, 2.f, 3.f})));

  // save and dumps are memmap; load (and load_memmap) read any of them back as the class.
  Transition saved = t.save(dir / "s");
  Transition dumped = t.dumps(dir / "d");
  CHECK(saved.is_memmap());
  CHECK(dumped.is_memmap());
  Transition back = Transition::load(dir / "s");
  CHECK(at::equal(back.action(), t.action()));
  CHECK(at::equal(back.obs().camera(), t.obs().camera()));
  CHECK(at::equal(Transition::load(dir / "d").done(), t.done()));
  CHECK(at::equal(Transition::load_memmap(dir / "d").reward(), t.reward()));
  // A directory that holds a tensordict is refused unless overwrite, as tensordict::memmap.
  MemmapOptions replace;
  replace.overwrite = true;
  REQUIRE_THROWS_AS(rows({5}).save(dir / "s"), StorageError);
  CHECK(Transition::load(dir / "s").reward().size(0) == 3);
  CHECK(rows({5}).save(dir / "s", replace).reward().size(0) == 1);

  // A TensorClass: its non-tensor fields are saved with it.
  Record r = persist_record(2.f, "alpha");
  r.set_count(7);
  Record rs = r.save(dir / "record");
  CHECK(rs.tensordict().is_memmap());
  Record loaded = Record::load(dir / "record");
  CHECK(loaded.name() == "alpha");
  CHECK(loaded.count() == 7);
  CHECK(at::equal(loaded.x(), at::full({3, 4}, 2.f)));
  CHECK_FALSE(loaded.has_scale());
}

TEST_CASE("memmap_ turns the object itself into the mapped files", "[typed][persist]") {
  TempDir dir;
  Record r = persist_record(1.f, "beta");
  Record alias = r;  // shares the handle's backend
  Record& same = r.memmap_(dir / "r");
  CHECK(&same == &r);
  CHECK(r.tensordict().is_memmap());
  CHECK(r.is_locked());
  REQUIRE_THROWS_AS(r.set_x(at::zeros({3, 4})), LockedError);
  r.set_x_(at::full({3, 4}, 6.f));  // in place: written to the file
  CHECK(at::equal(Record::load(dir / "r").x(), at::full({3, 4}, 6.f)));
  CHECK(at::equal(alias.x(), at::full({3, 4}, 6.f)));
  CHECK(Record::load(dir / "r").name() == "beta");

  // A TypedTensorDict: the object is the TensorDict, rebound to the files.
  Transition t = rows({4, 5});
  t.memmap_(dir / "t");
  CHECK(t.is_memmap());
  t.obs().set_proprio_(at::ones({2, 12}));
  CHECK(at::equal(Transition::load(dir / "t").obs().proprio(), at::ones({2, 12})));
}

TEST_CASE("load refuses a directory that does not hold the class, naming the field", "[typed][persist][errors]") {
  TempDir dir;
  // A field of the wrong dtype: from_tensordict's TypeError, naming class.field.
  TensorDict wrong = rows({1, 2}).to_tensordict();
  wrong.set("reward", at::zeros({2}, at::kDouble));
  memmap(wrong, dir / "dtype");
  REQUIRE_THROWS_AS(Transition::load(dir / "dtype"), TypeError);
  REQUIRE_THROWS_WITH(Transition::load(dir / "dtype"), Catch::Contains("Transition.reward"));
  // A required field missing (TypedTensorDict) and a nested field of the wrong shape.
  TensorDict missing = rows({1, 2}).to_tensordict();
  missing.erase("action");
  memmap(missing, dir / "missing");
  REQUIRE_THROWS_AS(Transition::load(dir / "missing"), TypeError);
  REQUIRE_THROWS_WITH(Transition::load(dir / "missing"), Catch::Contains("missing required field(s): action"));
  TensorDict shape = rows({1, 2}).to_tensordict();
  shape.set("action", at::zeros({2, 5}));
  memmap(shape, dir / "shape");
  REQUIRE_THROWS_AS(Transition::load(dir / "shape"), ShapeError);
  REQUIRE_THROWS_WITH(Transition::load(dir / "shape"), Catch::Contains("Transition.action"));
  // A nested field that is not a tensordict. (As from_tensordict, load checks the fields of
  // the class itself; a nested object's own fields are checked by its class when read.)
  TensorDict nested = rows({1, 2}).to_tensordict();
  nested.erase("obs");
  nested.set("obs", at::zeros({2}));
  memmap(nested, dir / "nested");
  REQUIRE_THROWS_AS(Transition::load(dir / "nested"), TypeError);
  REQUIRE_THROWS_WITH(Transition::load(dir / "nested"), Catch::Contains("Transition.obs"));
  // A key a TensorClass does not declare.
  TensorDict extra = persist_record(1.f, "a").to_tensordict();
  extra.set("z", at::zeros({3}));
  memmap(extra, dir / "extra");
  REQUIRE_THROWS_AS(Record::load(dir / "extra"), ValueError);
  REQUIRE_THROWS_WITH(Record::load(dir / "extra"), Catch::Contains("'z'"));

  // load_ checks before it changes anything: the object keeps its values.
  Transition t = rows({3, 4});
  REQUIRE_THROWS_AS(t.load_(dir / "dtype"), TypeError);
  CHECK(at::equal(t.reward(), at::tensor({3.f, 4.f})));
  CHECK(t.reward().scalar_type() == at::kFloat);
  Record r = persist_record(1.f, "kept");
  REQUIRE_THROWS_AS(r.load_(dir / "extra"), ValueError);
  CHECK_FALSE(r.tensordict().contains("z"));
  CHECK(r.name() == "kept");
}

TEST_CASE("load_ loads a saved directory into the object in place", "[typed][persist]") {
  TempDir dir;
  rows({7, 8}).save(dir / "saved");

  Transition t = rows({1, 2});
  t.typed_storage().set("extra", at::zeros({2}));  // not in the directory: stays
  const TensorDict alias = t;                       // another handle on the same backend
  Observation obs = t.obs();                        // a nested field's object, loaded into
  Transition& same = t.load_(dir / "saved");
  CHECK(&same == &t);
  CHECK(at::equal(t.reward(), at::tensor({7.f, 8.f})));
  CHECK(at::equal(alias.get("reward"), at::tensor({7.f, 8.f})));
  CHECK(at::equal(obs.proprio(), at::stack({at::full({12}, 7.f), at::full({12}, 8.f)})));
  CHECK(texts(obs.info_list()) == std::vector<std::string>{"r7", "r8"});
  CHECK(t.contains("extra"));
  CHECK_FALSE(t.is_memmap());
  // The loaded leaves are the directory's mappings (Python rebinds the leaves).
  t.reward().fill_(3.f);
  CHECK(at::equal(Transition::load(dir / "saved").reward(), at::full({2}, 3.f)));
  // load_memmap_ is the same member (Python's name).
  Transition again = rows({1, 2});
  static_assert(std::is_same_v<decltype(again.load_memmap_("")), Transition&>);
  again.load_memmap_(dir / "saved");
  CHECK(at::equal(again.action()[1], at::full({6}, 8.f)));

  // The object keeps its batch size: a directory of another one is refused.
  Transition wide = rows({1, 2, 3, 4});
  REQUIRE_THROWS(wide.load_(dir / "saved"));
  CHECK((wide.batch_size() == c10::IntArrayRef{4}));

  // Into a memmapped object: the values are copied into its own files.
  Transition mapped = rows({0, 0}).memmap(dir / "mapped");
  mapped.load_(dir / "saved");
  CHECK(mapped.is_locked());
  CHECK(mapped.action()[1][0].item<float>() == 8.f);
  Transition reread = Transition::load(dir / "mapped");
  CHECK(at::equal(reread.action()[1], at::full({6}, 8.f)));
  CHECK(at::equal(reread.obs().proprio()[0], at::full({12}, 7.f)));

  // A TensorClass: tensor and non-tensor fields; an optional field the directory lacks stays.
  Record source = persist_record(5.f, "loaded", 2);
  source.save(dir / "record");
  Record r = persist_record(1.f, "before", 2);
  r.set_count(3);
  r.load_(dir / "record");
  CHECK(r.name() == "loaded");
  CHECK(at::equal(r.x(), at::full({2, 4}, 5.f)));
  CHECK(r.count() == 3);
  // A locked (not memmapped) object refuses the load.
  Record locked = persist_record(1.f, "locked", 2);
  locked.lock_();
  REQUIRE_THROWS_AS(locked.load_(dir / "record"), LockedError);
  CHECK(locked.name() == "locked");
}

TEST_CASE("memmap_refresh_ reloads the directory, checked against the schema", "[typed][persist]") {
  TempDir dir;
  Record r = persist_record(1.f, "first").memmap(dir / "r");
  CHECK_FALSE(r.has_count());
  // Another writer replaces the directory: an optional field appears, values change.
  MemmapOptions replace;
  replace.overwrite = true;
  Record next = persist_record(4.f, "second");
  next.set_count(9);
  memmap(next.tensordict(), dir / "r", replace);
  Record& same = r.memmap_refresh_();
  CHECK(&same == &r);
  CHECK(r.has_count());
  CHECK(r.count() == 9);
  CHECK(r.name() == "second");
  CHECK(at::equal(r.x(), at::full({3, 4}, 4.f)));
  CHECK(r.is_locked());

  // A directory that no longer holds the class is refused; the object is left as it was.
  TensorDict foreign = next.to_tensordict();
  foreign.set("z", at::zeros({3}));
  memmap(foreign, dir / "r", replace);
  REQUIRE_THROWS_AS(r.memmap_refresh_(), ValueError);
  CHECK_FALSE(r.tensordict().contains("z"));
  CHECK(r.count() == 9);
  // Only a memmapped object has a directory.
  Record in_memory = persist_record(1.f, "m");
  REQUIRE_THROWS_AS(in_memory.memmap_refresh_(), ValueError);

  // A TypedTensorDict: the refreshed values, and the typed check of a bad directory.
  Transition t = rows({1, 2}).memmap(dir / "t");
  memmap(rows({6, 7}), dir / "t", replace);
  t.memmap_refresh_();
  CHECK(at::equal(t.reward(), at::tensor({6.f, 7.f})));
  TensorDict bad = rows({1, 2}).to_tensordict();
  bad.set("action", at::zeros({2, 6}, at::kInt));
  memmap(bad, dir / "t", replace);
  REQUIRE_THROWS_AS(t.memmap_refresh_(), TypeError);
  REQUIRE_THROWS_WITH(t.memmap_refresh_(), Catch::Contains("Transition.action"));
  CHECK(t.action().scalar_type() == at::kFloat);
}

TEST_CASE("state_dict and load_state_dict round trip, checked against the schema", "[typed][persist]") {
  Transition t = rows({1, 2});
  const StateDict sd = t.state_dict();
  CHECK(sd.contains("reward"));
  CHECK(sd.contains("obs.proprio"));
  CHECK_FALSE(sd.contains("obs.info"));  // non-tensor: not a tensor of the state dict
  // Loading writes into the object's tensors.
  Transition other = rows({5, 6});
  const at::Tensor reward = other.reward();
  Transition& same = other.load_state_dict(sd);
  CHECK(&same == &other);
  CHECK(at::equal(other.reward(), at::tensor({1.f, 2.f})));
  CHECK(at::equal(reward, at::tensor({1.f, 2.f})));  // in place: the same tensor
  CHECK(at::equal(other.obs().camera(), t.obs().camera()));
  CHECK(texts(other.obs().info_list()) == std::vector<std::string>{"r5", "r6"});

  // A field of the wrong dtype or shape is refused before anything is loaded (set_ would cast).
  StateDict wrong = sd;
  for (auto& [key, value] : wrong.tensors) {
    if (key == "obs.proprio") value = value.to(at::kDouble);
  }
  Transition target = rows({3, 4});
  REQUIRE_THROWS_AS(target.load_state_dict(wrong), TypeError);
  REQUIRE_THROWS_WITH(target.load_state_dict(wrong), Catch::Contains("Observation.proprio"));
  CHECK(at::equal(target.reward(), at::tensor({3.f, 4.f})));
  StateDict shape = sd;
  for (auto& [key, value] : shape.tensors) {
    if (key == "action") value = at::zeros({2, 5});
  }
  REQUIRE_THROWS_AS(target.load_state_dict(shape), ShapeError);
  CHECK(at::equal(target.reward(), at::tensor({3.f, 4.f})));

  // A TensorClass: keys it does not declare are refused; non-tensor fields are kept, also
  // when the state dict's tensors are assigned.
  Record r = persist_record(2.f, "kept");
  r.set_n(at::ones({3}));
  StateDict rsd = persist_record(9.f, "other").state_dict();
  rsd.tensors.emplace_back("n", at::full({3}, 4.f));
  r.load_state_dict(rsd, /*strict=*/true, /*assign=*/true);
  CHECK(at::equal(r.x(), at::full({3, 4}, 9.f)));
  CHECK(at::equal(r.n(), at::full({3}, 4.f)));
  CHECK(r.name() == "kept");
  StateDict undeclared = rsd;
  undeclared.tensors.emplace_back("z", at::zeros({3}));
  REQUIRE_THROWS_AS(r.load_state_dict(undeclared, /*strict=*/false), AttributeError);
  REQUIRE_THROWS_AS(r.load_state_dict(undeclared, /*strict=*/false, /*assign=*/true), ValueError);
  CHECK_FALSE(r.tensordict().contains("z"));
  // With assign, the result must be an object of the class: required fields present.
  StateDict partial = sd;
  for (auto it = partial.tensors.begin(); it != partial.tensors.end(); ++it) {
    if (it->first == "reward") {
      partial.tensors.erase(it);  // a required field
      break;
    }
  }
  REQUIRE(partial.tensors.size() + 1 == sd.tensors.size());
  Transition assigned = rows({3, 4});
  REQUIRE_THROWS_AS(assigned.load_state_dict(partial, /*strict=*/false, /*assign=*/true), TypeError);
  REQUIRE_THROWS_WITH(assigned.load_state_dict(partial, false, true), Catch::Contains("reward"));
  CHECK(at::equal(assigned.reward(), at::tensor({3.f, 4.f})));
  // Assigned without the required field missing: the state dict's tensors become the fields.
  Transition fresh = rows({3, 4});
  fresh.load_state_dict(sd, /*strict=*/true, /*assign=*/true);
  CHECK(at::equal(fresh.reward(), at::tensor({1.f, 2.f})));
  CHECK(texts(fresh.obs().info_list()) == std::vector<std::string>{"r3", "r4"});
}

TEST_CASE("maybe_dense_stack gives the class over a dense stack or a lazy one", "[typed][persist][lazy]") {
  Transition a = rows({1, 2});
  Transition b = rows({3, 4});
  Transition dense = Transition::maybe_dense_stack({a, b});
  CHECK_FALSE(LazyStackedTensorDict::is_lazy_stack(dense));
  CHECK((dense.batch_size() == c10::IntArrayRef{2, 2}));
  CHECK(at::equal(dense.reward(), at::tensor({1.f, 2.f, 3.f, 4.f}).view({2, 2})));
  dense.set_reward_(at::zeros({2, 2}));
  CHECK(a.reward()[0].item<float>() == 1.f);  // a copy

  // Ragged members (rl::Observation's state is [-1]): a lazy stack of the very objects.
  rl::Observation left({{"pixels", at::zeros({2, 84, 84, 3}, at::kByte)}, {"state", at::zeros({2, 3})}}, {2});
  rl::Observation right({{"pixels", at::zeros({2, 84, 84, 3}, at::kByte)}, {"state", at::zeros({2, 5})}}, {2});
  rl::Observation lazy = maybe_dense_stack(std::vector<rl::Observation>{left, right});
  CHECK(LazyStackedTensorDict::is_lazy_stack(lazy.tensordict()));
  CHECK(lazy.index({1}).tensordict().is_same(right.tensordict()));
  CHECK((rl::Observation::maybe_dense_stack({left, left}, 1).batch_size() == c10::IntArrayRef{2, 2}));
  CHECK_FALSE(LazyStackedTensorDict::is_lazy_stack(rl::Observation::maybe_dense_stack({left, left}).tensordict()));
}

TEST_CASE("fromkeys gives the class, checked against the schema", "[typed][persist]") {
  using torchrl::llm::IFEvalScoreData;
  IFEvalScoreData scores = IFEvalScoreData::fromkeys({"prompt_level_strict_acc", "inst_level_loose_acc"}, 0.5);
  CHECK(scores.batch_size().empty());
  CHECK(scores.prompt_level_strict_acc().item<float>() == 0.5f);
  CHECK(scores.inst_level_loose_acc().scalar_type() == at::kFloat);
  CHECK_FALSE(scores.has_prompt_level_loose_acc());
  // An integer gives int64 values: the fields' dtype check refuses them.
  REQUIRE_THROWS_AS(IFEvalScoreData::fromkeys({"prompt_level_strict_acc"}, 1), TypeError);
  REQUIRE_THROWS_WITH(IFEvalScoreData::fromkeys({"prompt_level_strict_acc"}, 1),
                      Catch::Contains("IFEvalScoreData.prompt_level_strict_acc"));
  // A key the TensorClass does not declare.
  REQUIRE_THROWS_AS(IFEvalScoreData::fromkeys({"score"}, 0.5), ValueError);

  // A TypedTensorDict: every required field must be among the keys; one tensor value shared.
  params::Gains gains = params::Gains::fromkeys({"kp", "kd"}, 0.25);
  CHECK(gains.kp().item<float>() == 0.25f);
  CHECK(gains.kd().item<float>() == 0.25f);
  REQUIRE_THROWS_AS(params::Gains::fromkeys({"kp"}, 0.25), TypeError);
  REQUIRE_THROWS_WITH(params::Gains::fromkeys({"kp"}, 0.25), Catch::Contains("kd"));
  const at::Tensor shared = at::ones({}, at::kFloat);
  params::Gains both = params::Gains::fromkeys({"kp", "kd"}, shared);
  CHECK(both.kp().is_same(shared));
  REQUIRE_THROWS_AS(params::Gains::fromkeys({"kp", "kd"}, at::ones({2})), ShapeError);
  REQUIRE_THROWS_AS(params::Gains::fromkeys({"kp", "kd"}, "text"), TypeError);
}

TEST_CASE("from_modules stacks module parameters into the class", "[typed][persist][nn]") {
  torch::nn::Linear a(3, 2), b(3, 2), c(3, 2);
  params::Linear stacked = params::Linear::from_modules(a, b, c);
  CHECK((stacked.batch_size() == c10::IntArrayRef{3}));
  CHECK(at::equal(stacked.weight()[1], b->weight));
  CHECK(at::equal(stacked.bias()[2], c->bias));
  CHECK(stacked.weight().requires_grad());
  // The same from shared_ptrs, as a TypedTensorDict.
  params::LinearDict dict =
      params::LinearDict::from_modules(std::vector<std::shared_ptr<torch::nn::Module>>{a.ptr(), c.ptr()});
  CHECK((dict.weight().sizes() == c10::IntArrayRef{2, 2, 3}));
  CHECK(at::equal(dict.bias()[1], c->bias));
  // Submodules are nested fields.
  auto h1 = std::make_shared<HeadModule>();
  auto h2 = std::make_shared<HeadModule>();
  params::Head heads = params::Head::from_modules(h1, h2);
  CHECK((heads.fc().weight().sizes() == c10::IntArrayRef{2, 2, 3}));
  CHECK(at::equal(heads.fc().weight()[1], h2->fc->weight));
  CHECK((heads.scale().sizes() == c10::IntArrayRef{2, 1}));
  // Modules that do not fit the schema: the class's error, naming the field.
  torch::nn::Linear wider(4, 2);
  REQUIRE_THROWS_AS(params::Linear::from_modules(wider, wider), ShapeError);
  REQUIRE_THROWS_WITH(params::Linear::from_modules(wider, wider), Catch::Contains("Linear.weight"));
  REQUIRE_THROWS_AS(params::Linear::from_modules(h1, h2), ValueError);  // undeclared keys fc, scale
}

TEST_CASE("a TensorClass wraps a TypedTensorDict live", "[typed][persist][tc]") {
  params::LinearDict dict({{"weight", at::zeros({4, 2, 3})}, {"bias", at::zeros({4, 2})}}, {4});
  params::Linear view = params::Linear::from_tensordict(dict);  // a TypedTensorDict is a TensorDict
  CHECK(view.tensordict().is_same(dict));
  // Writes through either are seen by the other.
  view.set_bias_(at::ones({4, 2}));
  CHECK(at::equal(dict.bias(), at::ones({4, 2})));
  dict.set_weight(at::full({4, 2, 3}, 2.f));
  CHECK(at::equal(view.weight(), at::full({4, 2, 3}, 2.f)));
  view.set_note("from the view");
  CHECK(dict.get_non_tensor("note").value().as_string() == "from the view");
  CHECK(at::equal(view.index({1}).bias(), dict.index({1}).bias()));
  // The TensorClass's checks: a key the TypedTensorDict holds beyond the schema is refused.
  dict.set("extra", at::zeros({4}));
  REQUIRE_THROWS_AS(params::Linear::from_tensordict(dict), ValueError);
  CHECK(params::Linear::from_tensordict(dict, /*check=*/false).tensordict().is_same(dict));
  // And a typed_tensordict field of the wrong dtype, written through the untyped API.
  params::LinearDict bad({{"weight", at::zeros({4, 2, 3})}, {"bias", at::zeros({4, 2})}}, {4});
  bad.typed_storage().set("bias", at::zeros({4, 2}, at::kDouble));
  REQUIRE_THROWS_AS(params::Linear::from_tensordict(bad), TypeError);
}
