// Runs Clang on the schema headers: one translation unit that includes them all (the marker
// header and shared includes are parsed once), function bodies skipped, every file read
// recorded for the depfile, diagnostics printed as Clang prints them.

#include <tdgen/cpp_frontend.h>

#include <filesystem>
#include <ostream>

#include <clang/AST/ASTConsumer.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/FrontendAction.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Frontend/Utils.h>
#include <clang/Lex/HeaderSearch.h>
#include <clang/Lex/Preprocessor.h>
#include <clang/Tooling/CompilationDatabase.h>
#include <clang/Tooling/Tooling.h>
#include <llvm/Support/raw_ostream.h>

#include "display_path.h"
#include "schema_collector.h"

#ifndef TDGEN_CLANG_RESOURCE_DIR
#define TDGEN_CLANG_RESOURCE_DIR ""
#endif
#ifndef TDGEN_MARKER_INCLUDE_DIR
#define TDGEN_MARKER_INCLUDE_DIR ""
#endif

namespace tdgen {

namespace fs = std::filesystem;

namespace {

// The translation unit tdgen parses: one #include per schema header. Its name cannot clash
// with a user's file in practice and never appears in a diagnostic about a schema.
constexpr const char* kMainFile = "tdgen-schemas.cpp";

// Clang's text diagnostics, each printed to `out` as it comes (so Clang's closing "N errors
// generated." follows them), minus the include-stack line naming tdgen's own main file.
class DiagnosticPrinter : public clang::DiagnosticConsumer {
 public:
  explicit DiagnosticPrinter(std::ostream& out)
      : out_(out), stream_(buffer_), text_(stream_, new clang::DiagnosticOptions()) {}

  void BeginSourceFile(const clang::LangOptions& lang, const clang::Preprocessor* pp) override {
    text_.BeginSourceFile(lang, pp);
  }
  void EndSourceFile() override { text_.EndSourceFile(); }

  void HandleDiagnostic(clang::DiagnosticsEngine::Level level, const clang::Diagnostic& info) override {
    DiagnosticConsumer::HandleDiagnostic(level, info);  // the counts Clang's summary reads
    text_.HandleDiagnostic(level, info);
    stream_.flush();
    std::string line;
    for (size_t start = 0; start < buffer_.size();) {
      size_t end = buffer_.find('\n', start);
      end = end == std::string::npos ? buffer_.size() : end + 1;
      line.assign(buffer_, start, end - start);
      start = end;
      const bool names_main = line.find(std::string(kMainFile) + ":") != std::string::npos &&
                              (line.rfind("In file included from ", 0) == 0 || line.find_first_not_of(' ') == line.find("from "));
      if (!names_main) out_ << relative_paths(line);
    }
    out_.flush();
    buffer_.clear();
  }

 private:
  // The paths a diagnostic line starts with, or names after "from " (the include stack), as
  // display_path() shows them.
  static std::string relative_paths(std::string line) {
    for (const char* lead : {"", "from "}) {
      const size_t at = *lead ? line.find(lead) : 0;
      if (at == std::string::npos) continue;
      const size_t path = at + std::string(lead).size();
      line = line.substr(0, path) + cpp::display_path(line.substr(path));
    }
    return line;
  }

  std::ostream& out_;
  std::string buffer_;
  llvm::raw_string_ostream stream_;
  clang::TextDiagnosticPrinter text_;
};

class FileList : public clang::DependencyCollector {
 public:
  bool needSystemDependencies() override { return true; }
};

struct ParseState {
  std::vector<std::string> headers;  // absolute, as the main file includes them
  std::vector<std::string> given;    // as given on the command line (what diagnostics show)
  FileList dependencies;
  std::shared_ptr<const Module> module;
};

class SchemaConsumer : public clang::ASTConsumer {
 public:
  SchemaConsumer(clang::CompilerInstance& ci, ParseState& state) : ci_(ci), state_(state) {}

