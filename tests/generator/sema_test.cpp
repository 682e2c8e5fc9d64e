// The shared checks (sema.h) on an IR built by hand: what both frontends rely on, tested
// without either of them.
#include <catch2/catch.hpp>

#include <tdgen/diagnostic.h>
#include <tdgen/sema.h>

namespace {

tdgen::SourceLocation at(int line, int column) { return tdgen::SourceLocation{"hand.ir", line, column}; }

tdgen::FieldDef tensor(const std::string& name, int line) {
  tdgen::FieldDef f;
  f.name = name;
  f.location = at(line, 3);
  f.kind = tdgen::FieldKind::Tensor;
  return f;
}

tdgen::ClassDef make_class(const std::string& name, tdgen::ClassKind kind, int line) {
  tdgen::ClassDef c;
  c.name = name;
  c.kind = kind;
  c.location = at(line, 1);
  return c;
}

tdgen::Module one_file(std::vector<tdgen::ClassDef> classes) {
  tdgen::SchemaFile file;
  file.path = "hand.ir";
  file.stem = "hand";
  file.cpp_namespace = "ns";
  file.location = at(1, 1);
  file.classes = std::move(classes);
  tdgen::Module m;
  m.files.push_back(std::move(file));
  m.roots = {0};
  return m;
}

// Every error of the run, as "line:col: message".
std::vector<std::string> errors_of(tdgen::Module m) {
  try {
    tdgen::resolve(std::move(m));
  } catch (const tdgen::Diagnostic& d) {
    std::vector<std::string> out;
    for (const auto& [where, message] : d.entries())
      out.push_back(std::to_string(where.line) + ":" + std::to_string(where.column) + ": " + message);
    return out;
  }
  return {};
}

}  // namespace

TEST_CASE("sema on the IR: a valid module resolves its references", "[generator][sema]") {
  auto step = make_class("Step", tdgen::ClassKind::TypedTensorDict, 2);
  step.fields.push_back(tensor("reward", 3));
  auto next = make_class("Next", tdgen::ClassKind::TypedTensorDict, 5);
  next.base = tdgen::ClassRef{"::ns::Step", at(5, 20)};
  next.fields.push_back(tensor("action", 6));
  auto module = tdgen::resolve(one_file({step, next}));
  const tdgen::ClassDef& resolved = module->files[0].classes[1];
  REQUIRE(resolved.base.has_value());
  CHECK(resolved.base->class_index == 0);
  CHECK(tdgen::qualified_cpp_name(*module, *resolved.base) == "::ns::Step");
  CHECK(tdgen::all_fields(*module, resolved).size() == 2);
}

TEST_CASE("sema on the IR: every error of a phase, each at its location", "[generator][sema]") {
  auto step = make_class("Step", tdgen::ClassKind::TypedTensorDict, 2);
  step.fields.push_back(tensor("reward", 3));
  auto next = make_class("Next", tdgen::ClassKind::TypedTensorDict, 5);
  next.base = tdgen::ClassRef{"Step", at(5, 20)};
  next.fields.push_back(tensor("reward", 6));  // duplicate inherited
  next.fields.push_back(tensor("keys", 7));    // clashes with a TensorDict member
  tdgen::FieldDef note = tensor("note", 8);
  note.kind = tdgen::FieldKind::String;        // non-tensor in a typed tensordict
  next.fields.push_back(note);
  const auto errors = errors_of(one_file({step, next}));
  REQUIRE(errors.size() == 3);
  CHECK(errors[0].rfind("6:3: duplicate field 'reward' (inherited from 'Step', first declared at hand.ir:3:3)", 0) == 0);
  CHECK(errors[1].rfind("7:3: field name 'keys' clashes with the member 'keys'", 0) == 0);
  CHECK(errors[2].rfind("8:3: non-tensor field 'note' in the typed_tensordict 'Next'", 0) == 0);
}

