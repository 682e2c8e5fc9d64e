// The C++ frontend's diagnostics: each error is `file:line:col: error: ...` at the offending
// token of the user's header, with the source line and Clang's caret; every error of a run is
// reported; the run exits 1 and writes nothing.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "generator/support.h"

namespace fs = std::filesystem;
using tdgen_test::run;
using tdgen_test::TempDir;

namespace {

const std::string kTemplates = std::string(TENSORDICT_SOURCE_DIR) + "/templates";

// Lines 1-4 of every test header; the schema text starts on line 5.
const std::string kPrelude =
    "#include <cstdint>\n#include <string>\n#include <vector>\n#include <tensordict/schema.h>\n";

struct Checked {
  int exit_code;
  std::string err;
  std::string header;  // its path, as diagnostics name it
  bool wrote_anything;
};

Checked generate(const std::string& schema) {
  TempDir dir;
  const std::string header = dir.path("bad.h");
  std::ofstream(header) << kPrelude << schema;
  auto r = run({"--out", dir.path("out"), "--templates", kTemplates, header});
  return Checked{r.exit_code, r.err, header, fs::exists(dir.path("out"))};
}

// The error `message` at `line`:`col`, followed by the source line and a caret under `col`.
void require_error(const Checked& c, int line, int col, const std::string& message) {
  INFO(c.err);
  const std::string head = c.header + ":" + std::to_string(line) + ":" + std::to_string(col) + ": error: ";
  const size_t at = c.err.find(head);
  REQUIRE(at != std::string::npos);
  const size_t end = c.err.find('\n', at);
  CHECK(c.err.substr(at + head.size(), end - at - head.size()).find(message) != std::string::npos);
  // Clang's rendering: the source line, then the caret in column `col`.
  const size_t source_end = c.err.find('\n', end + 1);
  const size_t caret_end = c.err.find('\n', source_end + 1);
  REQUIRE(caret_end != std::string::npos);
  const std::string caret = c.err.substr(source_end + 1, caret_end - source_end - 1);
  CHECK(caret.find('^') == static_cast<size_t>(col - 1));
  CHECK(c.exit_code == 1);
  CHECK_FALSE(c.wrote_anything);
}

}  // namespace

TEST_CASE("C++ diagnostics: an unknown dtype points at the element type", "[generator][cpp][diagnostics]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "struct TD_TENSORCLASS A {\n"
      "  td::schema::Tensor<uint32_t, 3> x;\n"
      "};\n}\n");
  require_error(c, 7, 22, "unknown dtype 'unsigned int'");
}

TEST_CASE("C++ diagnostics: a non-tensor field in a typed tensordict", "[generator][cpp][diagnostics]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "struct TD_TYPED_TENSORDICT A {\n"
      "  std::string note;\n"
      "};\n}\n");
  require_error(c, 7, 15, "non-tensor field 'note' in the typed_tensordict 'A'");
}

TEST_CASE("C++ diagnostics: a field of an unsupported type", "[generator][cpp][diagnostics]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "struct TD_TENSORCLASS A {\n"
      "  std::vector<float> values;\n"
      "  float* gain;\n"
      "};\n}\n");
  require_error(c, 7, 3, "field 'values' has the unsupported type 'std::vector<float>'");
  require_error(c, 8, 3, "field 'gain' has the unsupported type 'float *'");
}

TEST_CASE("C++ diagnostics: plain members in a struct that is not plain data", "[generator][cpp][diagnostics][struct_array]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "struct TD_TENSORCLASS A {\n"
      "  td::schema::Tensor<float> x;\n"
      "  float gain;\n"
      "  int32_t pos[3];\n"
      "  int64_t count;\n"  // a non-tensor field of a tensorclass, as before
      "};\n"
      "struct TD_TYPED_TENSORDICT Step { td::schema::Tensor<bool> done; };\n"
      "struct TD_TYPED_TENSORDICT Next : Step {\n"
      "  float reward;\n"
      "};\n}\n");
  require_error(c, 8, 3,
                "field 'gain' is a plain member ('float'), but 'A' is not a plain-data struct (its field 'x' is a "
                "td::schema::Tensor): write td::schema::Tensor<float> gain, or make every field of 'A' a plain member");
  require_error(c, 9, 3, "field 'pos' is a plain member ('int32_t[3]')");
  require_error(c, 9, 3, "write td::schema::Tensor<int32_t, 3> pos");
  require_error(c, 14, 3, "field 'reward' is a plain member ('float'), but 'Next' is not a plain-data struct (it extends");
  size_t errors = 0;
  for (size_t at = c.err.find(": error: "); at != std::string::npos; at = c.err.find(": error: ", at + 1)) ++errors;
  CHECK(errors == 3);
}

