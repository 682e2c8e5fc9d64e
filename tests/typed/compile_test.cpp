// Compile test: every generated header of this project (example schemas, golden inputs, test
// schemas), built with -Wall -Wextra -Werror, with every typed operation instantiated.
#include "support/catch_torch.h"

#include <type_traits>

#include "global.td.h"
#include "ifeval.td.h"
#include "observation.td.h"
#include "records.td.h"
#include "rl_transition.td.h"
#include "sensors.td.h"
#include "survival.td.h"
#include "transition.td.h"

// Last: glog (through c10/util/Logging.h) defines its own CHECK macro, which must not replace
// Catch's.

// Explicit instantiations compile every member of the typed operation templates.
template class tensordict::typed::TypedOps<rl::Transition, rl::Step>;
template class tensordict::typed::TypedOps<rl::Step, tensordict::typed::TypedTensorDictRoot>;
template class tensordict::typed::TypedOps<rl::Observation, tensordict::typed::TensorClassRoot>;
template class tensordict::typed::TypedOps<Derived, Base>;
template class tensordict::typed::TypedOps<Empty, tensordict::typed::TypedTensorDictRoot>;
template class tensordict::typed::TypedOps<golden::sensors::Reading, tensordict::typed::TensorClassRoot>;
template class tensordict::typed::TypedOps<survival::SurvivalState, survival::ObservedState>;
template class tensordict::TensorClass<records::LabeledRecord, records::Record>;
template class tensordict::TypedTensorDict<golden::Transition, golden::Step>;

static_assert(std::is_base_of<tensordict::TensorDict, rl::Transition>::value, "a typed_tensordict is a TensorDict");
static_assert(std::is_base_of<rl::Step, rl::Transition>::value, "extends is C++ inheritance");
static_assert(!std::is_base_of<tensordict::TensorDict, rl::Observation>::value, "a tensorclass has a TensorDict");
static_assert(tensordict::typed::is_typed<golden::sensors::Reading>::value, "generated classes are typed");
static_assert(!tensordict::typed::is_typed<tensordict::TensorDict>::value, "TensorDict is not");
static_assert(Empty::Traits::fields_number == 0, "an empty class has no fields");
static_assert(golden::Transition::Traits::fields_number == 4, "inherited fields first");
static_assert(golden::Transition::Traits::fields[0].kind == tensordict::typed::FieldKind::Tensor, "reward");
static_assert(golden::Transition::Traits::fields[1].kind == tensordict::typed::FieldKind::Nested, "obs");
static_assert(golden::Transition::Traits::fields[3].optional, "mask is optional");
static_assert(golden::sensors::Reading::Traits::fields[0].rank == 3, "image has 3 event dims");
static_assert(golden::sensors::Reading::Traits::fields[2].rank == -1, "anything has any shape");
static_assert(std::is_same<decltype(std::declval<golden::sensors::Reading&>().channel()), std::int64_t>::value,
              "int fields read as int64");
static_assert(std::is_same<decltype(std::declval<golden::Transition&>().set_reward(at::Tensor())), golden::Transition&>::value,
              "inherited setters return the extending class");

TEST_CASE("generated headers compile warning-free and describe their schemas", "[typed][compile]") {
  CHECK(std::string(golden::Transition::Traits::fully_qualified_name) == "golden::Transition");
  CHECK(std::string(golden::Transition::Traits::schema.fields[1].class_name) == "Reading");
  CHECK(golden::sensors::Reading::Traits::fields[0].shape[2] == 3);
  CHECK(golden::sensors::Reading::Traits::fields[0].dtype == at::kByte);
  CHECK(Derived::Traits::fields[1].dtype == at::kBFloat16);
  CHECK(Derived::Traits::fields[0].dtype == at::kComplexFloat);
}
