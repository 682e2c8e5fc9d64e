// The C++ header emitter. Layout of a generated header (FlatBuffers-like): banner, include
// guard, runtime includes and the generated headers of imports, a static_assert on the runtime
// version, forward declarations, then one class per schema class in dependency order, each
// with a constexpr Traits struct and an accessor, setter and presence test per field.

#include <tdgen/emitter.h>

#include <cctype>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <sstream>

#include <tdgen/code_template.h>
#include <tdgen/sema.h>

namespace tdgen {

namespace {

const char* const kTemplateNames[] = {"header.td.h.tmpl",  "class.tmpl",        "field_descriptor.tmpl",
                                      "shape_array.tmpl",  "field_dims.tmpl",   "field_default.tmpl",
                                      "field_tensor.tmpl", "field_nested.tmpl", "field_scalar.tmpl",
                                      "field_cache.tmpl",  "struct_array.tmpl"};

struct Templates {
  explicit Templates(const std::string& dir)
      : header(CodeTemplate::load(dir, "header.td.h.tmpl")),
        cls(CodeTemplate::load(dir, "class.tmpl")),
        descriptor(CodeTemplate::load(dir, "field_descriptor.tmpl")),
        shape_array(CodeTemplate::load(dir, "shape_array.tmpl")),
        dims(CodeTemplate::load(dir, "field_dims.tmpl")),
        default_value(CodeTemplate::load(dir, "field_default.tmpl")),
        tensor_field(CodeTemplate::load(dir, "field_tensor.tmpl")),
        nested_field(CodeTemplate::load(dir, "field_nested.tmpl")),
        scalar_field(CodeTemplate::load(dir, "field_scalar.tmpl")),
        cache(CodeTemplate::load(dir, "field_cache.tmpl")),
        struct_array(CodeTemplate::load(dir, "struct_array.tmpl")) {}
  CodeTemplate header, cls, descriptor, shape_array, dims, default_value, tensor_field, nested_field, scalar_field,
      cache, struct_array;
};

// User text only ever goes into `///` comments: one comment line per text line, control
// characters dropped, and no trailing backslash (it would continue the comment).
std::string doc_comment(const std::string& text, const std::string& indent) {
  std::string out;
  std::istringstream lines(text);
  std::string line;
  while (std::getline(lines, line)) {
    std::string clean;
    for (char c : line)
      if (static_cast<unsigned char>(c) >= 0x20 && c != 0x7f) clean += c;
    while (!clean.empty() && (clean.back() == ' ' || clean.back() == '\\')) clean.pop_back();
    out += indent + (clean.empty() ? "///" : "/// " + clean) + "\n";
  }
  return out;
}

// The contents of a C++ string literal holding `text`.
std::string literal(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}

// "[N, 3]": named dims by name.
std::string dims_str(const FieldDef& f) {
  std::string out = "[";
  for (size_t i = 0; i < f.shape->size(); ++i)
    out += (i ? ", " : "") + (i < f.dim_names.size() && !f.dim_names[i].empty() ? f.dim_names[i] : std::to_string((*f.shape)[i]));
  return out + "]";
}

// A double as a C++ constant expression that reads back exactly.
std::string double_literal(double value) {
  if (std::isnan(value)) return "::std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(value)) return value > 0 ? "::std::numeric_limits<double>::infinity()"
                                          : "-::std::numeric_limits<double>::infinity()";
  std::ostringstream out;
  out.precision(17);
  out << value;
  std::string text = out.str();
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";
  return text;
}

const char* kind_enum(FieldKind kind) {
  switch (kind) {
    case FieldKind::Tensor: return "Tensor";
    case FieldKind::Nested: return "Nested";
    case FieldKind::String: return "String";
    case FieldKind::Int: return "Int";
    case FieldKind::Float: return "Float";
    case FieldKind::Bool: return "Bool";
  }
  return "Tensor";
}

// "uint8, event shape [84, 84, 3]"
std::string expected_str(const FieldDef& f) {
  std::string out = f.dtype ? std::string("dtype ") + dtype_name(*f.dtype) : "any dtype";
  out += f.shape ? ", event shape " + dims_str(f) : ", any event shape";
  return out;
}

std::string field_summary(const Module& module, const FieldDef& f) {
  std::string what;
  switch (f.kind) {
    case FieldKind::Tensor: what = "tensor, " + expected_str(f); break;
    case FieldKind::Nested: what = "nested " + referenced_class(module, f.nested).name; break;
    case FieldKind::String: what = "string"; break;
    case FieldKind::Int: what = "int"; break;
    case FieldKind::Float: what = "float"; break;
    case FieldKind::Bool: what = "bool"; break;
  }
  std::string extra = f.optional ? ", optional" : "";
  if (f.default_value) {
    const DefaultValue& d = *f.default_value;
    switch (d.kind) {
      case DefaultValue::Kind::Bool: extra += std::string(", default ") + (d.boolean ? "true" : "false"); break;
      case DefaultValue::Kind::Int: extra += ", default " + std::to_string(d.integer); break;
      case DefaultValue::Kind::Float: {
        std::ostringstream text;
        text << d.number;
        extra += ", default " + text.str();
        break;
      }
      case DefaultValue::Kind::String: extra += ", default \"" + d.text + "\""; break;
    }
  }
  return "Field `" + f.name + "` (" + what + extra + ").";
}

class HeaderWriter {
 public:
  HeaderWriter(const Templates& t, const Module& m, int file_index) : t_(t), m_(m), file_(m.files.at(file_index)), index_(file_index) {}

