#pragma once
// The C++ frontend's AST pass: finds the marked schema structs of a parsed translation unit and
// builds the IR from them, one SchemaFile per header that declares any (the roots always have
// one), then runs the shared checks. A struct whose fields are all plain members is plain data:
// its class records the struct and the #include that reaches it (ir.h PlainStruct). Every error
// goes to Clang's DiagnosticsEngine at the offending token, the checks' too, so all of them print
// with Clang's caret.

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <clang/AST/ASTContext.h>
#include <clang/Basic/Diagnostic.h>

#include <tdgen/ir.h>

namespace tdgen::cpp {

struct RootHeader {
  /// The path as given (what diagnostics and the generated header's first line show).
  std::string path;
  const clang::FileEntry* entry = nullptr;
};

/// How a generated header #includes a schema header (for plain-data structs, ir.h PlainStruct).
using IncludeSpelling = std::function<std::string(const clang::FileEntry&)>;

/// The resolved module of the translation unit `context`, or null after reporting errors to
/// `diags`.
std::shared_ptr<const Module> collect_schemas(clang::ASTContext& context, clang::DiagnosticsEngine& diags,
                                              const std::vector<RootHeader>& roots, IncludeSpelling include_spelling);

}  // namespace tdgen::cpp
