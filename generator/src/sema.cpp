// Whole-module checks and name resolution, shared by every frontend.

#include <tdgen/sema.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include <tdgen/diagnostic.h>

namespace tdgen {

namespace {

bool is_identifier(const std::string& s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; });
}

// An identifier the generated code may use: not a keyword, no leading or trailing underscore
// and no double underscore (reserved for the implementation and for generated members).
void check_name(const std::string& name, const SourceLocation& loc, const char* what) {
  if (!is_identifier(name)) throw Diagnostic(loc, std::string(what) + " '" + name + "' is not a C++ identifier");
  if (is_cpp_keyword(name)) throw Diagnostic(loc, std::string(what) + " '" + name + "' is a C++ keyword");
  if (name.front() == '_' || name.back() == '_' || name.find("__") != std::string::npos)
    throw Diagnostic(loc, std::string(what) + " '" + name +
                              "' is reserved: names may not start or end with '_' or contain '__'");
}

std::vector<std::string> split_namespace(const std::string& ns) {
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    size_t pos = ns.find("::", start);
    parts.push_back(ns.substr(start, pos == std::string::npos ? std::string::npos : pos - start));
    if (pos == std::string::npos) break;
    start = pos + 2;
  }
  return parts;
}

class Resolver {
 public:
  explicit Resolver(Module& module) : m_(module) {}

  // Each phase checks every class and field it can and reports all its errors; a later phase
  // relies on the earlier ones (references resolved, extends acyclic), so it runs only when
  // they found nothing.
  void run() {
    for (auto& file : m_.files) collect([&] { check_file_names(file); });
    collect([&] { check_unique_classes(); });
    report();
    for (size_t f = 0; f < m_.files.size(); ++f)
      for (auto& cls : m_.files[f].classes) {
        if (cls.base) collect([&] { resolve_ref(static_cast<int>(f), *cls.base); });
        for (auto& field : cls.fields)
          if (field.kind == FieldKind::Nested) collect([&] { resolve_ref(static_cast<int>(f), field.nested); });
      }
    report();
    for (auto& file : m_.files)
      for (auto& cls : file.classes) collect([&] { check_extends(cls); });
    report();
    for (auto& file : m_.files)
      for (auto& cls : file.classes) collect([&] { check_fields(file, cls); });
    report();
    for (size_t f = 0; f < m_.files.size(); ++f) emission_order(m_, static_cast<int>(f));  // nesting cycles
  }

 private:
  template <class Check>
  void collect(Check&& check) {
    try {
      check();
    } catch (const Diagnostic& d) {
      errors_.push_back(d);
    }
  }
  void report() {
    if (!errors_.empty()) throw Diagnostic::combined(errors_);
  }

  void check_file_names(const SchemaFile& file) {
    if (!file.cpp_namespace.empty())
      for (const auto& part : split_namespace(file.cpp_namespace)) check_name(part, file.location, "namespace part");
    std::map<std::string, const ClassDef*> seen;
    const auto& reserved = reserved_member_names();
    for (const auto& cls : file.classes) {
      check_name(cls.name, cls.location, "class name");
      if (std::find(reserved.begin(), reserved.end(), cls.name) != reserved.end())
        throw Diagnostic(cls.location, "class name '" + cls.name +
                                           "' clashes with a member of TensorDict, TensorClass or the generated class");
      auto it = seen.find(cls.name);
      if (it != seen.end())
        throw Diagnostic(cls.location, "duplicate class '" + cls.name + "' (first declared at " +
                                           it->second->location.str() + ")");
      seen[cls.name] = &cls;
    }
  }

  void check_unique_classes() {
    std::map<std::string, const ClassDef*> seen;
    for (const auto& file : m_.files)
      for (const auto& cls : file.classes) {
        const std::string q = file.cpp_namespace + "::" + cls.name;
        auto it = seen.find(q);
        if (it != seen.end() && it->second != &cls)
          throw Diagnostic(cls.location, "class '" + (file.cpp_namespace.empty() ? cls.name : q) +
                                             "' is also declared at " + it->second->location.str());
        seen[q] = &cls;
      }
  }

