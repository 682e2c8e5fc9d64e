// Whole-module checks and name resolution, shared by every frontend.

#include <tdgen/sema.h>

#include <algorithm>
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
      for (auto& cls : file.classes) collect([&] { check_fields(cls); });
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

  void check_fields(const ClassDef& cls) {
    // Inherited fields first (the base chain is acyclic by now).
    std::map<std::string, std::pair<const FieldDef*, const ClassDef*>> seen;
    std::vector<const ClassDef*> chain;
    for (const ClassDef* c = &cls; c != nullptr; c = c->base ? &referenced_class(m_, *c->base) : nullptr)
      chain.push_back(c);
    std::reverse(chain.begin(), chain.end());
    const auto& reserved = reserved_member_names();
    for (const ClassDef* c : chain) {
      for (const FieldDef& field : c->fields) {
        if (c != &cls) {
          seen[field.name] = {&field, c};
          continue;
        }
        // One error per field at most, every field checked.
        collect([&] {
          check_name(field.name, field.location, "field name");
          std::vector<std::string> members{field.name, "set_" + field.name, "set_" + field.name + "_", "has_" + field.name};
          if (is_non_tensor(field.kind)) members.push_back(field.name + "_list");
          for (const std::string& member : members) {
            if (std::find(reserved.begin(), reserved.end(), member) != reserved.end())
              throw Diagnostic(field.location, "field name '" + field.name + "' clashes with the member '" + member +
                                                   "' of TensorDict, TensorClass or the generated class");
          }
          if (field.name == cls.name)
            throw Diagnostic(field.location, "field name '" + field.name + "' is the name of its class");
          auto it = seen.find(field.name);
          if (it != seen.end()) {
            const bool inherited = it->second.second != &cls;
            throw Diagnostic(field.location, "duplicate field '" + field.name + "'" +
                                                 (inherited ? " (inherited from '" + it->second.second->name + "', " : " (") +
                                                 "first declared at " + it->second.first->location.str() + ")");
          }
          if (cls.kind == ClassKind::TypedTensorDict && field.kind != FieldKind::Tensor && field.kind != FieldKind::Nested)
            throw Diagnostic(field.location, "non-tensor field '" + field.name +
                                                 "' in the typed_tensordict '" + cls.name +
                                                 "': only a tensorclass may hold string, int, float or bool fields");
        });
        if (seen.find(field.name) == seen.end()) seen[field.name] = {&field, c};
      }
    }
    // Generated accessors of one field must not be another field: `set_x` next to `x`, or
    // `x_list` next to a non-tensor `x`.
    for (const auto& [name, entry] : seen) {
      auto list = seen.find(name + "_list");
      if (is_non_tensor(entry.first->kind) && list != seen.end() &&
          (entry.second == &cls || list->second.second == &cls)) {
        const FieldDef* own = list->second.second == &cls ? list->second.first : entry.first;
        throw Diagnostic(own->location, "field name '" + list->first +
                                            "' clashes with the generated per-row accessor of field '" + name + "'");
      }
      for (const char* prefix : {"set_", "has_"}) {
        auto other = seen.find(prefix + name);
        if (other != seen.end() && (entry.second == &cls || other->second.second == &cls)) {
          const FieldDef* own = other->second.second == &cls ? other->second.first : entry.first;
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
