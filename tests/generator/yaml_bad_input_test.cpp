// Hostile YAML schemas (issue 17): nesting 100,000 levels deep and alias bombs (a few lines
// naming billions of nodes). Each is a diagnostic naming the file, exit code 1, never a stack
// overflow or a walk through every aliased node.
#include <catch2/catch.hpp>

#include <string>

#include "generator/support.h"

using tdgen_test::diagnose;

namespace {

// Nine levels of nine aliases each: 9^9 (387 million) strings if expanded.
std::string alias_bomb() {
  std::string text = "bomb0: &l0 [\"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\", \"lol\"]\n";
  for (int i = 1; i < 9; ++i) {
    const std::string prev = "*l" + std::to_string(i - 1);
    text += "bomb" + std::to_string(i) + ": &l" + std::to_string(i) + " [" + prev;
    for (int j = 1; j < 9; ++j) text += ", " + prev;
    text += "]\n";
  }
  return text;
}

}  // namespace

TEST_CASE("YAML nested 100000 levels deep is a diagnostic, not a stack overflow", "[generator][bad_input]") {
  const int depth = 100000;
  for (const std::string& nesting : {std::string(depth, '[') + std::string(depth, ']'),
                                     [&] {
                                       std::string s;
                                       for (int i = 0; i < depth; ++i) s += "{a: ";
                                       return s + "1" + std::string(depth, '}');
                                     }()}) {
    CHECK_THAT(diagnose("namespace: t\nclasses:\n  A:\n    kind: tensorclass\n    fields:\n      x: " + nesting + "\n"),
               Catch::Contains("deep"));
  }
}

TEST_CASE("an alias bomb is refused without expanding it", "[generator][bad_input]") {
  const std::string bomb = alias_bomb();
  // Where the schema expects a map, a list, a string and a default value.
  diagnose("namespace: t\n" + bomb + "classes: {}\n");
  diagnose(bomb + "namespace: t\nclasses:\n  A: *l8\n");
  diagnose(bomb + "namespace: t\nclasses:\n  A:\n    kind: tensorclass\n    fields:\n      x: {dtype: float32, shape: *l8}\n");
  diagnose(bomb + "namespace: t\nclasses:\n  A:\n    kind: tensorclass\n    doc: *l8\n    fields: {}\n");
  diagnose(bomb + "namespace: t\nclasses:\n  A:\n    kind: tensorclass\n    fields:\n      x: {dtype: float32, optional: true, default: *l8}\n");
}