  void resolve_ref(int file_index, ClassRef& ref) {
    std::string ns, name = ref.name;
    const size_t sep = ref.name.rfind("::");
    const bool qualified = sep != std::string::npos;
    // As in C++: "a::X" names X in namespace a, or in a nested namespace a of the referring
    // file's namespace; "::a::X" only the former.
    std::string nested_ns;
    if (qualified) {
      ns = ref.name.substr(0, sep);
      name = ref.name.substr(sep + 2);
      const std::string& here = m_.files[file_index].cpp_namespace;
      if (ns.rfind("::", 0) == 0) {
        ns = ns.substr(2);
      } else if (!here.empty()) {
        nested_ns = here + "::" + ns;
      }
    }
    // Visible: this file, then its direct imports.
    std::vector<int> visible{file_index};
    for (const auto& imp : m_.files[file_index].imports) visible.push_back(imp.file_index);
    std::vector<std::pair<int, int>> found;
    for (int f : visible) {
      const SchemaFile& file = m_.files[f];
      if (qualified && file.cpp_namespace != ns && file.cpp_namespace != nested_ns) continue;
      for (size_t c = 0; c < file.classes.size(); ++c)
        if (file.classes[c].name == name) found.emplace_back(f, static_cast<int>(c));
      if (!qualified && f == file_index && !found.empty()) break;  // this file wins
    }
    if (found.empty())
      throw Diagnostic(ref.location, "unknown class '" + ref.name + "' (not declared in this file or its imports)");
    if (found.size() > 1)
      throw Diagnostic(ref.location, "ambiguous class '" + ref.name + "': declared in " + m_.files[found[0].first].path +
                                         " and " + m_.files[found[1].first].path + "; qualify it with its namespace");
    ref.file_index = found[0].first;
    ref.class_index = found[0].second;
  }

  void check_extends(const ClassDef& cls) {
    if (cls.plain_struct && cls.base)
      throw Diagnostic(cls.base->location, "the plain-data class '" + cls.name +
                                               "' cannot extend a class: its rows are one struct with every field");
    std::vector<const ClassDef*> chain{&cls};
    const ClassDef* cur = &cls;
    while (cur->base) {
      const ClassDef& base = referenced_class(m_, *cur->base);
      if (base.kind != cur->kind)
        throw Diagnostic(cur->base->location, std::string("a ") + class_kind_name(cur->kind) + " cannot extend the " +
                                                  class_kind_name(base.kind) + " '" + base.name + "'");
      if (std::find(chain.begin(), chain.end(), &base) != chain.end()) {
        std::string text;
        for (const ClassDef* c : chain) text += c->name + " -> ";
        throw Diagnostic(cls.location, "cyclic extends: " + text + base.name);
      }
      chain.push_back(&base);
      cur = &base;
    }
  }

  static bool is_non_tensor(FieldKind kind) { return kind != FieldKind::Tensor && kind != FieldKind::Nested; }

  // How the schema's own syntax spells a C++ accessor name, for the clash diagnostic's hint.
  static std::string cpp_name_hint(const SchemaFile& file, const std::string& name) {
    const std::string ext = std::filesystem::path(file.path).extension().string();
    const std::string suggestion = name + "_field";
    if (ext == ".yaml" || ext == ".yml")
      return "keep the key and rename its accessors with `cpp_name: " + suggestion + "`";
    return "keep the key and rename its accessors with TD_CPP_NAME(\"" + suggestion + "\")";
  }

