#include <tdgen/driver.h>

#include <filesystem>
#include <fstream>
#include <algorithm>
#include <memory>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include <tdgen/code_template.h>
#include <tdgen/diagnostic.h>
#include <tdgen/emitter.h>
#include <tdgen/sema.h>
#include <tdgen/yaml_frontend.h>
#ifdef TDGEN_WITH_CLANG
#include <tdgen/cpp_frontend.h>
#endif

#ifndef TDGEN_DEFAULT_TEMPLATES_DIR
#define TDGEN_DEFAULT_TEMPLATES_DIR "templates"
#endif

namespace tdgen {

namespace fs = std::filesystem;

namespace {

const char* const kUsageText =
    "usage: tdgen [options] SCHEMA... [-- COMPILER-ARGS...]\n"
    "Generates one C++ header <stem>.td.h per schema: a YAML file (.yaml, .yml) or a C++ header of\n"
    "annotated structs (.h, .hh, .hpp, .hxx; see docs/schema-format.md). One run reads one kind.\n"
    "options:\n"
    "  --out DIR           directory for the generated headers (required unless --check)\n"
    "  --check             only check the schemas, write nothing\n"
    "  --python            also write <stem>.td.py.h: the classes' Python bindings (pybind11)\n"
    "  -I DIR, --import-dir DIR\n"
    "                      YAML: also look for imported schemas in DIR (after the importing\n"
    "                      file's dir); C++: an include directory\n"
    "  -D NAME[=VALUE]     C++: define a macro for the parse\n"
    "  -p DIR              C++: take the compile flags from DIR/compile_commands.json\n"
    "  --resource-dir DIR  C++: Clang's resource directory (default: @RESOURCE_DIR@)\n"
    "  -- ARGS...          C++: further compiler arguments, as given (e.g. -std=c++20)\n"
    "  --templates DIR     templates directory (default: @TEMPLATES@)\n"
    "  --depfile FILE      write a make-format depfile: each header depends on its schema,\n"
    "                      the files it reads (YAML imports, or every header the C++ parse\n"
    "                      read) and the templates\n"
    "  -h, --help          show this help\n";

// The help names the templates this tdgen would use: the installed ones for an installed tdgen.
std::string usage() {
  std::string text = kUsageText;
  const std::string marker = "@TEMPLATES@";
  text.replace(text.find(marker), marker.size(), default_templates_dir());
  const std::string resource = "@RESOURCE_DIR@";
#ifdef TDGEN_WITH_CLANG
  text.replace(text.find(resource), resource.size(), default_resource_dir());
#else
  text.replace(text.find(resource), resource.size(), "none: tdgen was built without the C++ frontend");
#endif
  return text;
}

// Make-format escaping: spaces and '#' get a backslash, '$' doubles.
std::string make_escape(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (c == ' ' || c == '#') out += '\\';
    if (c == '$') out += '$';
    out += c;
  }
  return out;
}

// Writes `content` unless the file already holds exactly it (keeps timestamps, so nothing
// that includes an unchanged header is rebuilt).
void write_if_changed(const fs::path& path, const std::string& content) {
  {
    std::ifstream in(path, std::ios::binary);
    if (in) {
      std::ostringstream old;
      old << in.rdbuf();
      if (old.str() == content) return;
    }
  }
  const fs::path tmp = path.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) throw std::runtime_error("cannot write '" + tmp.string() + "'");
    out << content;
    if (!out.flush()) throw std::runtime_error("cannot write '" + tmp.string() + "'");
  }
  fs::rename(tmp, path);
}

void collect_inputs(const Module& module, int file_index, std::set<int>& seen) {
  if (!seen.insert(file_index).second) return;
  for (const auto& imp : module.files[file_index].imports) collect_inputs(module, imp.file_index, seen);
}

bool parse_args(const std::vector<std::string>& args, DriverOptions& opt, std::ostream& out, std::ostream& err,
                bool& help) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& dest) {
      if (i + 1 >= args.size()) {
        err << "tdgen: " << a << " needs a value\n";
        return false;
      }
      dest = args[++i];
      return true;
    };
    if (a == "-h" || a == "--help") {
      out << usage();
      help = true;
      return true;
    } else if (a == "--out") {
      if (!value(opt.out_dir)) return false;
    } else if (a == "--templates") {
      if (!value(opt.templates_dir)) return false;
    } else if (a == "--depfile") {
      if (!value(opt.depfile)) return false;
    } else if (a == "-I" || a == "--import-dir") {
      std::string dir;
      if (!value(dir)) return false;
      opt.import_dirs.push_back(dir);
    } else if (a == "-D") {
      std::string def;
      if (!value(def)) return false;
      opt.defines.push_back(def);
    } else if (a.size() > 2 && a.rfind("-D", 0) == 0) {
      opt.defines.push_back(a.substr(2));
    } else if (a.size() > 2 && a.rfind("-I", 0) == 0) {
      opt.import_dirs.push_back(a.substr(2));
    } else if (a == "-p") {
      if (!value(opt.compile_commands_dir)) return false;
    } else if (a == "--resource-dir") {
      if (!value(opt.resource_dir)) return false;
    } else if (a == "--") {
      opt.compiler_args.assign(args.begin() + static_cast<std::ptrdiff_t>(i) + 1, args.end());
      break;
    } else if (a == "--check") {
      opt.check_only = true;
    } else if (a == "--python") {
      opt.python = true;
    } else if (a.size() > 1 && a[0] == '-') {
      err << "tdgen: unknown option '" << a << "'\n" << usage();
      return false;
    } else {
      opt.schemas.push_back(a);
    }
  }
  if (opt.schemas.empty()) {
    err << "tdgen: no schema given\n" << usage();
    return false;
  }
  if (!opt.check_only && opt.out_dir.empty()) {
    err << "tdgen: --out DIR is required (or --check)\n";
    return false;
  }
  if (opt.templates_dir.empty()) opt.templates_dir = default_templates_dir();
  return true;
}

}  // namespace

