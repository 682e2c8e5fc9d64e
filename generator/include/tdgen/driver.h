#pragma once
// The tdgen command line as a library, so tests run it in-process: parse options, load the
// schemas with the YAML or the C++ frontend, check them, emit headers, write them when their content
// changed, write the depfile. Diagnostics go to `err`.

#include <iosfwd>
#include <string>
#include <vector>

namespace tdgen {

struct DriverOptions {
  std::vector<std::string> schemas;
  std::string out_dir;
  std::string templates_dir;
  std::vector<std::string> import_dirs;
  std::string depfile;
  bool check_only = false;
  /// Also write `<stem>.td.py.h`, the Python bindings of the classes (PythonBindingEmitter).
  bool python = false;
  // C++ schemas only.
  std::vector<std::string> defines;
  std::string compile_commands_dir;
  std::string resource_dir;
  std::vector<std::string> compiler_args;
};

/// Runs tdgen with `args` (without the program name); returns the exit code: 0 success,
/// 1 a diagnostic, 2 bad usage.
int run_tdgen(const std::vector<std::string>& args, std::ostream& out, std::ostream& err);

/// The templates directory used when --templates is not given.
std::string default_templates_dir();

}  // namespace tdgen
