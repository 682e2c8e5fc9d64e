// The Python binding emitter (tdgen --python): per schema file, `<stem>.td.py.h` with one inline
// function that binds the file's classes with tensordict::python::bind_class, in emission order
// (bases first), after calling the functions of the files it imports. The classes' behaviour
// lives in the runtime header (tensordict/python/typed.h); the generated code only names them.

#include <tdgen/emitter.h>

#include <cctype>
#include <filesystem>

#include <tdgen/code_template.h>
#include <tdgen/sema.h>

namespace tdgen {

namespace {

const char* const kTemplateName = "python.td.py.h.tmpl";

std::string identifier_part(const std::string& stem) {
  std::string out;
  for (char c : stem) out += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
  return out;
}

std::string qualified(const SchemaFile& file, const ClassDef& cls) {
  return "::" + (file.cpp_namespace.empty() ? "" : file.cpp_namespace + "::") + cls.name;
}

}  // namespace

PythonBindingEmitter::PythonBindingEmitter(std::string templates_dir) : templates_dir_(std::move(templates_dir)) {}

std::string PythonBindingEmitter::function_name(const std::string& stem) {
  return "tdgen_bind_" + identifier_part(stem);
}

std::vector<OutputFile> PythonBindingEmitter::generate(const Module& module, int file_index) const {
  const CodeTemplate tmpl = CodeTemplate::load(templates_dir_, kTemplateName);
  const SchemaFile& file = module.files.at(file_index);
  std::string includes, import_calls, bind_calls;
  for (const ImportDef& imp : file.imports) {
    const std::string& stem = module.files.at(imp.file_index).stem;
    includes += "#include \"" + printable(header_name(stem)) + "\"\n";
    import_calls += "  " + function_name(stem) + "(m);\n";
  }
  if (!includes.empty()) includes = "\n" + includes;
  for (const ClassDef* cls : emission_order(module, file_index)) {
    // The Python base: the class it extends, or TensorDict for a TypedTensorDict root (a
    // TensorClass holds its tensordict and has no base).
    std::string base;
    if (cls->base) {
      base = ", " + qualified_cpp_name(module, *cls->base);
    } else if (cls->kind == ClassKind::TypedTensorDict) {
      base = ", ::tensordict::TensorDict";
    }
    bind_calls += "  ::tensordict::python::bind_class<" + qualified(file, *cls) + base + ">(m);\n";
  }
  std::string guard = "TDGEN_";
  for (char c : file.stem) guard += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
  guard += "_TD_PY_H_";
  return {OutputFile{header_name(file.stem),
                     tmpl.render({
                         {"SOURCE", printable(std::filesystem::path(file.path).filename().string())},
                         {"GUARD", guard},
                         {"HEADER_NAME", printable(CppHeaderEmitter::header_name(file.stem))},
                         {"IMPORT_INCLUDES", includes},
                         {"FUNCTION", function_name(file.stem)},
                         {"IMPORT_CALLS", import_calls},
                         {"BIND_CALLS", bind_calls},
                     })}};
}

std::vector<std::string> PythonBindingEmitter::inputs() const { return {templates_dir_ + "/" + kTemplateName}; }

}  // namespace tdgen