  // A stored key: any printable text when the accessors have their own name, else an identifier.
  void check_field_names(const SchemaFile& file, const FieldDef& field) {
    if (field.cpp_name.empty()) {
      check_name(field.name, field.location, "field name");
    } else {
      if (field.name.empty()) throw Diagnostic(field.location, "empty field name");
      for (char c : field.name)
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f)
          throw Diagnostic(field.location, "field name '" + field.name + "' holds a control character");
      check_name(field.cpp_name, field.cpp_name_location, "C++ name");
    }
    const auto& reserved = reserved_member_names();
    const std::string& a = field.accessor();
    std::vector<std::string> members{a, "set_" + a, "set_" + a + "_", "has_" + a};
    if (is_non_tensor(field.kind)) members.push_back(a + "_list");
    for (const std::string& member : members) {
      if (std::find(reserved.begin(), reserved.end(), member) == reserved.end()) continue;
      if (!field.cpp_name.empty())
        throw Diagnostic(field.cpp_name_location, "C++ name '" + a + "' of field '" + field.name +
                                                      "' clashes with the member '" + member +
                                                      "' of TensorDict, TensorClass or the generated class");
      throw Diagnostic(field.location, "field name '" + field.name + "' clashes with the member '" + member +
                                           "' of TensorDict, TensorClass or the generated class: " +
                                           cpp_name_hint(file, field.name));
    }
  }

  // A field of a class generated from a plain-data struct: a member of the struct (so a tensor
  // of fixed dtype and shape) whose accessors do not hide what such a class adds.
  void check_plain_field(const SchemaFile& file, const ClassDef& cls, const FieldDef& field) {
    if (field.kind != FieldKind::Tensor || !field.dtype || !field.shape || !field.dim_names.empty() ||
        std::any_of(field.shape->begin(), field.shape->end(), [](int64_t d) { return d < 0; }))
      throw Diagnostic(field.location, "field '" + field.name + "' of the plain-data class '" + cls.name +
                                           "' must be a tensor of one dtype and a fixed event shape (a struct member)");
    if (!is_identifier(field.name))
      throw Diagnostic(field.location, "field '" + field.name + "' of the plain-data class '" + cls.name +
                                           "' must be named by its member: a C++ identifier");
    for (const char* member : plain_struct_member_names()) {
      if (field.accessor() != member) continue;
      const std::string what = "clashes with the member '" + std::string(member) +
                                "' of a class generated from a plain-data struct";
      if (!field.cpp_name.empty())
        throw Diagnostic(field.cpp_name_location, "C++ name '" + field.cpp_name + "' of field '" + field.name + "' " + what);
      throw Diagnostic(field.location, "field name '" + field.name + "' " + what + ": " + cpp_name_hint(file, field.name));
    }
  }

  // The default of an optional field, against the field's kind, dtype and event shape.
  void check_default(const FieldDef& field) {
    const DefaultValue& d = *field.default_value;
    using K = DefaultValue::Kind;
    static const char* const kKindNames[] = {"a bool", "an integer", "a float", "a string"};
    const char* given = kKindNames[static_cast<int>(d.kind)];
    if (!field.optional)
      throw Diagnostic(d.location, "field '" + field.name + "' has a default but is required: a default is what "
                                       "the constructor stores when the field is not given, so mark it optional");
    auto refuse = [&](const std::string& expected) {
      throw Diagnostic(d.location, "the default of field '" + field.name + "' must be " + expected + ", got " + given);
    };
    switch (field.kind) {
      case FieldKind::Nested:
        throw Diagnostic(d.location, "field '" + field.name + "' holds a nested class: it cannot have a default");
      case FieldKind::String: if (d.kind != K::String) refuse("a string"); return;
      case FieldKind::Int: if (d.kind != K::Int) refuse("an integer"); return;
      case FieldKind::Float: if (d.kind != K::Int && d.kind != K::Float) refuse("a number"); return;
      case FieldKind::Bool: if (d.kind != K::Bool) refuse("true or false"); return;
      case FieldKind::Tensor: break;
    }
    if (!field.dtype || !field.shape)
      throw Diagnostic(d.location, "field '" + field.name + "' has a default but " +
                                       (field.dtype ? "any event shape" : "any dtype") +
                                       ": a default fills a declared dtype and event shape");
    for (size_t i = 0; i < field.shape->size(); ++i)
      if ((*field.shape)[i] < 0 && (field.dim_names.empty() || field.dim_names[i].empty()))
        throw Diagnostic(d.location, "field '" + field.name + "' has a default but a dim of any size (-1): a "
                                         "default needs every size, given or named");
    const Dtype t = *field.dtype;
    if (t == Dtype::kBool) {
      if (d.kind != K::Bool) refuse("true or false (dtype bool)");
      return;
    }
    if (d.kind == K::Bool || d.kind == K::String) refuse(std::string("a number (dtype ") + dtype_name(t) + ")");
    if (is_floating_dtype(t)) return;
    if (d.kind != K::Int) refuse(std::string("an integer (dtype ") + dtype_name(t) + ")");
    int64_t lo = INT64_MIN, hi = INT64_MAX;
    switch (t) {
      case Dtype::kByte: lo = 0; hi = 255; break;
      case Dtype::kChar: lo = -128; hi = 127; break;
      case Dtype::kShort: lo = -32768; hi = 32767; break;
      case Dtype::kInt: lo = INT32_MIN; hi = INT32_MAX; break;
      default: break;
    }
    if (d.integer < lo || d.integer > hi)
      throw Diagnostic(d.location, "the default " + std::to_string(d.integer) + " of field '" + field.name +
                                       "' does not fit its dtype " + dtype_name(t) + " (" + std::to_string(lo) +
                                       " to " + std::to_string(hi) + ")");
  }

  void check_fields(const SchemaFile& file, const ClassDef& cls) {
    // Inherited fields and dims first (the base chain is acyclic by now).
    struct Seen {
      const FieldDef* field;
      const ClassDef* cls;
    };
    std::map<std::string, Seen> keys, accessors;
    std::map<std::string, std::pair<const DimDef*, const ClassDef*>> dims;
    std::vector<const ClassDef*> chain;
    for (const ClassDef* c = &cls; c != nullptr; c = c->base ? &referenced_class(m_, *c->base) : nullptr)
      chain.push_back(c);
    std::reverse(chain.begin(), chain.end());
    for (const ClassDef* c : chain) {
      for (const DimDef& dim : c->dims) {
        if (c == &cls) {
          collect([&] {
            check_name(dim.name, dim.location, "dim name");
            auto it = dims.find(dim.name);
            if (it != dims.end())
              throw Diagnostic(dim.location, "duplicate dim '" + dim.name + "'" +
                                                 (it->second.second != &cls ? " (inherited from '" + it->second.second->name + "', " : " (") +
                                                 "first declared at " + it->second.first->location.str() + ")");
          });
        }
        dims.emplace(dim.name, std::make_pair(&dim, c));
      }
      for (const FieldDef& field : c->fields) {
        if (c != &cls) {
          keys[field.name] = {&field, c};
          accessors[field.accessor()] = {&field, c};
          continue;
        }
        // One error per field at most, every field checked.
        collect([&] {
          check_field_names(file, field);
          if (cls.plain_struct) check_plain_field(file, cls, field);
          if (field.accessor() == cls.name)
            throw Diagnostic(field.location, "field name '" + field.accessor() + "' is the name of its class");
          for (auto* seen : {&keys, &accessors}) {
            auto it = seen->find(seen == &keys ? field.name : field.accessor());
            if (it == seen->end()) continue;
            const bool inherited = it->second.cls != &cls;
            const std::string what = seen == &keys ? "duplicate field '" + field.name + "'"
                                                    : "field '" + field.name + "' has the C++ name '" + field.accessor() +
                                                          "' of field '" + it->second.field->name + "'";
            throw Diagnostic(field.location, what +
                                                 (inherited ? " (inherited from '" + it->second.cls->name + "', " : " (") +
                                                 "first declared at " + it->second.field->location.str() + ")");
          }
          if (cls.kind == ClassKind::TypedTensorDict && is_non_tensor(field.kind))
            throw Diagnostic(field.location, "non-tensor field '" + field.name +
                                                 "' in the typed_tensordict '" + cls.name +
                                                 "': only a tensorclass may hold string, int, float or bool fields");
          for (const std::string& dim : field.dim_names)
            if (!dim.empty() && dims.find(dim) == dims.end())
              throw Diagnostic(field.location, "field '" + field.name + "' names the dim '" + dim +
                                                   "', which neither '" + cls.name + "' nor a class it extends declares");
          if (field.default_value) check_default(field);
        });
        keys.emplace(field.name, Seen{&field, c});
        accessors.emplace(field.accessor(), Seen{&field, c});
      }
    }
    // Generated accessors of one field must not be another field's: `set_x` next to `x`, or
    // `x_list` next to a non-tensor `x`.
    for (const auto& [name, entry] : accessors) {
      auto list = accessors.find(name + "_list");
      if (is_non_tensor(entry.field->kind) && list != accessors.end() && (entry.cls == &cls || list->second.cls == &cls)) {
        const FieldDef* own = list->second.cls == &cls ? list->second.field : entry.field;
        throw Diagnostic(own->location, "field name '" + list->first +
                                            "' clashes with the generated per-row accessor of field '" + name + "'");
      }
      for (const char* prefix : {"set_", "has_"}) {
        auto other = accessors.find(prefix + name);
        if (other != accessors.end() && (entry.cls == &cls || other->second.cls == &cls)) {
          const FieldDef* own = other->second.cls == &cls ? other->second.field : entry.field;
          throw Diagnostic(own->location, "field name '" + other->first + "' clashes with the generated " +
                                              (prefix[0] == 's' ? "setter" : "presence test") + " of field '" + name + "'");
        }
      }
    }
  }

  Module& m_;
  std::vector<Diagnostic> errors_;
};

}  // namespace