TEST_CASE("C++ diagnostics: what a plain-data struct cannot hold", "[generator][cpp][diagnostics][struct_array]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "struct TD_TYPED_TENSORDICT Rows {\n"
      "  float x;\n"
      "  std::vector<float> values;\n"
      "  float* p;\n"
      "  uint32_t u;\n"
      "  char c;\n"
      "  const float k = 1;\n"
      " private:\n"
      "  float hidden;\n"
      "};\n"
      "struct TD_TYPED_TENSORDICT Virt {\n"
      "  virtual ~Virt();\n"
      "  float x;\n"
      "};\n"
      "struct TD_TYPED_TENSORDICT Clash { float to_struct_array; };\n"
      "}\n");
  require_error(c, 8, 3, "field 'values' has the unsupported type 'std::vector<float>'");
  require_error(c, 9, 3, "field 'p' has the unsupported type 'float *'");
  require_error(c, 10, 3, "field 'u' has the unsupported type 'uint32_t' (a plain member is a bool, int8_t, uint8_t");
  require_error(c, 11, 3, "field 'c' has the unsupported type 'char'");
  require_error(c, 12, 9, "field 'k' is const or volatile");
  require_error(c, 14, 9, "field 'hidden' of the plain-data struct 'Rows' is not public");
  require_error(c, 16, 28, "plain-data struct 'Virt' must be trivially copyable and standard layout");
  require_error(c, 20, 42, "field name 'to_struct_array' clashes with the member 'to_struct_array' of a class "
                           "generated from a plain-data struct: keep the key and rename its accessors with "
                           "TD_CPP_NAME(\"to_struct_array_field\")");
}

TEST_CASE("C++ diagnostics: a plain-data struct named like its generated class", "[generator][cpp][diagnostics][struct_array]") {
  // The generated header includes the struct's header: same::Pose would be declared twice.
  const Checked c = generate(
      "namespace same {\n"
      "struct TD_TYPED_TENSORDICT Pose { float x; };\n"
      "}\n");
  require_error(c, 6, 28, "struct '::same::Pose' and the class generated from it have one name");
}

TEST_CASE("C++ diagnostics: an annotated class template", "[generator][cpp][diagnostics]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "template <class T>\n"
      "struct TD_TENSORCLASS A {\n"
      "  td::schema::Tensor<T> x;\n"
      "};\n}\n");
  require_error(c, 7, 23, "a class template cannot be a schema");
}

TEST_CASE("C++ diagnostics: a duplicate inherited field", "[generator][cpp][diagnostics]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "struct TD_TYPED_TENSORDICT Step { td::schema::Tensor<float> reward; };\n"
      "struct TD_TYPED_TENSORDICT Next : Step {\n"
      "  td::schema::Tensor<float> reward;\n"
      "};\n}\n");
  require_error(c, 8, 29, "duplicate field 'reward' (inherited from 'Step', first declared at " + c.header + ":6:");
}

TEST_CASE("C++ diagnostics: a name clash with a generated member", "[generator][cpp][diagnostics]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "struct TD_TYPED_TENSORDICT A {\n"
      "  td::schema::Tensor<float> keys;\n"
      "};\n}\n");
  require_error(c, 7, 29, "field name 'keys' clashes with the member 'keys'");
  // The escape is named in the header's own syntax.
  CHECK(c.err.find("keep the key and rename its accessors with TD_CPP_NAME(\"keys_field\")") != std::string::npos);
}

TEST_CASE("C++ diagnostics: accessor names and defaults and named dims used wrongly", "[generator][cpp][diagnostics]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "int runtime_value();\n"
      "struct TD_TENSORCLASS A {\n"
      "  TD_DIM(N);\n"
      "  td::schema::Tensor<float, N> x = 0.5;\n"
      "  TD_OPTIONAL td::schema::Tensor<float> y = runtime_value();\n"
      "  TD_OPTIONAL TD_CPP_NAME(\"size\") td::schema::Tensor<float> z;\n"
      "  TD_OPTIONAL std::string s = 3;\n"
      "  TD_OPTIONAL TD_CPP_NAME(\"\") td::schema::Tensor<float> w;\n"
      "};\n"
      "struct Plain { TD_DIM(M); };\n"
      "}\n");
  require_error(c, 9, 36, "field 'x' has a default but is required");
  require_error(c, 10, 45, "the default of field 'y' must be a constant number, true/false or a string literal");
  require_error(c, 11, 15, "C++ name 'size' of field 'z' clashes with the member 'size'");
  require_error(c, 13, 15, "TD_CPP_NAME needs a name");
  require_error(c, 15, 23, "TD_DIM(M) declares a named dim of a schema struct: put it inside one");
  // Clang's own error for the string initialized from an int comes in the same run.
  CHECK(c.err.find(":12:") != std::string::npos);
}

