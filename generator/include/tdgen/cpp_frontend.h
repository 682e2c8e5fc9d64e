#pragma once
// The C++ frontend: schema structs annotated with <tensordict/schema.h>, parsed by Clang
// LibTooling into the same IR the YAML frontend builds (docs/schema-format.md). Only built with
// TENSORDICT_WITH_CLANG (a separate library, tdgen_clang); the rest of tdgen does not see Clang.
//
// Every error, the frontend's and the shared checks' (sema.h), is printed the way Clang prints
// its own: `file:line:col: error: ...` in the user's header, with the source line and a caret.
// All errors of a run are printed, not only the first.

#include <iosfwd>
#include <memory>
#include <string>
#include <vector>

#include <tdgen/ir.h>

namespace tdgen {

struct CppFrontendOptions {
  /// -I: include directories, searched as the compiler does.
  std::vector<std::string> include_dirs;
  /// -D: macro definitions ("NAME" or "NAME=VALUE").
  std::vector<std::string> defines;
  /// Compiler arguments after `--`, passed on as given (e.g. -std=c++20, -isystem DIR).
  std::vector<std::string> extra_args;
  /// -p: a directory with compile_commands.json; the flags of the first header's entry (or of
  /// the nearest source file, as clangd infers them) are used.
  std::string compile_commands_dir;
  /// Clang's resource directory (its stddef.h and friends). Empty: the one found when tdgen
  /// was configured.
  std::string resource_dir;
  /// Where <tensordict/schema.h> is found when the flags do not say (searched last).
  std::string marker_include_dir;
};

struct CppModule {
  /// Checked and resolved (sema.h); null when errors were printed.
  std::shared_ptr<const Module> module;
  /// Every file the parse read (system headers included), for depfiles.
  std::vector<std::string> dependencies;
};

/// Parses `headers` (one translation unit) and checks the result. Diagnostics go to `err`.
CppModule load_cpp_module(const std::vector<std::string>& headers, const CppFrontendOptions& options,
                          std::ostream& err);

/// The resource directory and marker include directory baked in at configure time.
std::string default_resource_dir();
std::string default_marker_include_dir();

}  // namespace tdgen