std::shared_ptr<const Module> resolve(Module module) {
  Resolver(module).run();
  return std::make_shared<const Module>(std::move(module));
}

const ClassDef& referenced_class(const Module& module, const ClassRef& ref) {
  return module.files.at(ref.file_index).classes.at(ref.class_index);
}

std::string qualified_cpp_name(const Module& module, const ClassRef& ref) {
  const SchemaFile& file = module.files.at(ref.file_index);
  return (file.cpp_namespace.empty() ? "" : "::" + file.cpp_namespace) + "::" + file.classes.at(ref.class_index).name;
}

std::vector<const FieldDef*> all_fields(const Module& module, const ClassDef& cls) {
  std::vector<const FieldDef*> out;
  if (cls.base) out = all_fields(module, referenced_class(module, *cls.base));
  for (const auto& f : cls.fields) out.push_back(&f);
  return out;
}

std::vector<const DimDef*> all_dims(const Module& module, const ClassDef& cls) {
  std::vector<const DimDef*> out;
  if (cls.base) out = all_dims(module, referenced_class(module, *cls.base));
  for (const auto& d : cls.dims) out.push_back(&d);
  return out;
}

bool is_frozen(const Module& module, const ClassDef& cls) {
  return cls.frozen || (cls.base && is_frozen(module, referenced_class(module, *cls.base)));
}