  void HandleTranslationUnit(clang::ASTContext& context) override {
    // After Clang's own errors too: the collector skips the declarations Clang marked invalid
    // and reports the rest, so one run shows every error.
    std::vector<cpp::RootHeader> roots;
    for (size_t i = 0; i < state_.headers.size(); ++i) {
      auto entry = ci_.getFileManager().getFile(state_.headers[i]);
      roots.push_back(cpp::RootHeader{state_.given[i], entry ? *entry : nullptr});
    }
    state_.module = cpp::collect_schemas(context, ci_.getDiagnostics(), roots,
                                         [this](const clang::FileEntry& entry) { return include_spelling(entry); });
  }

  // How the generated header includes `entry`: relative to the include directory of this parse
  // that gives the shortest path (the target's include directories, under tensordict_generate),
  // else by absolute path.
  std::string include_spelling(const clang::FileEntry& entry) const {
    // Relative paths are the compile's (the database's directory under -p).
    const llvm::ErrorOr<std::string> vfs_cwd = ci_.getFileManager().getVirtualFileSystem().getCurrentWorkingDirectory();
    const fs::path cwd = vfs_cwd ? fs::path(*vfs_cwd) : fs::current_path();
    const fs::path file = (cwd / entry.getName().str()).lexically_normal();
    std::string best;
    const clang::HeaderSearch& search = ci_.getPreprocessor().getHeaderSearchInfo();
    for (auto dir = search.search_dir_begin(); dir != search.search_dir_end(); ++dir) {
      if (!dir->isNormalDir()) continue;
      fs::path root = (cwd / dir->getName().str()).lexically_normal();
      if (!root.has_filename()) root = root.parent_path();  // "dir/" -> "dir"
      const fs::path relative = file.lexically_relative(root);
      if (relative.empty() || *relative.begin() == "..") continue;
      if (best.empty() || relative.string().size() < best.size()) best = relative.generic_string();
    }
    return best.empty() ? file.generic_string() : best;
  }

 private:
  clang::CompilerInstance& ci_;
  ParseState& state_;
};

class SchemaAction : public clang::ASTFrontendAction {
 public:
  explicit SchemaAction(ParseState& state) : state_(state) {}

  bool BeginSourceFileAction(clang::CompilerInstance& ci) override {
    // Only declarations matter: skipping bodies halves the parse of heavy includes (ATen).
    ci.getFrontendOpts().SkipFunctionBodies = true;
    // Attached here, before the first #include; from CreateASTConsumer it would see nothing.
    state_.dependencies.attachToPreprocessor(ci.getPreprocessor());
    return true;
  }

  std::unique_ptr<clang::ASTConsumer> CreateASTConsumer(clang::CompilerInstance& ci, llvm::StringRef) override {
    return std::make_unique<SchemaConsumer>(ci, state_);
  }

 private:
  ParseState& state_;
};

class SchemaActionFactory : public clang::tooling::FrontendActionFactory {
 public:
  explicit SchemaActionFactory(ParseState& state) : state_(state) {}
  std::unique_ptr<clang::FrontendAction> create() override { return std::make_unique<SchemaAction>(state_); }

