#include <tdgen/driver.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <set>
#include <sstream>

#include <tdgen/code_template.h>
#include <tdgen/diagnostic.h>
#include <tdgen/emitter.h>
#include <tdgen/sema.h>
#include <tdgen/yaml_frontend.h>

#ifndef TDGEN_DEFAULT_TEMPLATES_DIR
#define TDGEN_DEFAULT_TEMPLATES_DIR "templates"
#endif

namespace tdgen {

namespace fs = std::filesystem;

namespace {

const char* const kUsageText =
    "usage: tdgen [options] SCHEMA...\n"
    "Generates one C++ header <stem>.td.h per YAML schema file (docs/schema-format.md).\n"
    "options:\n"
    "  --out DIR           directory for the generated headers (required unless --check)\n"
    "  --check             only check the schemas, write nothing\n"
    "  -I DIR, --import-dir DIR\n"
    "                      also look for imported schemas in DIR (after the importing file's dir)\n"
    "  --templates DIR     templates directory (default: @TEMPLATES@)\n"
    "  --depfile FILE      write a make-format depfile: each header depends on its schema,\n"
    "                      the schemas it imports (transitively) and the templates\n"
    "  -h, --help          show this help\n";

// The help names the templates this tdgen would use: the installed ones for an installed tdgen.
std::string usage() {
  std::string text = kUsageText;
  const std::string marker = "@TEMPLATES@";
  text.replace(text.find(marker), marker.size(), default_templates_dir());
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
    } else if (a == "--check") {
      opt.check_only = true;
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

int run_tdgen(const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
  DriverOptions opt;
  bool help = false;
  if (!parse_args(args, opt, out, err, help)) return 2;
  if (help) return 0;
  try {
    YamlFrontendOptions frontend;
    frontend.import_dirs = opt.import_dirs;
    std::shared_ptr<const Module> module = resolve(load_yaml_module(opt.schemas, frontend));
    CppHeaderEmitter emitter(opt.templates_dir);
    // Render everything before writing anything, so a failure leaves no partial output.
    std::vector<std::pair<int, std::vector<OutputFile>>> outputs;
    for (int root : module->roots) outputs.emplace_back(root, emitter.generate(*module, root));
    if (opt.check_only) return 0;
    fs::create_directories(opt.out_dir);
    std::string depfile;
    for (const auto& [root, files] : outputs) {
      std::set<int> inputs;
      collect_inputs(*module, root, inputs);
      for (const OutputFile& file : files) {
        const fs::path path = fs::path(opt.out_dir) / file.name;
        write_if_changed(path, file.content);
        depfile += make_escape(fs::absolute(path).lexically_normal().string()) + ":";
        // The root schema first, then imports in load order, then the templates.
        for (int f : inputs)
          depfile += " \\\n  " + make_escape(fs::absolute(module->files[f].path).lexically_normal().string());
        for (const std::string& t : emitter.inputs())
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
