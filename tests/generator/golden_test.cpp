// Golden-output tests: each tests/generator/golden/<stem>.yaml must generate exactly
// golden/<stem>.td.h.golden. After an intended change of the output, refresh the expected files
// with `TDGEN_UPDATE_GOLDEN=1 ctest -R generator_tests` and review the diff.
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include <tdgen/code_template.h>

#include "generator/support.h"

namespace fs = std::filesystem;
using tdgen_test::read;
using tdgen_test::run;
using tdgen_test::TempDir;

namespace {
const std::string kGoldenDir = std::string(TENSORDICT_SOURCE_DIR) + "/tests/generator/golden";
const std::string kTemplates = std::string(TENSORDICT_SOURCE_DIR) + "/templates";

std::vector<std::string> golden_schemas() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kGoldenDir))
    if (e.path().extension() == ".yaml") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}
}  // namespace

TEST_CASE("generated headers match the golden files", "[generator][golden]") {
  const bool update = std::getenv("TDGEN_UPDATE_GOLDEN") != nullptr;
  const auto schemas = golden_schemas();
  REQUIRE(schemas.size() >= 3);
  for (const std::string& schema : schemas) {
    TempDir out;
    auto result = run({"--out", out.path(), "--templates", kTemplates, schema});
    INFO(schema << ": " << result.err);
    REQUIRE(result.exit_code == 0);
    const std::string stem = fs::path(schema).stem().string();
    const std::string generated = read(out.path(stem + ".td.h"));
    const std::string golden_path = kGoldenDir + "/" + stem + ".td.h.golden";
    if (update) std::ofstream(golden_path, std::ios::binary) << generated;
    CHECK(generated == read(golden_path));
  }
}

TEST_CASE("output is deterministic and unchanged files are not rewritten", "[generator][golden]") {
  TempDir out;
  const std::string schema = kGoldenDir + "/transition.yaml";
  REQUIRE(run({"--out", out.path(), "--templates", kTemplates, schema}).exit_code == 0);
  const std::string header = out.path("transition.td.h");
  const std::string first = read(header);
  const auto stamp = fs::last_write_time(header);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  REQUIRE(run({"--out", out.path(), "--templates", kTemplates, schema}).exit_code == 0);
  CHECK(read(header) == first);
  CHECK(fs::last_write_time(header) == stamp);
  // A changed file is rewritten.
  std::ofstream(header, std::ios::binary) << "stale";
  REQUIRE(run({"--out", out.path(), "--templates", kTemplates, schema}).exit_code == 0);
  CHECK(read(header) == first);
}

TEST_CASE("check mode writes nothing and the depfile lists schema, imports and templates", "[generator][golden]") {
  TempDir out;
  const std::string schema = kGoldenDir + "/transition.yaml";
  REQUIRE(run({"--check", "--out", out.path(), schema}).exit_code == 0);
  CHECK_FALSE(fs::exists(out.path("transition.td.h")));

  const std::string depfile = out.path("deps/transition.d");
  REQUIRE(run({"--out", out.path(), "--templates", kTemplates, "--depfile", depfile, schema}).exit_code == 0);
  const std::string deps = read(depfile);
  CHECK_THAT(deps, Catch::StartsWith(fs::absolute(out.path("transition.td.h")).lexically_normal().string() + ":"));
  CHECK_THAT(deps, Catch::Contains("golden/transition.yaml \\\n"));
  CHECK_THAT(deps, Catch::Contains("golden/sensors.yaml \\\n"));  // imported
  CHECK_THAT(deps, Catch::Contains("templates/class.tmpl"));
}

TEST_CASE("a missing templates directory is an error", "[generator][golden]") {
  TempDir out;
  auto result = run({"--out", out.path(), "--templates", out.path("none"), kGoldenDir + "/transition.yaml"});
  CHECK(result.exit_code == 1);
  CHECK_THAT(result.err, Catch::Contains("cannot read template"));
}

TEST_CASE("templates: a placeholder without a value and an unused value are errors", "[generator][templates]") {
  tdgen::CodeTemplate t("t.tmpl", "a\n{{X}} and {{Y}}\n");
  CHECK(t.render({{"X", "1"}, {"Y", "2"}}) == "a\n1 and 2\n");
  REQUIRE_THROWS_AS(t.render({{"X", "1"}}), tdgen::TemplateError);
  REQUIRE_THROWS_WITH(t.render({{"X", "1"}}), Catch::Contains("t.tmpl:2: placeholder {{Y}} has no value"));
  REQUIRE_THROWS_WITH(t.render({{"X", "1"}, {"Y", "2"}, {"Z", "3"}}), Catch::Contains("value 'Z' is not used"));
  REQUIRE_THROWS_WITH(tdgen::CodeTemplate("u.tmpl", "{{X").render({}), Catch::Contains("u.tmpl:1: unterminated placeholder"));
}

TEST_CASE("templates: substituted text is never scanned for placeholders", "[generator][templates]") {
  tdgen::CodeTemplate t("t.tmpl", "// {{DOC}}\n");
  CHECK(t.render({{"DOC", "uses {{NOT_A_PLACEHOLDER}}"}}) == "// uses {{NOT_A_PLACEHOLDER}}\n");
}

TEST_CASE("user doc text cannot escape its comment", "[generator][golden]") {
  TempDir dir;
  const std::string schema = dir.write("doc.yaml",
                                       "classes:\n  A:\n    kind: tensorclass\n    doc: \"line one\\nline two \\\\\\n}; int evil;\"\n"
                                       "    fields:\n      x: {doc: \"trailing backslash \\\\\"}\n");
  auto result = run({"--out", dir.path("out"), "--templates", kTemplates, schema});
  INFO(result.err);
  REQUIRE(result.exit_code == 0);
  const std::string header = read(dir.path("out/doc.td.h"));
  CHECK_THAT(header, Catch::Contains("/// line one\n/// line two\n/// }; int evil;\n"));
  CHECK_THAT(header, Catch::Contains("  /// trailing backslash\n"));
}