TEST_CASE("sema on the IR: unknown references and kind mismatches", "[generator][sema]") {
  auto a = make_class("A", tdgen::ClassKind::TensorClass, 2);
  a.base = tdgen::ClassRef{"::ns::Missing", at(2, 10)};
  tdgen::FieldDef nested = tensor("inner", 3);
  nested.kind = tdgen::FieldKind::Nested;
  nested.nested = tdgen::ClassRef{"Gone", at(3, 9)};
  a.fields.push_back(nested);
  const auto unknown = errors_of(one_file({a}));
  REQUIRE(unknown.size() == 2);
  CHECK(unknown[0].rfind("2:10: unknown class '::ns::Missing'", 0) == 0);
  CHECK(unknown[1].rfind("3:9: unknown class 'Gone'", 0) == 0);

  auto tc = make_class("T", tdgen::ClassKind::TensorClass, 2);
  auto td = make_class("D", tdgen::ClassKind::TypedTensorDict, 4);
  td.base = tdgen::ClassRef{"T", at(4, 12)};
  const auto kinds = errors_of(one_file({tc, td}));
  REQUIRE(kinds.size() == 1);
  CHECK(kinds[0].rfind("4:12: a typed_tensordict cannot extend the tensorclass 'T'", 0) == 0);
}

TEST_CASE("sema on the IR: C++ names and defaults and named dims", "[generator][sema]") {
  auto step = make_class("Step", tdgen::ClassKind::TensorClass, 2);
  step.dims.push_back(tdgen::DimDef{"N", at(2, 20)});
  tdgen::FieldDef points = tensor("points", 3);
  points.dtype = tdgen::Dtype::kFloat;
  points.shape = std::vector<int64_t>{-1, 3};
  points.dim_names = {"N", ""};
  step.fields.push_back(points);
  tdgen::FieldDef index = tensor("index", 4);  // a member name, renamed: fine
  index.cpp_name = "point_index";
  index.cpp_name_location = at(4, 30);
  step.fields.push_back(index);
  tdgen::FieldDef odd_key = tensor("has space", 5);  // any key, given a C++ name
  odd_key.cpp_name = "spaced";
  step.fields.push_back(odd_key);
  tdgen::FieldDef scale = tensor("scale", 6);
  scale.kind = tdgen::FieldKind::Float;
  scale.optional = true;
  scale.default_value = tdgen::DefaultValue{tdgen::DefaultValue::Kind::Int, false, 2, 0, "", at(6, 20)};
  step.fields.push_back(scale);
  CHECK(errors_of(one_file({step})).empty());

  auto bad = make_class("Bad", tdgen::ClassKind::TensorClass, 10);
  bad.base = tdgen::ClassRef{"Step", at(10, 15)};
  bad.dims.push_back(tdgen::DimDef{"N", at(10, 30)});  // also declared by Step
  tdgen::FieldDef keys = tensor("keys", 11);            // clashes: the hint names the escape
  bad.fields.push_back(keys);
  tdgen::FieldDef twin = tensor("other", 12);  // the C++ name of an inherited field
  twin.cpp_name = "point_index";
  bad.fields.push_back(twin);
  tdgen::FieldDef required = tensor("required", 13);
  required.dtype = tdgen::Dtype::kFloat;
  required.shape = std::vector<int64_t>{};
  required.default_value = tdgen::DefaultValue{tdgen::DefaultValue::Kind::Float, false, 0, 1.5, "", at(13, 22)};
  bad.fields.push_back(required);
  tdgen::FieldDef small = tensor("small", 14);
  small.dtype = tdgen::Dtype::kByte;
  small.shape = std::vector<int64_t>{};
  small.optional = true;
  small.default_value = tdgen::DefaultValue{tdgen::DefaultValue::Kind::Int, false, 300, 0, "", at(14, 22)};
  bad.fields.push_back(small);
  tdgen::FieldDef loose = tensor("loose", 15);
  loose.dtype = tdgen::Dtype::kFloat;
  loose.optional = true;  // any shape: nothing to fill
  loose.default_value = tdgen::DefaultValue{tdgen::DefaultValue::Kind::Float, false, 0, 1.0, "", at(15, 22)};
  bad.fields.push_back(loose);
  tdgen::FieldDef label = tensor("label", 16);
  label.kind = tdgen::FieldKind::String;
  label.optional = true;
  label.default_value = tdgen::DefaultValue{tdgen::DefaultValue::Kind::Int, false, 1, 0, "", at(16, 22)};
  bad.fields.push_back(label);
  tdgen::FieldDef mask = tensor("mask", 17);
  mask.dtype = tdgen::Dtype::kBool;
  mask.shape = std::vector<int64_t>{-1};
  mask.dim_names = {"T"};  // declared nowhere
  bad.fields.push_back(mask);
  tdgen::FieldDef renamed = tensor("renamed", 18);
  renamed.cpp_name = "size";  // the C++ name itself clashes
  renamed.cpp_name_location = at(18, 30);
  bad.fields.push_back(renamed);

  const auto errors = errors_of(one_file({step, bad}));
  REQUIRE(errors.size() == 9);
  CHECK(errors[0].rfind("10:30: duplicate dim 'N' (inherited from 'Step', first declared at hand.ir:2:20)", 0) == 0);
  CHECK(errors[1] == "11:3: field name 'keys' clashes with the member 'keys' of TensorDict, TensorClass or the "
                     "generated class: keep the key and rename its accessors with TD_CPP_NAME(\"keys_field\")");
  CHECK(errors[2].rfind("12:3: field 'other' has the C++ name 'point_index' of field 'index' (inherited from 'Step'", 0) == 0);
  CHECK(errors[3].rfind("13:22: field 'required' has a default but is required", 0) == 0);
  CHECK(errors[4].rfind("14:22: the default 300 of field 'small' does not fit its dtype uint8 (0 to 255)", 0) == 0);
  CHECK(errors[5].rfind("15:22: field 'loose' has a default but any event shape", 0) == 0);
  CHECK(errors[6].rfind("16:22: the default of field 'label' must be a string, got an integer", 0) == 0);
  CHECK(errors[7].rfind("17:3: field 'mask' names the dim 'T', which neither 'Bad' nor a class it extends declares", 0) == 0);
  CHECK(errors[8].rfind("18:30: C++ name 'size' of field 'renamed' clashes with the member 'size'", 0) == 0);
}