std::vector<const ClassDef*> emission_order(const Module& module, int file_index) {
  const SchemaFile& file = module.files.at(file_index);
  std::vector<const ClassDef*> out;
  std::vector<int> state(file.classes.size(), 0);  // 0 new, 1 visiting, 2 done
  std::function<void(int, const SourceLocation*)> visit = [&](int c, const SourceLocation* from) {
    if (state[c] == 2) return;
    if (state[c] == 1)
      throw Diagnostic(from ? *from : file.classes[c].location,
                       "cyclic nesting: class '" + file.classes[c].name + "' contains itself through nested fields");
    state[c] = 1;
    const ClassDef& cls = file.classes[c];
    if (cls.base && cls.base->file_index == file_index) visit(cls.base->class_index, &cls.base->location);
    for (const auto& f : cls.fields)
      if (f.kind == FieldKind::Nested && f.nested.file_index == file_index) visit(f.nested.class_index, &f.nested.location);
    state[c] = 2;
    out.push_back(&cls);
  };
  for (size_t c = 0; c < file.classes.size(); ++c) visit(static_cast<int>(c), nullptr);
  return out;
}

const std::vector<const char*>& plain_struct_member_names() {
  // templates/struct_array.tmpl
  static const std::vector<const char*> names = {"Row", "struct_layout", "from_struct_array", "to_struct_array"};
  return names;
}

const std::vector<std::string>& reserved_member_names() {
  // Derived at build time from the runtime's public headers (generator/reserved_names/).
  static const std::vector<std::string> names = {
#include "reserved_names.inc"
  };
  return names;
}

bool is_cpp_keyword(const std::string& name) {
  static const std::set<std::string> keywords = {
      "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
      "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
      "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
      "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
      "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
      "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
      "requires", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast", "struct",
      "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
      "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq"};
  return keywords.count(name) != 0;
}

}  // namespace tdgen