  std::string write() {
    std::string includes;
    for (const auto& imp : file_.imports)
      includes += "#include \"" + printable(CppHeaderEmitter::header_name(m_.files.at(imp.file_index).stem)) + "\"\n";
    // Classes of plain-data structs include the structs' header (ir.h PlainStruct).
    std::string plain_includes;
    for (const ClassDef& cls : file_.classes) {
      if (!cls.plain_struct) continue;
      const std::string line = "#include \"" + printable(cls.plain_struct->header) + "\"\n";
      if (plain_includes.find(line) == std::string::npos) plain_includes += line;
    }
    if (!plain_includes.empty()) includes = "#include <tensordict/struct_array.h>\n\n" + plain_includes + includes;
    if (!includes.empty()) includes = "\n" + includes;
    // Forward declarations in emission order too: the output does not depend on the order a
    // frontend declares classes in (C++ must declare a base first, YAML need not).
    std::string forward, classes;
    for (const ClassDef* cls : emission_order(m_, index_)) {
      forward += "class " + cls->name + ";\n";
      classes += write_class(*cls);
    }
    const std::string ns = file_.cpp_namespace;
    return t_.header.render({
        {"SOURCE", printable(std::filesystem::path(file_.path).filename().string())},
        {"GUARD", guard()},
        {"IMPORT_INCLUDES", includes},
        {"RUNTIME_VERSION", std::to_string(kTypedRuntimeVersion)},
        {"HEADER_NAME", printable(CppHeaderEmitter::header_name(file_.stem))},
        {"NAMESPACE_OPEN", ns.empty() ? "" : "\nnamespace " + ns + " {\n"},
        {"FORWARD_DECLARATIONS", forward},
        {"CLASSES", classes},
        {"NAMESPACE_CLOSE", ns.empty() ? "" : "\n}  // namespace " + ns + "\n"},
    });
  }

 private:
  std::string guard() const {
    std::string g = "TDGEN_";
    for (char c : file_.stem) g += std::isalnum(static_cast<unsigned char>(c)) ? static_cast<char>(std::toupper(c)) : '_';
    return g + "_TD_H_";
  }