 private:
  ParseState& state_;
};

// The flags of `header`'s entry in the compilation database at `dir` (inferred from a nearby
// source file for a header), without the input, the output and -c. Sets `directory`.
std::vector<std::string> database_flags(const std::string& dir, const std::string& header, std::string& directory,
                                        std::ostream& err, bool& ok) {
  std::string message;
  std::unique_ptr<clang::tooling::CompilationDatabase> db =
      clang::tooling::CompilationDatabase::loadFromDirectory(dir, message);
  if (!db) {
    err << "tdgen: -p " << dir << ": " << message << "\n";
    ok = false;
    return {};
  }
  db = clang::tooling::inferMissingCompileCommands(std::move(db));
  const std::vector<clang::tooling::CompileCommand> commands = db->getCompileCommands(header);
  if (commands.empty()) {
    err << "tdgen: -p " << dir << ": no compile command for '" << header << "' or a file near it\n";
    ok = false;
    return {};
  }
  const clang::tooling::CompileCommand& cmd = commands.front();
  directory = cmd.Directory;
  std::vector<std::string> out;
  const std::vector<std::string>& line = cmd.CommandLine;
  for (size_t i = 1; i < line.size(); ++i) {
    const std::string& a = line[i];
    if (a == "-o") {
      ++i;
      continue;
    }
    if (a == "-c" || a == cmd.Filename || a == "--") continue;
    out.push_back(a);
  }
  return out;
}

}  // namespace

std::string default_resource_dir() { return TDGEN_CLANG_RESOURCE_DIR; }
std::string default_marker_include_dir() {
#ifdef TDGEN_INSTALL_INCLUDE_RELDIR
  // Installed: <prefix>/bin/tdgen uses <prefix>/include; in the build tree, the source tree's.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = (exe.parent_path() / TDGEN_INSTALL_INCLUDE_RELDIR).lexically_normal();
    if (fs::is_regular_file(installed / "tensordict" / "schema.h", ec)) return installed.string();
  }
#endif
  return TDGEN_MARKER_INCLUDE_DIR;
}

CppModule load_cpp_module(const std::vector<std::string>& headers, const CppFrontendOptions& options,
                          std::ostream& err) {
  CppModule result;
  for (const std::string& h : headers) {
    if (!fs::is_regular_file(h)) {
      err << "tdgen: cannot read schema header '" << h << "'\n";
      return result;
    }
  }
  ParseState state;
  state.given = headers;
  std::string directory = fs::current_path().string();
  std::vector<std::string> flags;
  if (!options.compile_commands_dir.empty()) {
    bool ok = true;
    flags = database_flags(options.compile_commands_dir, fs::absolute(headers.front()).string(), directory, err, ok);
    if (!ok) return result;
  }
  // Included by absolute path: the compile may run in the database's directory, not here.
  std::string main_text;
  for (const std::string& h : headers) {
    state.headers.push_back(fs::absolute(h).lexically_normal().string());
    main_text += "#include \"" + state.headers.back() + "\"\n";
  }
  flags.insert(flags.end(), {"-x", "c++", "-std=c++17", "-DTDGEN_PARSING=1", "-ferror-limit=0", "-w",
                             "-fno-color-diagnostics", "-fno-diagnostics-show-option"});
  const std::string resource_dir = options.resource_dir.empty() ? default_resource_dir() : options.resource_dir;
  if (!resource_dir.empty()) flags.push_back("-resource-dir=" + resource_dir);
  for (const std::string& d : options.include_dirs) flags.push_back("-I" + d);
  for (const std::string& d : options.defines) flags.push_back("-D" + d);
  flags.insert(flags.end(), options.extra_args.begin(), options.extra_args.end());
  const std::string marker_dir = options.marker_include_dir.empty() ? default_marker_include_dir()
                                                                    : options.marker_include_dir;
  if (!marker_dir.empty()) flags.insert(flags.end(), {"-idirafter", marker_dir});

  const std::string main_path = (fs::path(directory) / kMainFile).string();
  clang::tooling::FixedCompilationDatabase db(directory, flags);
  clang::tooling::ClangTool tool(db, {main_path});
  tool.mapVirtualFile(main_path, main_text);
  tool.setPrintErrorMessage(false);
  DiagnosticPrinter printer(err);
  tool.setDiagnosticConsumer(&printer);
  SchemaActionFactory factory(state);
  const int status = tool.run(&factory);
  if (status != 0 || !state.module) return result;
  result.module = state.module;
  for (const std::string& file : state.dependencies.getDependencies()) {
    if (fs::path(file).filename() == kMainFile) continue;
    result.dependencies.push_back((fs::path(directory) / file).lexically_normal().string());
  }
  return result;
}

}  // namespace tdgen
