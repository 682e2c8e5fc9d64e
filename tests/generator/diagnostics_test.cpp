// Every diagnostic of tdgen, in the order the checks run (frontend, then sema): exit code 1 and
// `file:line:column: message` on stderr.
#include <catch2/catch.hpp>

#include "generator/support.h"

using tdgen_test::diagnose;
using tdgen_test::run;
using tdgen_test::TempDir;

namespace {

const char* const kHeader = "namespace: t\nclasses:\n";

}  // namespace

TEST_CASE("a valid schema checks cleanly", "[generator][diagnostics]") {
  TempDir dir;
  auto result = run({"--check", dir.write("ok.yaml", std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {dtype: float32}\n")});
  CHECK(result.exit_code == 0);
  CHECK(result.err.empty());
}

TEST_CASE("YAML syntax errors point at the line", "[generator][diagnostics]") {
  CHECK_THAT(diagnose("classes:\n  A: {kind: tensorclass\n  B: x\n"), Catch::StartsWith(":3:") && Catch::Contains("YAML syntax error"));
}

TEST_CASE("unknown keys are rejected at every level", "[generator][diagnostics]") {
  CHECK_THAT(diagnose("namespce: t\nclasses: {}\n"),
             Catch::StartsWith(":1:1: unknown key 'namespce' in the schema (expected one of: namespace, imports, classes)"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    feilds: {}\n"),
             Catch::StartsWith(":5:5: unknown key 'feilds' in class 'A'"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {dtype: float32, shap: [3]}\n"),
             Catch::StartsWith(":6:27: unknown key 'shap' in field 'x'"));
}

TEST_CASE("missing or unknown kind", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    fields: {}\n"), Catch::StartsWith(":3:3: missing key 'kind' in class 'A'"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: dataclass\n"),
             Catch::StartsWith(":4:11: unknown kind 'dataclass' (expected tensorclass or typed_tensordict)"));
}

TEST_CASE("unknown dtype", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {dtype: float33}\n"),
             Catch::StartsWith(":6:18: unknown dtype 'float33' (expected one of: float32,"));
}

TEST_CASE("shape not a list of sizes or dim names", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {shape: 3}\n"),
             Catch::StartsWith(":6:18: shape must be a list of integers"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {shape: [3, a]}\n"),
             Catch::StartsWith(":6:7: field 'x' names the dim 'a', which neither 'A' nor a class it extends declares"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {shape: [1.5]}\n"),
             Catch::StartsWith(":6:19: shape must be a list of sizes or dim names, e.g. [84, 84, 3], [N, 3] or []"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {shape: [[1]]}\n"),
             Catch::StartsWith(":6:19: shape must be a list of sizes or dim names"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {shape: [-2]}\n"),
             Catch::StartsWith(":6:19: shape sizes must be >= 0, or -1 for any size"));
}

TEST_CASE("conflicting field keys and bad values", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {class: B, dtype: int8}\n"),
             Catch::StartsWith(":6:18: field 'x': 'class' cannot be combined with 'dtype', 'shape' or 'type'"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {type: str}\n"),
             Catch::StartsWith(":6:17: unknown type 'str'"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {optional: maybe}\n"),
             Catch::StartsWith(":6:21: 'optional' must be true or false"));
}

TEST_CASE("unknown class in extends or a nested field", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    extends: Missing\n"),
             Catch::StartsWith(":5:14: unknown class 'Missing' (not declared in this file or its imports)"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {class: Nope}\n"),
             Catch::StartsWith(":6:18: unknown class 'Nope'"));
}

TEST_CASE("cyclic extends", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    extends: B\n  B:\n    kind: tensorclass\n    extends: A\n"),
             Catch::StartsWith(":3:3: cyclic extends: A -> B -> A"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    extends: A\n"),
             Catch::StartsWith(":3:3: cyclic extends: A -> A"));
}

TEST_CASE("extending a class of the other kind", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n  B:\n    kind: typed_tensordict\n    extends: A\n"),
             Catch::StartsWith(":7:14: a typed_tensordict cannot extend the tensorclass 'A'"));
}

TEST_CASE("cyclic nesting", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      b: {class: B}\n  B:\n    kind: tensorclass\n    fields:\n      a: {class: A}\n"),
             Catch::StartsWith(":10:18: cyclic nesting: class 'A' contains itself"));
}

TEST_CASE("duplicate fields, also through inheritance", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {}\n      x: {dtype: int8}\n"),
             Catch::StartsWith(":7:7: duplicate field 'x' (first declared at ") && Catch::Contains("bad.yaml:6:7)"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: typed_tensordict\n    fields:\n      x: {}\n  B:\n    kind: typed_tensordict\n    extends: A\n    fields:\n      x: {}\n"),
             Catch::StartsWith(":11:7: duplicate field 'x' (inherited from 'A', first declared at ") && Catch::Contains("bad.yaml:6:7)"));
}

TEST_CASE("every error of a schema is reported in one run, in source order", "[generator][diagnostics]") {
  // Three independent mistakes: two fields of A and one of B.
  const std::string err = diagnose(std::string(kHeader) +
                                   "  A:\n    kind: tensorclass\n    fields:\n      class: {}\n      clone: {}\n      ok: {}\n"
                                   "  B:\n    kind: typed_tensordict\n    fields:\n      s: {type: string}\n");
  CHECK_THAT(err, Catch::StartsWith(":6:7: field name 'class' is a C++ keyword"));
  CHECK_THAT(err, Catch::Contains("bad.yaml:7:7: field name 'clone' clashes with the member 'clone'"));
  CHECK_THAT(err, Catch::Contains("bad.yaml:12:7: non-tensor field 's' in the typed_tensordict 'B'"));
  // Unknown classes in two places, then nothing of the later phases (they need resolved names).
  const std::string unresolved = diagnose(std::string(kHeader) +
                                          "  A:\n    kind: tensorclass\n    extends: Nope\n    fields:\n      n: {class: Gone}\n");
  CHECK_THAT(unresolved, Catch::Contains("unknown class 'Nope'") && Catch::Contains("unknown class 'Gone'"));
  // The frontend too: a bad dtype and a bad shape in two fields, a bad kind in another class.
  const std::string parsed = diagnose(std::string(kHeader) +
                                      "  A:\n    kind: tensorclass\n    fields:\n      x: {dtype: float99}\n"
                                      "      y: {shape: [-3]}\n  B:\n    kind: nope\n");
  CHECK_THAT(parsed, Catch::StartsWith(":6:18: unknown dtype 'float99'"));
  CHECK_THAT(parsed, Catch::Contains("bad.yaml:7:19: shape sizes must be >= 0"));
  CHECK_THAT(parsed, Catch::Contains("bad.yaml:9:11: unknown kind 'nope'"));
}

TEST_CASE("duplicate classes", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n  A:\n    kind: tensorclass\n"),
             Catch::StartsWith(":5:3: duplicate class 'A' (first declared at "));
}

TEST_CASE("field names that are C++ keywords or clash with members", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      class: {}\n"),
             Catch::StartsWith(":6:7: field name 'class' is a C++ keyword"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: typed_tensordict\n    fields:\n      clone: {}\n"),
             Catch::StartsWith(":6:7: field name 'clone' clashes with the member 'clone' of TensorDict, TensorClass or the generated class"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      batch_size: {}\n"),
             Catch::StartsWith(":6:7: field name 'batch_size' clashes with the member 'batch_size'"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      non_tensor: {}\n"),
             Catch::StartsWith(":6:7: field name 'non_tensor' clashes with the member 'set_non_tensor'"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x: {}\n      set_x: {}\n"),
             Catch::StartsWith(":7:7: field name 'set_x' clashes with the generated setter of field 'x'"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      s: {type: string}\n      s_list: {}\n"),
             Catch::StartsWith(":7:7: field name 's_list' clashes with the generated per-row accessor of field 's'"));
  // A tensor field has no per-row accessor, so `x_list` next to it is fine.
  TempDir ok;
  CHECK(run({"--check", ok.write("ok.yaml", std::string(kHeader) +
                                               "  A:\n    kind: tensorclass\n    fields:\n      x: {}\n      x_list: {}\n")})
            .exit_code == 0);
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      x_: {}\n"),
             Catch::StartsWith(":6:7: field name 'x_' is reserved"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      a-b: {}\n"),
             Catch::StartsWith(":6:7: field name 'a-b' is not a C++ identifier"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: tensorclass\n    fields:\n      A: {}\n"),
             Catch::StartsWith(":6:7: field name 'A' is the name of its class"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  Traits:\n    kind: tensorclass\n"),
             Catch::StartsWith(":3:3: class name 'Traits' clashes with a member"));
  CHECK_THAT(diagnose(std::string(kHeader) + "  int:\n    kind: tensorclass\n"),
             Catch::StartsWith(":3:3: class name 'int' is a C++ keyword"));
}

TEST_CASE("non-tensor field in a typed_tensordict", "[generator][diagnostics]") {
  CHECK_THAT(diagnose(std::string(kHeader) + "  A:\n    kind: typed_tensordict\n    fields:\n      label: {type: string}\n"),
             Catch::StartsWith(":6:7: non-tensor field 'label' in the typed_tensordict 'A'"));
}

TEST_CASE("import errors: missing file and cycles", "[generator][diagnostics]") {
  TempDir dir;
  const std::string a = dir.write("a.yaml", "imports: [b.yaml]\nclasses: {}\n");
  dir.write("b.yaml", "imports: [c.yaml]\nclasses: {}\n");
  dir.write("c.yaml", "classes: {}\nimports:\n  - a.yaml\n");
  auto result = run({"--check", a});
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Catch::Contains(dir.path("c.yaml") + ":3:5: cyclic imports: a.yaml -> b.yaml -> c.yaml -> a.yaml"));

  const std::string m = dir.write("m.yaml", "imports: [missing.yaml]\nclasses: {}\n");
  result = run({"--check", m});
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Catch::StartsWith(m + ":1:11: cannot find import 'missing.yaml'"));
}

TEST_CASE("imports resolve classes, also through --import-dir", "[generator][diagnostics]") {
  TempDir dir;
  dir.write("lib/common.yaml", "namespace: common\nclasses:\n  Obs:\n    kind: tensorclass\n");
  const std::string main = dir.write("src/main.yaml",
                                     "imports: [common.yaml]\nclasses:\n  T:\n    kind: tensorclass\n    fields:\n      o: {class: common::Obs}\n");
  CHECK(run({"--check", main}).exit_code == 1);
  auto result = run({"--check", "-I", dir.path("lib"), main});
  INFO(result.err);
  CHECK(result.exit_code == 0);
}

TEST_CASE("usage errors exit with 2", "[generator][diagnostics]") {
  CHECK(run({}).exit_code == 2);
  CHECK(run({"x.yaml"}).exit_code == 2);  // no --out
  auto result = run({"--bogus", "x.yaml"});
  CHECK(result.exit_code == 2);
  CHECK_THAT(result.err, Catch::Contains("unknown option '--bogus'"));
  CHECK(run({"--help"}).exit_code == 0);
}

TEST_CASE("a schema file that cannot be read", "[generator][diagnostics]") {
  auto result = run({"--check", "/nonexistent/dir/s.yaml"});
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Catch::StartsWith("/nonexistent/dir/s.yaml:1:1: cannot read schema file"));
}

TEST_CASE("accessor names and defaults and named dims in YAML", "[generator][diagnostics]") {
  const std::string cls = std::string(kHeader) + "  A:\n    kind: tensorclass\n";
  CHECK_THAT(diagnose(cls + "    fields:\n      keys: {}\n"),
             Catch::StartsWith(":6:7: field name 'keys' clashes with the member 'keys'") &&
                 Catch::Contains("keep the key and rename its accessors with `cpp_name: keys_field`"));
  CHECK_THAT(diagnose(cls + "    fields:\n      keys: {cpp_name: 2x}\n"),
             Catch::StartsWith(":6:24: C++ name '2x' is not a C++ identifier"));
  CHECK_THAT(diagnose(cls + "    fields:\n      n: {type: int, optional: true, default: \"3\"}\n"),
             Catch::StartsWith(":6:47: the default of field 'n' must be an integer, got a string"));
  CHECK_THAT(diagnose(cls + "    fields:\n      n: {type: int, optional: true, default: [3]}\n"),
             Catch::StartsWith(":6:47: 'default' must be a single value"));
  CHECK_THAT(diagnose(cls + "    fields:\n      b: {dtype: bool, shape: [], optional: true, default: 1}\n"),
             Catch::StartsWith(":6:60: the default of field 'b' must be true or false (dtype bool), got an integer"));
  CHECK_THAT(diagnose(cls + "    dims: [N, N]\n    fields:\n      x: {shape: [N]}\n"),
             Catch::StartsWith(":5:15: duplicate dim 'N'"));
  CHECK_THAT(diagnose(cls + "    dims: N\n"), Catch::StartsWith(":5:11: 'dims' must be a list of dim names"));
  CHECK_THAT(diagnose(cls + "    frozen: maybe\n"), Catch::StartsWith(":5:13: 'frozen' must be true or false"));
}
