// The YAML frontend: schema files -> IR. Every value it reads keeps its node's Mark as a
// SourceLocation; every key it does not know is an error (like torchgen's leftover-keys check).

#include <tdgen/yaml_frontend.h>

#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/yaml.h>

#include <tdgen/diagnostic.h>

namespace tdgen {

namespace fs = std::filesystem;

namespace {

SourceLocation at(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return SourceLocation{file, 1, 1};
  return SourceLocation{file, mark.line + 1, mark.column + 1};
}

std::string join_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + names[i];
  return out;
}

class FileParser {
 public:
  FileParser(std::string path) : path_(std::move(path)) {}

  SchemaFile parse(const std::string& text) {
    YAML::Node root;
    try {
      root = YAML::Load(text);
    } catch (const YAML::DeepRecursion& e) {
      // yaml-cpp stops its recursive descent itself (its message is only "bad file").
      throw Diagnostic(at(path_, e.mark), "YAML nested too deep (" + std::to_string(e.depth()) +
                                              " levels; no schema needs more than a few)");
    } catch (const YAML::ParserException& e) {
      throw Diagnostic(at(path_, e.mark), "YAML syntax error: " + e.msg);
    }
    SchemaFile file;
    file.path = path_;
    file.stem = fs::path(path_).filename().string();
    for (const char* ext : {".yaml", ".yml"}) {
      const std::string e(ext);
      if (file.stem.size() > e.size() && file.stem.compare(file.stem.size() - e.size(), e.size(), e) == 0) {
        file.stem.resize(file.stem.size() - e.size());
        break;
      }
    }
    file.location = SourceLocation{path_, 1, 1};
    if (!root.IsDefined() || root.IsNull()) throw Diagnostic(file.location, "empty schema: expected a mapping with 'classes'");
    expect_map(root, "the schema");
    check_keys(root, {"namespace", "imports", "classes"}, "the schema");
    if (YAML::Node ns = root["namespace"]) file.cpp_namespace = scalar(ns, "namespace");
    if (YAML::Node imports = root["imports"]) {
      if (!imports.IsSequence()) throw Diagnostic(loc(imports), "'imports' must be a list of schema file paths");
      for (const YAML::Node& item : imports) {
        ImportDef def;
        def.path = scalar(item, "an import");
        def.location = loc(item);
        file.imports.push_back(std::move(def));
      }
    }
    YAML::Node classes = root["classes"];
    if (!classes) throw Diagnostic(file.location, "missing key 'classes' in the schema");
    if (classes.IsNull()) return file;
    expect_map(classes, "'classes'");
    // Every class and field is parsed, so one run reports all their errors.
    for (const auto& item : classes) {
      try {
        file.classes.push_back(parse_class(item.first, item.second));
      } catch (const Diagnostic& d) {
        errors_.push_back(d);
      }
    }
    if (!errors_.empty()) throw Diagnostic::combined(errors_);
    return file;
  }

 private:
  SourceLocation loc(const YAML::Node& node) const { return at(path_, node.Mark()); }

  void expect_map(const YAML::Node& node, const std::string& what) const {
    if (!node.IsMap()) throw Diagnostic(loc(node), what + " must be a mapping");
  }

  std::string scalar(const YAML::Node& node, const std::string& what) const {
    if (!node.IsScalar()) throw Diagnostic(loc(node), what + " must be a string");
    return node.Scalar();
  }

  bool boolean(const YAML::Node& node, const std::string& what) const {
    bool value = false;
    if (!node.IsScalar() || !YAML::convert<bool>::decode(node, value))
      throw Diagnostic(loc(node), what + " must be true or false");
    return value;
  }

  void check_keys(const YAML::Node& map, std::vector<std::string> known, const std::string& where) const {
    for (const auto& item : map) {
      const std::string key = item.first.IsScalar() ? item.first.Scalar() : std::string("<non-scalar>");
      if (std::find(known.begin(), known.end(), key) == known.end())
        throw Diagnostic(loc(item.first),
                         "unknown key '" + key + "' in " + where + " (expected one of: " + join_names(known) + ")");
    }
  }

