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
