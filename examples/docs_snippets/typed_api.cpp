// The snippets of docs/typed-api.md, one function per section (docs/typed-api.md#constructing),
// run in order by main(). Classes come from schemas/game.yaml.
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>

#include "game.td.h"

namespace td = tensordict;

namespace {

game::Transition make_batch() {
  return game::Transition({{"done", at::zeros({8}, at::kBool)},
                           {"state", at::randn({8, 5})},
                           {"action", at::zeros({8}, at::kLong)},
                           {"reward", at::ones({8})}},
                          /*batch_size=*/{8});
}

// docs/typed-api.md#constructing
void constructing() {
  game::Transition t({{"done", at::zeros({8}, at::kBool)},
                      {"state", at::randn({8, 5})},
                      {"action", at::zeros({8}, at::kLong)},
                      {"reward", at::ones({8})}},
                     /*batch_size=*/{8});

  game::Transition empty;  // batch [], no field set: fill it with the setters
  empty.set_batch_size({2});
  empty.set_done(at::zeros({2}, at::kBool))
      .set_state(at::zeros({2, 3}))
      .set_action(at::zeros({2}, at::kLong))
      .set_reward(at::zeros({2}));
  std::cout << t.batch_size() << " " << empty.batch_size() << "\n";
}

// docs/typed-api.md#reading-and-writing-fields
void reading_and_writing(game::Transition t) {
  at::Tensor r = t.reward();         // the stored tensor (shared, not copied)
  t.set_reward(r.clamp(-1, 1));      // checked, then stored without copying
  t.reward().mul_(0.99);             // in place: writes into the stored tensor
  t.set_reward_(t.reward() * 2);     // checked, copied into the stored tensor on any backend
  try {
    t.set_reward(at::ones({8, 2}));  // event shape [] expected
  } catch (const td::ShapeError& e) {
    std::cout << e.what() << "\n";   // names Transition.reward, expected and actual shapes
  }
}

// docs/typed-api.md#optional-fields
void optional_fields(game::Transition t) {
  if (!t.has_value()) {
    t.set_value(at::zeros({8}));
  }
  std::cout << t.value().sizes() << "\n";
}

// docs/typed-api.md#inheritance
int64_t count_done(const game::Step& step) { return step.done().sum().item<int64_t>(); }

void inheritance(const game::Transition& t) {
  std::cout << count_done(t) << "\n";  // a Transition is a Step
  const td::TensorDict& plain = t;     // and a TensorDict
  std::cout << plain.keys().size() << "\n";
}

// docs/typed-api.md#wrapping-a-tensordict
void wrapping() {
  td::TensorDict data({{"done", at::zeros({3}, at::kBool)},
                       {"state", at::zeros({3, 4})},
                       {"action", at::zeros({3}, at::kLong)},
                       {"reward", at::zeros({3})}},
                      /*batch_size=*/{3});
  game::Transition view = game::Transition::from_tensordict(data);  // checked, no copy
  view.set_reward(at::ones({3}));
  std::cout << data.get("reward").sum().item<float>() << "\n";  // 3: writes reach `data`
}

// docs/typed-api.md#lazy-stacks-of-typed-objects
void lazy_stacks(const game::Transition& t) {
  game::Transition a = t.index({at::indexing::Slice(0, 4)});
  game::Transition b = t.index({at::indexing::Slice(4, 8)});
  game::Transition pair = game::Transition::lazy_stack({a, b});  // batch [2, 4], no copy
  pair.index({1}).set_reward(at::zeros({4}));                    // writes b, hence t
  std::cout << pair.reward().sizes() << "\n";                    // [2, 4]: the members stacked
}

// docs/typed-api.md#operations-keep-the-type
void operations(const game::Transition& t) {
  game::Transition row = t.index({0});                 // batch []
  game::Transition grid = t.reshape({2, 4});           // batch [2, 4]
  game::Transition both = game::Transition::stack({t, t.clone()});  // batch [2, 8]
  std::vector<game::Transition> halves = t.chunk(2);
  std::cout << row.batch_size() << grid.batch_size() << both.batch_size() << halves.size() << "\n";
}

// docs/typed-api.md#saving-loading-and-state-dicts
void saving_and_loading(game::Transition t) {
  const std::string dir = (std::filesystem::temp_directory_path() / "tensordict_docs_typed_save").string();
  std::filesystem::remove_all(dir);
  game::Transition saved = t.save(dir);                 // a Transition over the written files
  game::Transition back = game::Transition::load(dir);  // checked against the schema
  t.set_reward(at::zeros({8}));
  t.load_(dir);                                         // the saved values again, in place
  td::StateDict sd = t.state_dict();
  t.load_state_dict(sd);                                // checked, then copied into the fields
  std::cout << back.reward().sum().item<float>() << " " << saved.is_memmap() << "\n";
  std::filesystem::remove_all(dir);
}

// docs/typed-api.md#tensorclass-and-non-tensor-fields
void tensor_class() {
  game::Frame frame({{"pixels", at::zeros({4, 64, 64, 3}, at::kByte)},
                     {"level", "1-1"}},
                    /*batch_size=*/{4});
  frame.set_score(1200);
  std::cout << frame.level() << " " << frame.score() << " " << frame.pixels().sizes() << "\n";
  const td::TensorDict& backend = frame.tensordict();  // has-a: the fields live here
  std::cout << backend.keys().size() << "\n";
}

// docs/typed-api.md#compile-time-description
void traits() {
  using Traits = game::Transition::Traits;
  static_assert(Traits::fields_number == 5, "done, state, action, reward, value");
  for (const char* name : Traits::field_names) std::cout << name << " ";
  std::cout << "\n";
}

}  // namespace

int main() {
  at::manual_seed(0);
  constructing();
  reading_and_writing(make_batch());
  optional_fields(make_batch());
  inheritance(make_batch());
  wrapping();
  lazy_stacks(make_batch());
  operations(make_batch());
  saving_and_loading(make_batch());
  tensor_class();
  traits();
  return 0;
}