  ClassDef parse_class(const YAML::Node& key, const YAML::Node& body) {
    ClassDef cls;
    cls.name = scalar(key, "a class name");
    cls.location = loc(key);
    const std::string where = "class '" + cls.name + "'";
    if (body.IsNull()) throw Diagnostic(cls.location, "missing key 'kind' in " + where);
    expect_map(body, where);
    check_keys(body, {"kind", "doc", "extends", "frozen", "dims", "fields"}, where);
    YAML::Node kind = body["kind"];
    if (!kind) throw Diagnostic(cls.location, "missing key 'kind' in " + where);
    const std::string k = scalar(kind, "'kind'");
    if (k == "tensorclass") {
      cls.kind = ClassKind::TensorClass;
    } else if (k == "typed_tensordict") {
      cls.kind = ClassKind::TypedTensorDict;
    } else {
      throw Diagnostic(loc(kind), "unknown kind '" + k + "' (expected tensorclass or typed_tensordict)");
    }
    if (YAML::Node doc = body["doc"]) cls.doc = scalar(doc, "'doc'");
    if (YAML::Node base = body["extends"]) cls.base = ClassRef{scalar(base, "'extends'"), loc(base)};
    if (YAML::Node frozen = body["frozen"]) cls.frozen = boolean(frozen, "'frozen'");
    if (YAML::Node dims = body["dims"]) {
      if (!dims.IsSequence()) throw Diagnostic(loc(dims), "'dims' must be a list of dim names, e.g. [N, T]");
      for (const YAML::Node& dim : dims) cls.dims.push_back(DimDef{scalar(dim, "a dim name"), loc(dim)});
    }
    if (YAML::Node fields = body["fields"]) {
      if (!fields.IsNull()) {
        expect_map(fields, "'fields' of " + where);
        for (const auto& item : fields) {
          try {
            cls.fields.push_back(parse_field(item.first, item.second));
          } catch (const Diagnostic& d) {
            errors_.push_back(d);
          }
        }
      }
    }
    return cls;
  }

  FieldDef parse_field(const YAML::Node& key, const YAML::Node& body) {
    FieldDef field;
    field.name = scalar(key, "a field name");
    field.location = loc(key);
    if (body.IsNull()) return field;  // any tensor
    const std::string where = "field '" + field.name + "'";
    expect_map(body, where);
    check_keys(body, {"dtype", "shape", "class", "type", "optional", "default", "cpp_name", "doc"}, where);
    YAML::Node dtype = body["dtype"], shape = body["shape"], cls = body["class"], type = body["type"];
    if (YAML::Node optional = body["optional"]) field.optional = boolean(optional, "'optional'");
    if (YAML::Node doc = body["doc"]) field.doc = scalar(doc, "'doc'");
    if (YAML::Node cpp_name = body["cpp_name"]) {
      field.cpp_name = scalar(cpp_name, "'cpp_name'");
      field.cpp_name_location = loc(cpp_name);
    }
    if (YAML::Node value = body["default"]) field.default_value = default_value(value);
    if (cls) {
      if (dtype || shape || type)
        throw Diagnostic(loc(cls), where + ": 'class' cannot be combined with 'dtype', 'shape' or 'type'");
      field.kind = FieldKind::Nested;
      field.nested = ClassRef{scalar(cls, "'class'"), loc(cls)};
      return field;
    }
    if (type) {
      if (dtype || shape) throw Diagnostic(loc(type), where + ": 'type' cannot be combined with 'dtype' or 'shape'");
      const std::string t = scalar(type, "'type'");
      if (t == "string") field.kind = FieldKind::String;
      else if (t == "int") field.kind = FieldKind::Int;
      else if (t == "float") field.kind = FieldKind::Float;
      else if (t == "bool") field.kind = FieldKind::Bool;
      else if (t == "tensor") field.kind = FieldKind::Tensor;
      else throw Diagnostic(loc(type), "unknown type '" + t + "' (expected string, int, float, bool or tensor)");
      return field;
    }
    if (dtype) {
      const std::string name = scalar(dtype, "'dtype'");
      field.dtype = parse_dtype(name);
      if (!field.dtype)
        throw Diagnostic(loc(dtype), "unknown dtype '" + name +
                                         "' (expected one of: float32, float64, float16, bfloat16, int8, int16, "
                                         "int32, int64, uint8, bool, complex64, complex128)");
    }
    if (shape) {
      if (!shape.IsSequence()) throw Diagnostic(loc(shape), "shape must be a list of integers, e.g. [84, 84, 3] or []");
      std::vector<int64_t> dims;
      std::vector<std::string> names;
      for (const YAML::Node& dim : shape) {
        int64_t value = 0;
        if (dim.IsScalar() && !YAML::convert<int64_t>::decode(dim, value) && is_dim_name(dim.Scalar())) {
          dims.push_back(-1);  // a named dim: any size, the same in every field naming it
          names.resize(dims.size());
          names.back() = dim.Scalar();
          continue;
        }
        if (!dim.IsScalar() || !YAML::convert<int64_t>::decode(dim, value))
          throw Diagnostic(loc(dim), "shape must be a list of sizes or dim names, e.g. [84, 84, 3], [N, 3] or []");
        if (value < -1) throw Diagnostic(loc(dim), "shape sizes must be >= 0, or -1 for any size");
        dims.push_back(value);
      }
      if (!names.empty()) names.resize(dims.size());
      field.shape = std::move(dims);
      field.dim_names = std::move(names);
    }
    return field;
  }

