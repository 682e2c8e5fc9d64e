#pragma once
// The YAML frontend: reads schema files (docs/schema-format.md) into the IR. It rejects what
// YAML alone can tell is wrong (syntax, unknown keys, wrong value kinds, unknown dtypes, bad
// shapes, cyclic imports); checks that need the whole module (names, inheritance) are in
// sema.h, shared with every frontend.

#include <string>
#include <vector>

#include <tdgen/ir.h>

namespace tdgen {

struct YamlFrontendOptions {
  /// Directories searched for imports after the importing file's own directory.
  std::vector<std::string> import_dirs;
};

/// Reads `schemas` (the roots) and every file they import. Throws Diagnostic.
Module load_yaml_module(const std::vector<std::string>& schemas, const YamlFrontendOptions& options);

/// Reads one schema file from `text` (for tests); imports are recorded, not followed.
SchemaFile parse_yaml_schema(const std::string& text, const std::string& path);

}  // namespace tdgen
