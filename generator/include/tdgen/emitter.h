#pragma once
// Emitters turn the resolved IR into output files. Each output language is one class behind
// the Emitter interface: CppHeaderEmitter writes `<stem>.td.h`, PythonBindingEmitter (tdgen
// --python) `<stem>.td.py.h`, the pybind11 bindings of the same classes.

#include <string>
#include <vector>

#include <tdgen/ir.h>

namespace tdgen {

struct OutputFile {
  /// File name relative to the output directory.
  std::string name;
  std::string content;
};

class Emitter {
 public:
  virtual ~Emitter() = default;
  /// The files generated for `module.files[file_index]`. Deterministic: same IR, same bytes.
  virtual std::vector<OutputFile> generate(const Module& module, int file_index) const = 0;
  /// Every data file (template) the output depends on, for depfiles.
  virtual std::vector<std::string> inputs() const = 0;
};

/// Version of the typed runtime interface the generated headers are written for (the
/// runtime's TENSORDICT_TYPED_RUNTIME_VERSION).
constexpr int kTypedRuntimeVersion = 3;

/// Writes one C++17 header per schema file from the templates in `templates_dir`.
class CppHeaderEmitter : public Emitter {
 public:
  explicit CppHeaderEmitter(std::string templates_dir);
  std::vector<OutputFile> generate(const Module& module, int file_index) const override;
  std::vector<std::string> inputs() const override;

  /// The header name generated for a schema stem: "rl" -> "rl.td.h".
  static std::string header_name(const std::string& stem) { return stem + ".td.h"; }

 private:
  std::string templates_dir_;
};

/// Writes, per schema file, `<stem>.td.py.h`: an inline function that binds the file's classes
/// (and those of the files it imports, first) into a pybind11 module with
/// tensordict::python::bind_class (runtime/include/tensordict/python/typed.h).
class PythonBindingEmitter : public Emitter {
 public:
  explicit PythonBindingEmitter(std::string templates_dir);
  std::vector<OutputFile> generate(const Module& module, int file_index) const override;
  std::vector<std::string> inputs() const override;

  static std::string header_name(const std::string& stem) { return stem + ".td.py.h"; }
  /// The binding function of a schema stem: "rl_transition" -> "tdgen_bind_rl_transition".
  static std::string function_name(const std::string& stem);

 private:
  std::string templates_dir_;
};

/// A file name as it may appear in a comment or a string literal (control characters, quotes
/// and backslashes replaced).
std::string printable(const std::string& text);

}  // namespace tdgen