  static bool is_dim_name(const std::string& text) {
    return !text.empty() && (std::isalpha(static_cast<unsigned char>(text[0])) || text[0] == '_');
  }

  // A default as written: a quoted scalar is a string; a plain one true/false, an integer, a
  // number, or else a string. Sema checks it against the field.
  DefaultValue default_value(const YAML::Node& node) const {
    if (!node.IsScalar()) throw Diagnostic(loc(node), "'default' must be a single value (a number, true/false or a string)");
    DefaultValue d;
    d.location = loc(node);
    const std::string& text = node.Scalar();
    if (node.Tag() == "!") {
      d.kind = DefaultValue::Kind::String;
      d.text = text;
    } else if (text == "true" || text == "True" || text == "false" || text == "False") {
      d.kind = DefaultValue::Kind::Bool;
      d.boolean = text[0] == 't' || text[0] == 'T';
    } else if (YAML::convert<int64_t>::decode(node, d.integer)) {
      d.kind = DefaultValue::Kind::Int;
    } else if (YAML::convert<double>::decode(node, d.number)) {
      d.kind = DefaultValue::Kind::Float;
    } else {
      d.kind = DefaultValue::Kind::String;
      d.text = text;
    }
    return d;
  }

  std::string path_;
  std::vector<Diagnostic> errors_;  // of classes and fields parsed so far
};

std::string read_file(const std::string& path, const SourceLocation& from) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw Diagnostic(from, "cannot read schema file '" + path + "'");
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

class ModuleLoader {
 public:
  explicit ModuleLoader(const YamlFrontendOptions& options) : options_(options) {}

  Module load(const std::vector<std::string>& schemas) {
    for (const std::string& path : schemas) {
      int index = load_file(path, SourceLocation{path, 1, 1});
      if (std::find(module_.roots.begin(), module_.roots.end(), index) == module_.roots.end())
        module_.roots.push_back(index);
    }
    return std::move(module_);
  }

 private:
  // Loads `path` and its imports depth-first; `stack_` holds the files being loaded, so an
  // import of one of them is a cycle.
  int load_file(const std::string& path, const SourceLocation& from) {
    const std::string key = fs::weakly_canonical(fs::path(path)).string();
    auto it = loaded_.find(key);
    if (it != loaded_.end()) return it->second;
    const int index = static_cast<int>(module_.files.size());
    module_.files.push_back(FileParser(path).parse(read_file(path, from)));
    loaded_[key] = index;
    stack_.push_back(key);
    const fs::path dir = fs::path(path).parent_path();
    for (size_t i = 0; i < module_.files[index].imports.size(); ++i) {
      const ImportDef imp = module_.files[index].imports[i];
      const std::string found = find_import(dir, imp);
      const std::string found_key = fs::weakly_canonical(fs::path(found)).string();
      auto on_stack = std::find(stack_.begin(), stack_.end(), found_key);
      if (on_stack != stack_.end()) {
        std::string chain;
        for (auto s = on_stack; s != stack_.end(); ++s) chain += fs::path(*s).filename().string() + " -> ";
        chain += fs::path(found_key).filename().string();
        throw Diagnostic(imp.location, "cyclic imports: " + chain);
      }
      const int imported = load_file(found, imp.location);
      module_.files[index].imports[i].file_index = imported;
    }
    stack_.pop_back();
    return index;
  }

  std::string find_import(const fs::path& dir, const ImportDef& imp) const {
    std::vector<fs::path> candidates{dir / imp.path};
    for (const std::string& d : options_.import_dirs) candidates.push_back(fs::path(d) / imp.path);
    for (const fs::path& c : candidates)
      if (fs::is_regular_file(c)) return c.lexically_normal().string();
    std::string searched;
    for (const fs::path& c : candidates) searched += (searched.empty() ? "" : ", ") + c.parent_path().string();
    throw Diagnostic(imp.location, "cannot find import '" + imp.path + "' (searched: " + searched + ")");
  }

  const YamlFrontendOptions& options_;
  Module module_;
  std::map<std::string, int> loaded_;
  std::vector<std::string> stack_;
};

}  // namespace

Module load_yaml_module(const std::vector<std::string>& schemas, const YamlFrontendOptions& options) {
  return ModuleLoader(options).load(schemas);
}

SchemaFile parse_yaml_schema(const std::string& text, const std::string& path) {
  return FileParser(path).parse(text);
}

}  // namespace tdgen