TEST_CASE("C++ diagnostics: a missing nested class", "[generator][cpp][diagnostics]") {
  SECTION("a struct that is not a schema") {
    const Checked c = generate(
        "namespace n::schema {\n"
        "struct Plain { int x; };\n"
        "struct TD_TENSORCLASS A {\n"
        "  Plain inner;\n"
        "};\n}\n");
    require_error(c, 8, 3, "field 'inner' has the type 'n::schema::Plain', which is not a schema struct");
  }
  SECTION("a class that is not declared at all (Clang's own error, same format)") {
    const Checked c = generate(
        "namespace n::schema {\n"
        "struct TD_TENSORCLASS A {\n"
        "  Observation obs;\n"
        "};\n}\n");
    require_error(c, 7, 3, "unknown type name 'Observation'");
  }
  SECTION("a base that is not a schema") {
    const Checked c = generate(
        "namespace n::schema {\n"
        "struct Plain {};\n"
        "struct TD_TENSORCLASS A : Plain {};\n"
        "}\n");
    require_error(c, 7, 27, "base 'n::schema::Plain' of schema struct 'A' is not a schema struct");
  }
}

TEST_CASE("C++ diagnostics: shapes, markers and namespaces used wrongly", "[generator][cpp][diagnostics]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "struct TD_TENSORCLASS A {\n"
      "  td::schema::Tensor<float, 2, td::schema::any_shape> x;\n"
      "  td::schema::Tensor<float, -3> y;\n"
      "};\n"
      "struct Plain { TD_OPTIONAL int z; };\n"
      "struct TD_TENSORCLASS TD_NAMESPACE(\"other\") B {};\n"
      "struct TD_TENSORCLASS C : A, B {};\n"
      "}\n");
  require_error(c, 7, 32, "any_shape stands for the whole event shape");
  require_error(c, 8, 29, "event shape sizes must be >= 0, or td::schema::any_size; got -3");
  require_error(c, 10, 32, "field 'z' has a tdgen marker, but its struct is not a schema");
  require_error(c, 11, 45, "generates into namespace 'other', but 'A' of the same header into 'n'");
  require_error(c, 12, 30, "extends more than one struct");
}

TEST_CASE("C++ diagnostics: every error of a header in one run, Clang's and tdgen's", "[generator][cpp][diagnostics]") {
  const Checked c = generate(
      "namespace n::schema {\n"
      "struct TD_TENSORCLASS A {\n"
      "  td::schema::Tensor<char16_t> a;\n"   // tdgen: dtype
      "  Missing b;\n"                        // Clang: unknown type
      "  std::vector<int> c;\n"               // tdgen: type
      "};\n"
      "struct TD_TYPED_TENSORDICT B {\n"
      "  std::string d;\n"                    // shared check: non-tensor
      "  td::schema::Tensor<float> size;\n"   // shared check: clash
      "};\n}\n");
  INFO(c.err);
  size_t errors = 0;
  for (size_t at = c.err.find(": error: "); at != std::string::npos; at = c.err.find(": error: ", at + 1)) ++errors;
  CHECK(errors == 5);
  for (int line : {7, 8, 9, 12, 13}) CHECK(c.err.find(c.header + ":" + std::to_string(line) + ":") != std::string::npos);
  CHECK(c.exit_code == 1);
  CHECK_FALSE(c.wrote_anything);
}

TEST_CASE("C++ diagnostics: a header that cannot be read, and mixed inputs", "[generator][cpp][diagnostics]") {
  TempDir dir;
  auto missing = run({"--out", dir.path("out"), "--templates", kTemplates, dir.path("nope.h")});
  CHECK(missing.exit_code == 1);
  CHECK(missing.err.find("cannot read schema header '" + dir.path("nope.h") + "'") != std::string::npos);
  auto mixed = run({"--check", std::string(TENSORDICT_SOURCE_DIR) + "/schemas/replay.h",
                    std::string(TENSORDICT_SOURCE_DIR) + "/schemas/replay.yaml"});
  CHECK(mixed.exit_code == 2);
  CHECK(mixed.err.find("YAML and C++ schemas in one run") != std::string::npos);
}