  std::string write_class(const ClassDef& cls) {
    const std::string self = (file_.cpp_namespace.empty() ? "" : file_.cpp_namespace + "::") + cls.name;
    const std::string runtime_template =
        cls.kind == ClassKind::TensorClass ? "::tensordict::TensorClass" : "::tensordict::TypedTensorDict";
    std::string base = runtime_template + "<" + cls.name;
    if (cls.base) base += ", " + qualified_cpp_name(m_, *cls.base);
    base += ">";

    const std::vector<const FieldDef*> fields = all_fields(m_, cls);
    std::string arrays, descriptors, names, accessors, caches;
    for (size_t i = 0; i < fields.size(); ++i) {
      const FieldDef& f = *fields[i];
      const std::string& a = f.accessor();
      const bool has_shape = f.kind == FieldKind::Tensor && f.shape && !f.shape->empty();
      if (has_shape) {
        std::string dims;
        for (size_t d = 0; d < f.shape->size(); ++d) dims += (d ? ", " : "") + std::to_string((*f.shape)[d]);
        arrays += t_.shape_array.render({{"FIELD", a}, {"DIMS", dims}});
      }
      const bool named_dims = has_shape && !f.dim_names.empty();
      if (named_dims) {
        std::string list;
        for (size_t d = 0; d < f.dim_names.size(); ++d)
          list += (d ? ", " : "") + (f.dim_names[d].empty() ? std::string("nullptr") : "\"" + f.dim_names[d] + "\"");
        arrays += t_.dims.render({{"FIELD", a}, {"NAMES", list}});
      }
      if (f.default_value) arrays += write_default(f);
      const bool tensor = f.kind == FieldKind::Tensor;
      descriptors += t_.descriptor.render({
          {"KEY", literal(f.name)},
          {"KIND", kind_enum(f.kind)},
          {"DTYPE", tensor && f.dtype ? dtype_cpp(*f.dtype) : "::c10::ScalarType::Undefined"},
          {"ANY_DTYPE", tensor && f.dtype ? "false" : "true"},
          {"SHAPE", has_shape ? a + "_shape" : "nullptr"},
          {"RANK", tensor && f.shape ? std::to_string(f.shape->size()) : "-1"},
          {"OPTIONAL", f.optional ? "true" : "false"},
          {"NESTED_NAME", f.kind == FieldKind::Nested ? "\"" + referenced_class(m_, f.nested).name + "\"" : "nullptr"},
          {"NESTED_SCHEMA", f.kind == FieldKind::Nested
                                ? "&::tensordict::typed::schema_of<" + qualified_cpp_name(m_, f.nested) + ">"
                                : "nullptr"},
          {"DIM_NAMES", named_dims ? a + "_dims" : "nullptr"},
          {"DEFAULT", f.default_value ? "&" + a + "_default" : "nullptr"},
      });
      names += "        \"" + literal(f.name) + "\",\n";
    }
    std::string dim_names;
    const std::vector<const DimDef*> dims = all_dims(m_, cls);
    for (size_t d = 0; d < dims.size(); ++d) dim_names += (d ? ", \"" : "\"") + dims[d]->name + "\"";
    // Accessors for every field, inherited ones too: re-declared here they name this class in
    // errors and their setters return it. Caches only for this class's own fields; the
    // inherited ones use the base's (protected) caches.
    const size_t first_own = fields.size() - cls.fields.size();
    for (size_t i = 0; i < fields.size(); ++i) accessors += write_accessors(cls, *fields[i], i);
    for (size_t i = first_own; i < fields.size(); ++i) caches += t_.cache.render({{"FIELD", fields[i]->accessor()}});
    return t_.cls.render({
        {"CLASS_DOC", doc_comment(cls.doc.empty() ? std::string(class_kind_name(cls.kind)) + " " + cls.name +
                                                        " (generated from a schema)." : cls.doc, "")},
        {"CLASS_NAME", cls.name},
        {"BASE", base},
        {"QUALIFIED_NAME", self},
        {"FIELD_ARRAYS", arrays},
        {"DIM_COUNT", std::to_string(dims.size())},
        {"DIM_NAMES", dims.empty() ? "{}" : "{" + dim_names + "}"},
        {"FROZEN", is_frozen(m_, cls) ? "true" : "false"},
        {"FIELD_COUNT", std::to_string(fields.size())},
        {"FIELD_DESCRIPTORS", descriptors},
        {"FIELD_NAMES", names},
        {"CTOR_INDENT", std::string(cls.name.size() + 3, ' ')},
        {"CLOSED", cls.kind == ClassKind::TensorClass ? "true" : "false"},
        {"ACCESSORS", accessors},
        {"STRUCT_ARRAY", cls.plain_struct ? write_struct_array(cls, fields) : ""},
        {"CACHES", caches},
    });
  }

  // Row, struct_layout, from_struct_array and to_struct_array of a class generated from a
  // plain-data struct: each field is the struct's member of the same name.
  std::string write_struct_array(const ClassDef& cls, const std::vector<const FieldDef*>& fields) {
    std::string layout, rows;
    for (const FieldDef* f : fields) {
      const std::string line = "layout.field(\"" + literal(f->name) + "\", &Row::" + f->name + ");\n";
      layout += "    " + line;
      rows += f->optional ? "    if (has_" + f->accessor() + "()) " + line : "    " + line;
    }
    return t_.struct_array.render({
        {"CLASS_NAME", cls.name},
        {"STRUCT", cls.plain_struct->qualified_name},
        {"LAYOUT_FIELDS", layout},
        {"ROW_FIELDS", rows},
    });
  }