std::string default_templates_dir() {
#ifdef TDGEN_INSTALL_TEMPLATES_RELDIR
  // Installed: <prefix>/bin/tdgen finds <prefix>/share/tensordict/templates next to itself, so
  // an installed tree works wherever it is moved. In the build tree that directory does not
  // exist and the configured default (the source tree's templates/) applies.
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    const fs::path installed = (exe.parent_path() / TDGEN_INSTALL_TEMPLATES_RELDIR).lexically_normal();
    if (fs::is_directory(installed, ec)) return installed.string();
  }
#endif
  return TDGEN_DEFAULT_TEMPLATES_DIR;
}

namespace {

bool has_extension(const std::string& path, std::initializer_list<const char*> extensions) {
  const std::string ext = fs::path(path).extension().string();
  for (const char* e : extensions)
    if (ext == e) return true;
  return false;
}

bool is_cpp_schema(const std::string& path) { return has_extension(path, {".h", ".hh", ".hpp", ".hxx"}); }

// The checked module and, per root, the files its output depends on (besides the templates).
struct LoadedSchemas {
  std::shared_ptr<const Module> module;
  std::map<int, std::vector<std::string>> inputs;
};

LoadedSchemas load_yaml(const DriverOptions& opt) {
  YamlFrontendOptions frontend;
  frontend.import_dirs = opt.import_dirs;
  LoadedSchemas out;
  out.module = resolve(load_yaml_module(opt.schemas, frontend));
  for (int root : out.module->roots) {
    // The root schema first, then imports in load order.
    std::set<int> files;
    collect_inputs(*out.module, root, files);
    for (int f : files) out.inputs[root].push_back(out.module->files[f].path);
  }
  return out;
}

// Null module: the diagnostics are printed already.
LoadedSchemas load_cpp(const DriverOptions& opt, std::ostream& err) {
  LoadedSchemas out;
#ifdef TDGEN_WITH_CLANG
  CppFrontendOptions frontend;
  frontend.include_dirs = opt.import_dirs;
  frontend.defines = opt.defines;
  frontend.extra_args = opt.compiler_args;
  frontend.compile_commands_dir = opt.compile_commands_dir;
  frontend.resource_dir = opt.resource_dir;
  CppModule parsed = load_cpp_module(opt.schemas, frontend, err);
  out.module = parsed.module;
  // One translation unit: every output depends on every file it read.
  if (out.module)
    for (int root : out.module->roots) out.inputs[root] = parsed.dependencies;
#else
  err << "tdgen: '" << opt.schemas.front() << "' is a C++ schema, but this tdgen was built without the C++ "
      << "frontend (TENSORDICT_WITH_CLANG=OFF)\n";
#endif
  return out;
}

}  // namespace

int run_tdgen(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  DriverOptions opt;
  bool help = false;
  if (!parse_args(args, opt, out, err, help)) return 2;
  if (help) return 0;
  const size_t cpp = static_cast<size_t>(std::count_if(opt.schemas.begin(), opt.schemas.end(), is_cpp_schema));
  if (cpp != 0 && cpp != opt.schemas.size()) {
    err << "tdgen: YAML and C++ schemas in one run: run tdgen once for each kind\n";
    return 2;
  }
  try {
    LoadedSchemas loaded = cpp ? load_cpp(opt, err) : load_yaml(opt);
    if (!loaded.module) return 1;
    const Module& module = *loaded.module;
    std::vector<std::unique_ptr<Emitter>> emitters;
    emitters.push_back(std::make_unique<CppHeaderEmitter>(opt.templates_dir));
    if (opt.python) emitters.push_back(std::make_unique<PythonBindingEmitter>(opt.templates_dir));
    std::vector<std::string> templates;
    for (const auto& emitter : emitters)
      for (const std::string& t : emitter->inputs()) templates.push_back(t);
    // Render everything before writing anything, so a failure leaves no partial output.
    std::vector<std::pair<int, std::vector<OutputFile>>> outputs;
    for (int root : module.roots) {
      std::vector<OutputFile> files;
      for (const auto& emitter : emitters)
        for (OutputFile& file : emitter->generate(module, root)) files.push_back(std::move(file));
      outputs.emplace_back(root, std::move(files));
    }
    if (opt.check_only) return 0;
    fs::create_directories(opt.out_dir);
    std::string depfile;
    for (const auto& [root, files] : outputs) {
      for (const OutputFile& file : files) {
        const fs::path path = fs::path(opt.out_dir) / file.name;
        write_if_changed(path, file.content);
        depfile += make_escape(fs::absolute(path).lexically_normal().string()) + ":";
        for (const std::string& input : loaded.inputs[root])
          depfile += " \\\n  " + make_escape(fs::absolute(input).lexically_normal().string());
        for (const std::string& t : templates)
          depfile += " \\\n  " + make_escape(fs::absolute(t).lexically_normal().string());
        depfile += "\n";
      }
    }
    if (!opt.depfile.empty()) {
      if (fs::path(opt.depfile).has_parent_path()) fs::create_directories(fs::path(opt.depfile).parent_path());
      write_if_changed(opt.depfile, depfile);
    }
    return 0;
  } catch (const Diagnostic& d) {
    err << d.what() << "\n";
    return 1;
  } catch (const TemplateError& e) {
    err << "tdgen: template error: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    err << "tdgen: " << e.what() << "\n";
    return 1;
  }
}

}  // namespace tdgen