TEST_CASE("sema on the IR: the class of a plain-data struct", "[generator][sema][struct_array]") {
  auto typed = [](const std::string& name, int line) {
    tdgen::FieldDef f = tensor(name, line);
    f.dtype = tdgen::Dtype::kFloat;
    f.shape = std::vector<int64_t>{3};
    return f;
  };
  auto pose = make_class("Pose", tdgen::ClassKind::TypedTensorDict, 2);
  pose.plain_struct = tdgen::PlainStruct{"::ns::schema::Pose", "pose.h"};
  pose.fields.push_back(typed("pos", 3));
  CHECK(tdgen::resolve(one_file({pose}))->files[0].classes[0].plain_struct->header == "pose.h");

  // Each member the class adds is taken; a field's accessor cannot hide it.
  pose.fields.push_back(typed("to_struct_array", 4));
  tdgen::FieldDef renamed = typed("layout", 5);
  renamed.cpp_name = "struct_layout";
  renamed.cpp_name_location = at(5, 20);
  pose.fields.push_back(renamed);
  // A member is a tensor of one dtype and a fixed shape.
  tdgen::FieldDef loose = tensor("loose", 6);
  pose.fields.push_back(loose);
  tdgen::FieldDef sized = typed("sized", 7);
  sized.shape = std::vector<int64_t>{-1};
  pose.fields.push_back(sized);
  auto step = make_class("Step", tdgen::ClassKind::TypedTensorDict, 9);
  auto next = make_class("Next", tdgen::ClassKind::TypedTensorDict, 10);
  next.plain_struct = tdgen::PlainStruct{"::ns::schema::Next", "pose.h"};
  next.base = tdgen::ClassRef{"Step", at(10, 30)};
  const auto errors = errors_of(one_file({pose, step, next}));
  REQUIRE(errors.size() == 1);
  CHECK(errors[0].rfind("10:30: the plain-data class 'Next' cannot extend a class", 0) == 0);
  // The extends phase stops the run: the fields are checked without the bad base.
  next.base.reset();
  const auto field_errors = errors_of(one_file({pose, step, next}));
  REQUIRE(field_errors.size() == 4);
  CHECK(field_errors[0].rfind("4:3: field name 'to_struct_array' clashes with the member 'to_struct_array' of a "
                              "class generated from a plain-data struct", 0) == 0);
  CHECK(field_errors[1].rfind("5:20: C++ name 'struct_layout' of field 'layout' clashes", 0) == 0);
  CHECK(field_errors[2].rfind("6:3: field 'loose' of the plain-data class 'Pose' must be a tensor of one dtype", 0) == 0);
  CHECK(field_errors[3].rfind("7:3: field 'sized' of the plain-data class 'Pose'", 0) == 0);
}