  std::string write_accessors(const ClassDef& cls, const FieldDef& f, size_t index) {
    std::string doc = doc_comment(field_summary(m_, f), "  ");
    if (!f.doc.empty()) doc = doc_comment(f.doc, "  ") + doc;
    CodeTemplate::Values v{{"FIELD_DOC", doc}, {"FIELD", f.accessor()}, {"INDEX", std::to_string(index)}, {"CLASS_NAME", cls.name}};
    switch (f.kind) {
      case FieldKind::Tensor:
        v["EXPECTED"] = expected_str(f);
        return t_.tensor_field.render(v);
      case FieldKind::Nested:
        v["NESTED_TYPE"] = qualified_cpp_name(m_, f.nested);
        return t_.nested_field.render(v);
      default: break;
    }
    switch (f.kind) {
      case FieldKind::String: v["CPP_TYPE"] = "::std::string"; v["READ_FUNCTION"] = "read_string"; v["STORED_VALUE"] = "::std::move(value)"; break;
      case FieldKind::Int: v["CPP_TYPE"] = "::std::int64_t"; v["READ_FUNCTION"] = "read_int"; v["STORED_VALUE"] = "value"; break;
      case FieldKind::Float: v["CPP_TYPE"] = "double"; v["READ_FUNCTION"] = "read_float"; v["STORED_VALUE"] = "value"; break;
      default: v["CPP_TYPE"] = "bool"; v["READ_FUNCTION"] = "read_bool"; v["STORED_VALUE"] = "value"; break;
    }
    // Rows of an optional field may be null (Python None).
    v["ROW_TYPE"] = f.optional ? "::std::optional<" + v["CPP_TYPE"] + ">" : v["CPP_TYPE"];
    return t_.scalar_field.render(v);
  }

  std::string write_default(const FieldDef& f) {
    const DefaultValue& d = *f.default_value;
    // Stored as the field reads it: an integer default of a float field (or float tensor) is a
    // float.
    const bool as_float = d.kind == DefaultValue::Kind::Float ||
                          (d.kind == DefaultValue::Kind::Int &&
                           (f.kind == FieldKind::Float || (f.kind == FieldKind::Tensor && f.dtype && is_floating_dtype(*f.dtype))));
    const char* kind = d.kind == DefaultValue::Kind::Bool     ? "Bool"
                       : d.kind == DefaultValue::Kind::String ? "String"
                       : as_float                             ? "Float"
                                                              : "Int";
    return t_.default_value.render({
        {"FIELD", f.accessor()},
        {"KIND", kind},
        {"BOOL", d.kind == DefaultValue::Kind::Bool && d.boolean ? "true" : "false"},
        {"INT", d.kind != DefaultValue::Kind::Int || as_float ? "0"
                : d.integer == INT64_MIN                     ? "INT64_MIN"
                                                             : std::to_string(d.integer)},
        {"FLOAT", as_float ? double_literal(d.kind == DefaultValue::Kind::Int ? static_cast<double>(d.integer) : d.number) : "0.0"},
        {"TEXT", d.kind == DefaultValue::Kind::String ? "\"" + literal(d.text) + "\"" : "nullptr"},
    });
  }

  const Templates& t_;
  const Module& m_;
  const SchemaFile& file_;
  int index_;
};

}  // namespace

std::string printable(const std::string& text) {
  std::string out;
  for (char c : text) out += (static_cast<unsigned char>(c) < 0x20 || c == '"' || c == '\\' || c == 0x7f) ? '_' : c;
  return out;
}

CppHeaderEmitter::CppHeaderEmitter(std::string templates_dir) : templates_dir_(std::move(templates_dir)) {}

std::vector<OutputFile> CppHeaderEmitter::generate(const Module& module, int file_index) const {
  Templates templates(templates_dir_);
  return {OutputFile{header_name(module.files.at(file_index).stem), HeaderWriter(templates, module, file_index).write()}};
}

std::vector<std::string> CppHeaderEmitter::inputs() const {
  std::vector<std::string> out;
  for (const char* name : kTemplateNames) out.push_back(templates_dir_ + "/" + name);
  return out;
}

}  // namespace tdgen
