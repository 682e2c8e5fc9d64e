#include "schema_collector.h"

#include <algorithm>
#include <filesystem>
#include <map>

#include <clang/AST/Attr.h>
#include <clang/AST/DeclTemplate.h>
#include <clang/AST/RawCommentList.h>
#include <clang/AST/RecursiveASTVisitor.h>
#include <clang/Basic/SourceManager.h>
#include <llvm/Support/raw_ostream.h>

#include <tdgen/diagnostic.h>
#include <tdgen/sema.h>

#include "display_path.h"
#include "field_type.h"

namespace tdgen::cpp {

namespace {

// Every declaration that carries a marker, in source order: marked structs are schemas, marked
// fields belong to them, anything else is a misplaced marker.
class MarkerFinder : public clang::RecursiveASTVisitor<MarkerFinder> {
 public:
  bool shouldVisitTemplateInstantiations() const { return false; }

  bool VisitDecl(clang::Decl* decl) {
    if (!tdgen_annotations(*decl).empty()) marked.push_back(decl);
    return true;
  }

  std::vector<clang::Decl*> marked;
};

std::string strip_prefix(const std::string& text, const std::string& prefix) {
  return text.rfind(prefix, 0) == 0 ? text.substr(prefix.size()) : std::string();
}

bool is_dim(const clang::VarDecl& var) {
  const std::vector<std::string> marks = tdgen_annotations(var);
  return std::find(marks.begin(), marks.end(), "tdgen.dim") != marks.end();
}

// The TD_CPP_NAME annotation of a field, with where it is written.
const clang::AnnotateAttr* cpp_name_attr(const clang::FieldDecl& field) {
  for (const auto* attr : field.specific_attrs<clang::AnnotateAttr>())
    if (attr->getAnnotation().startswith("tdgen.cpp_name=")) return attr;
  return nullptr;
}

class Collector {
 public:
  Collector(clang::ASTContext& context, clang::DiagnosticsEngine& diags, IncludeSpelling include_spelling)
      : context_(context), sm_(context.getSourceManager()), diags_(diags), include_spelling_(std::move(include_spelling)) {}

  std::shared_ptr<const Module> run(const std::vector<RootHeader>& roots) {
    for (const RootHeader& root : roots) {
      const int index = file_index(root.entry, root.path);
      if (std::find(module_.roots.begin(), module_.roots.end(), index) == module_.roots.end())
        module_.roots.push_back(index);
    }
    MarkerFinder finder;
    finder.TraverseDecl(context_.getTranslationUnitDecl());
    std::vector<const clang::CXXRecordDecl*> schemas;
    for (clang::Decl* decl : finder.marked) {
      // Clang reported an invalid declaration already; a struct is invalid when one of its
      // fields is, and its other fields are still checked.
      if (decl->isInvalidDecl() && !llvm::isa<clang::CXXRecordDecl>(decl)) continue;
      if (auto* rec = llvm::dyn_cast<clang::CXXRecordDecl>(decl)) {
        if (accept_struct(*rec)) schemas.push_back(rec);
      } else if (auto* var = llvm::dyn_cast<clang::VarDecl>(decl); var && is_dim(*var)) {
        const auto* parent = llvm::dyn_cast<clang::CXXRecordDecl>(var->getDeclContext());
        if (!parent || !marked_kind(*parent))
          error(var->getLocation(), "TD_DIM(" + var->getNameAsString() +
                                        ") declares a named dim of a schema struct: put it inside one");
      } else if (auto* field = llvm::dyn_cast<clang::FieldDecl>(decl)) {
        if (!marked_kind(*field->getParent()))
          error(field->getLocation(), "field '" + field->getNameAsString() +
                                          "' has a tdgen marker, but its struct is not a schema: mark the struct "
                                          "TD_TENSORCLASS or TD_TYPED_TENSORDICT");
      } else {
        error(decl->getLocation(), "tdgen markers go on schema structs (after 'struct') and their fields");
      }
    }
    // Classes first (nested fields and bases may name any of them), then their members.
    for (const clang::CXXRecordDecl* rec : schemas) declare_class(*rec);
    for (const clang::CXXRecordDecl* rec : schemas) fill_class(*rec);
    check_plain_includes();
    compute_imports();
    // The shared checks run even after errors above: what failed was left out of the IR (and
    // nothing refers to it), so what they find is real, and one run reports everything.
    const bool failed = diags_.hasErrorOccurred();
    try {
      std::shared_ptr<const Module> module = resolve(std::move(module_));
      return failed ? nullptr : module;
    } catch (const Diagnostic& d) {
      for (const auto& [where, message] : d.entries()) error(origin(where), message);
      return nullptr;
    }
  }

 private:
  std::string type_name(clang::QualType type) const {
    clang::PrintingPolicy policy = context_.getPrintingPolicy();
    policy.SuppressTagKeyword = true;
    return type.getAsString(policy);
  }

  void error(clang::SourceLocation loc, const std::string& message, clang::SourceRange range = {}) {
    const unsigned id = diags_.getCustomDiagID(clang::DiagnosticsEngine::Error, "%0");
    auto builder = diags_.Report(loc, id);
    builder << message;
    if (range.isValid()) builder << range;
  }

  // The IR's location for `loc` (in the file, not in a macro), remembered so a check on the IR
  // can report back at the same token.
  SourceLocation here(clang::SourceLocation loc) {
    const clang::SourceLocation file_loc = sm_.getFileLoc(loc);
    const clang::PresumedLoc p = sm_.getPresumedLoc(file_loc);
    if (p.isInvalid()) return SourceLocation{"<unknown>", 0, 0};
    SourceLocation out{display_path(p.getFilename()), static_cast<int>(p.getLine()), static_cast<int>(p.getColumn())};
    origins_.emplace(out.str(), file_loc);
    return out;
  }
  clang::SourceLocation origin(const SourceLocation& where) const {
    auto it = origins_.find(where.str());
    return it == origins_.end() ? clang::SourceLocation() : it->second;
  }

  // The SchemaFile of `entry`, created on first use.
  int file_index(const clang::FileEntry* entry, const std::string& path) {
    auto it = files_.find(entry);
    if (it != files_.end()) return it->second;
    SchemaFile file;
    file.path = path;
    file.stem = std::filesystem::path(path).stem().string();
    file.location = SourceLocation{path, 1, 1};
    module_.files.push_back(std::move(file));
    const int index = static_cast<int>(module_.files.size()) - 1;
    files_[entry] = index;
    return index;
  }

  // A marked struct that can be a schema; reports the ones that cannot.
  bool accept_struct(const clang::CXXRecordDecl& rec) {
    if (!marked_kind(rec)) {
      error(rec.getLocation(), "'" + rec.getNameAsString() +
                                   "' has a tdgen option but no kind: add TD_TENSORCLASS or TD_TYPED_TENSORDICT");
      return false;
    }
    if (rec.getDescribedClassTemplate() || llvm::isa<clang::ClassTemplateSpecializationDecl>(rec) ||
        rec.isDependentContext()) {
      error(rec.getLocation(), "a class template cannot be a schema: tdgen generates one class per schema struct "
                               "(declare a struct for each instantiation)");
      return false;
    }
    if (!rec.isThisDeclarationADefinition()) return false;  // its definition is the schema
    if (rec.isUnion()) {
      error(rec.getLocation(), "a union cannot be a schema: use a struct");
      return false;
    }
    for (const clang::DeclContext* dc = rec.getDeclContext(); !dc->isTranslationUnit(); dc = dc->getParent()) {
      if (!dc->isNamespace()) {
        error(rec.getLocation(), "schema struct '" + rec.getNameAsString() + "' must be declared at namespace scope");
        return false;
      }
    }
    return true;
  }

  // The namespace the generated class goes to: TD_NAMESPACE's, or the struct's minus a
  // trailing `schema` (rl::schema::Step -> rl::Step).
  std::string target_namespace(const clang::CXXRecordDecl& rec) const {
    for (const std::string& a : tdgen_annotations(rec)) {
      const std::string ns = strip_prefix(a, "tdgen.namespace=");
      if (!ns.empty() || a == "tdgen.namespace=") return ns.rfind("::", 0) == 0 ? ns.substr(2) : ns;
    }
    std::vector<std::string> parts;
    for (const clang::DeclContext* dc = rec.getDeclContext(); !dc->isTranslationUnit(); dc = dc->getParent()) {
      const auto* ns = llvm::cast<clang::NamespaceDecl>(dc);
      if (!ns->isInline() && !ns->isAnonymousNamespace()) parts.insert(parts.begin(), ns->getNameAsString());
    }
    if (!parts.empty() && parts.back() == "schema") parts.pop_back();
    std::string out;
    for (const std::string& p : parts) out += (out.empty() ? "" : "::") + p;
    return out;
  }

  std::string doc_of(const clang::Decl& decl) const {
    const clang::RawComment* comment = context_.getRawCommentForDeclNoCache(&decl);
    return comment ? comment->getFormattedText(sm_, diags_) : std::string();
  }

  void declare_class(const clang::CXXRecordDecl& rec) {
    const clang::SourceLocation loc = sm_.getFileLoc(rec.getLocation());
    const clang::FileID fid = sm_.getFileID(loc);
    const clang::FileEntry* entry = sm_.getFileEntryForID(fid);
    const int f = file_index(entry, display_path(sm_.getPresumedLoc(loc).getFilename()));
    file_ids_.emplace(f, fid);
    SchemaFile& file = module_.files[f];
    const std::string ns = target_namespace(rec);
    auto first = namespace_of_.find(f);
    if (first == namespace_of_.end()) {
      namespace_of_.emplace(f, std::make_pair(ns, rec.getNameAsString()));
      file.cpp_namespace = ns;
    } else if (first->second.first != ns) {
      error(rec.getLocation(), "'" + rec.getNameAsString() + "' generates into namespace '" + ns + "', but '" +
                                   first->second.second + "' of the same header into '" + first->second.first +
                                   "': the classes of one header go to one namespace (see TD_NAMESPACE)");
      return;
    }
    ClassDef cls;
    cls.name = rec.getNameAsString();
    cls.location = here(rec.getLocation());
    cls.kind = *marked_kind(rec);
    cls.doc = doc_of(rec);
    for (const std::string& a : tdgen_annotations(rec)) {
      if (a == "tdgen.frozen") {
        cls.frozen = true;
      } else if (a.rfind("tdgen.kind=", 0) != 0 && a.rfind("tdgen.namespace=", 0) != 0) {
        error(rec.getLocation(), "the marker '" + a + "' does not apply to a struct");
      }
    }
    file.classes.push_back(std::move(cls));
    classes_[&rec] = {f, static_cast<int>(file.classes.size()) - 1};
    entries_.emplace(f, entry);
    struct_names_[{f, static_cast<int>(file.classes.size()) - 1}] = {struct_name(rec), rec.getLocation()};
  }

  // "::game::schema::Pose" (inline and anonymous namespaces left out, as one writes it).
  std::string struct_name(const clang::CXXRecordDecl& rec) const {
    clang::PrintingPolicy policy = context_.getPrintingPolicy();
    policy.SuppressUnwrittenScope = true;
    std::string name;
    llvm::raw_string_ostream out(name);
    rec.printQualifiedName(out, policy);
    out.flush();
    return "::" + name;
  }

  // A plain-data struct: the generated class includes its header and names it.
  void declare_plain_struct(const clang::CXXRecordDecl& rec, int f, int c) {
    PlainStruct plain;
    plain.qualified_name = struct_name(rec);
    const clang::FileEntry* entry = entries_.at(f);
    plain.header = entry && include_spelling_ ? include_spelling_(*entry) : module_.files[f].path;
    module_.files[f].classes[c].plain_struct = plain;
    // A member that is not public is reported with the fields (and makes the layout
    // non-standard); what else stops viewing rows as bytes: virtual functions, user-defined
    // copies or destructor, members of reference type.
    bool all_public = true;
    for (const clang::FieldDecl* field : rec.fields()) all_public = all_public && field->getAccess() == clang::AS_public;
    if (all_public && (!rec.isTriviallyCopyable() || !rec.isStandardLayout()))
      error(rec.getLocation(), "plain-data struct '" + rec.getNameAsString() +
                                   "' must be trivially copyable and standard layout for from_struct_array (no "
                                   "virtual function, no user-defined copy, move or destructor)");
  }

  // The generated header of a file with plain-data structs includes that file: none of its
  // schema structs may have the name of the class generated from it (rl::Step generating into
  // rl).
  void check_plain_includes() {
    for (size_t f = 0; f < module_.files.size(); ++f) {
      const SchemaFile& file = module_.files[f];
      const bool any = std::any_of(file.classes.begin(), file.classes.end(),
                                   [](const ClassDef& cls) { return cls.plain_struct.has_value(); });
      if (!any) continue;
      for (size_t c = 0; c < file.classes.size(); ++c) {
        const auto it = struct_names_.find({static_cast<int>(f), static_cast<int>(c)});
        if (it == struct_names_.end()) continue;
        const std::string generated =
            (file.cpp_namespace.empty() ? "::" : "::" + file.cpp_namespace + "::") + file.classes[c].name;
        if (it->second.first != generated) continue;
        error(it->second.second,
              "struct '" + it->second.first + "' and the class generated from it have one name, and the generated "
              "header includes this header (it has a plain-data struct): declare the structs in a namespace "
              "'<ns>::schema' (generating into '<ns>') or name another namespace with TD_NAMESPACE");
      }
    }
  }

  // The reference to a schema struct, by its generated (fully qualified) name.
  ClassRef reference(const clang::CXXRecordDecl& target, clang::SourceLocation at) {
    const auto [f, c] = classes_.at(&target);
    const SchemaFile& file = module_.files[f];
    return ClassRef{(file.cpp_namespace.empty() ? "::" : "::" + file.cpp_namespace + "::") + file.classes[c].name,
                    here(at)};
  }

  void fill_class(const clang::CXXRecordDecl& rec) {
    auto found = classes_.find(&rec);
    if (found == classes_.end()) return;  // already reported
    const auto [f, c] = found->second;
    std::vector<std::pair<int, int>>& refs = references_[f];
    auto note_reference = [&](const clang::CXXRecordDecl& target) {
      const auto it = classes_.find(&target);
      if (it != classes_.end()) refs.push_back(it->second);
      return it != classes_.end();
    };
    // The base: at most one, itself a schema.
    int n = 0;
    for (const clang::CXXBaseSpecifier& base : rec.bases()) {
      const clang::SourceLocation at = base.getBaseTypeLoc();
      if (n++ > 0) {
        error(at, "schema struct '" + rec.getNameAsString() + "' extends more than one struct: a schema has at most one base",
              base.getSourceRange());
        continue;
      }
      if (base.isVirtual()) {
        error(at, "a schema's base cannot be virtual", base.getSourceRange());
        continue;
      }
      const clang::CXXRecordDecl* target = base.getType()->getAsCXXRecordDecl();
      target = target ? target->getDefinition() : nullptr;
      if (!target || !marked_kind(*target)) {
        error(at, "base '" + type_name(base.getType()) + "' of schema struct '" + rec.getNameAsString() +
                      "' is not a schema struct: mark it TD_TENSORCLASS or TD_TYPED_TENSORDICT",
              base.getSourceRange());
        continue;
      }
      if (note_reference(*target)) module_.files[f].classes[c].base = reference(*target, at);
    }
    for (const clang::Decl* member : rec.decls()) {
      const auto* var = llvm::dyn_cast<clang::VarDecl>(member);
      if (var && is_dim(*var)) module_.files[f].classes[c].dims.push_back(DimDef{var->getNameAsString(), here(var->getLocation())});
    }
    // The fields' types first: they decide whether the struct is plain data.
    std::vector<std::pair<const clang::FieldDecl*, FieldType>> typed;
    for (const clang::FieldDecl* field : rec.fields()) {
      if (field->isInvalidDecl()) continue;  // Clang reported it (an unknown type, say)
      if (field->getName().empty()) {
        error(field->getBeginLoc(), "anonymous members cannot be schema fields: give every field a name");
        continue;
      }
      typed.emplace_back(field, classify_field(*field, context_));
    }
    // Plain data: no base, and every field a plain member (a field of no supported type does
    // not count: it is an error either way). Otherwise the reason, for the plain members'
    // errors.
    std::string not_plain;
    if (rec.getNumBases() != 0) not_plain = "it extends '" + type_name(rec.bases_begin()->getType()) + "'";
    bool any_plain = false;
    for (const auto& [field, type] : typed) {
      any_plain = any_plain || type.plain != Plain::No;
      if (type.plain == Plain::No && type.error.empty() && not_plain.empty())
        not_plain = "its field '" + field->getNameAsString() + "' is " +
                    (type.kind == FieldKind::Nested   ? "a schema struct"
                     : type.kind == FieldKind::String ? "a std::string"
                                                      : "a td::schema::Tensor");
    }
    const bool plain = any_plain && not_plain.empty();
    if (plain) declare_plain_struct(rec, f, c);
    for (auto& [field, type] : typed) {
      FieldDef def;
      def.name = field->getNameAsString();
      def.location = here(field->getLocation());
      def.doc = doc_of(*field);
      bool ok = true;
      if (const clang::AnnotateAttr* attr = cpp_name_attr(*field)) {
        def.cpp_name = strip_prefix(attr->getAnnotation().str(), "tdgen.cpp_name=");
        def.cpp_name_location = here(attr->getLocation());
        if (def.cpp_name.empty()) {
          error(attr->getLocation(), "TD_CPP_NAME needs a name: TD_CPP_NAME(\"" + def.name + "_field\")");
          ok = false;
        }
      }
      for (const std::string& a : tdgen_annotations(*field)) {
        if (a == "tdgen.optional" || a.rfind("tdgen.cpp_name=", 0) == 0) {
          def.optional = def.optional || a == "tdgen.optional";
        } else {
          error(field->getLocation(), "the marker '" + a + "' does not apply to a field");
          ok = false;
        }
      }
      // In a plain-data struct the initializer of a required member only initializes rows in
      // C++; an optional member's is its default, as in any schema.
      if (!plain || def.optional) {
        const FieldInit init = field_default(*field, context_);
        if (!init.error.empty()) {
          error(init.location, init.error);
          ok = false;
        }
        if (init.value) {
          def.default_value = init.value;
          def.default_value->location = here(init.location);
        }
      }
      if (plain && type.plain == Plain::Bad) {
        error(type.plain_error_location, type.plain_error);
        continue;
      }
      if (!type.error.empty()) {
        error(type.error_location, type.error);
        continue;
      }
      if (!plain && type.needs_plain_struct) {
        error(type.plain_error_location,
              "field '" + def.name + "' is a plain member ('" + type_name(field->getType()) + "'), but '" +
                  rec.getNameAsString() + "' is not a plain-data struct (" + not_plain + "): write " +
                  tensor_spelling(type.plain_dtype, type.plain_shape) + " " + def.name +
                  ", or make every field of '" + rec.getNameAsString() +
                  "' a plain member (then its class has from_struct_array)");
        continue;
      }
      if (plain && field->getAccess() != clang::AS_public) {
        error(field->getLocation(), "field '" + def.name + "' of the plain-data struct '" + rec.getNameAsString() +
                                        "' is not public: the generated class reads it as &" +
                                        rec.getNameAsString() + "::" + def.name);
        continue;
      }
      if (plain) {
        type.kind = FieldKind::Tensor;
        type.dtype = type.plain_dtype;
        type.shape = type.plain_shape;
        type.dim_names.clear();
      }
      if (!ok) continue;
      def.kind = type.kind;
      def.dtype = type.dtype;
      def.shape = type.shape;
      def.dim_names = type.dim_names;
      if (type.kind == FieldKind::Nested) {
        if (!note_reference(*type.nested)) continue;  // the nested struct's own error is reported
        def.nested = reference(*type.nested, field->getTypeSpecStartLoc());
      }
      module_.files[f].classes[c].fields.push_back(std::move(def));
    }
  }

  // A header's imports are the schema headers it includes (directly, or through headers without
  // schemas), in include order; then any other schema header one of its classes refers to
  // (reachable through another schema header's includes).
  void compute_imports() {
    std::map<int, std::vector<std::pair<unsigned, int>>> included;  // importer -> (offset, imported)
    for (const auto& [f, fid] : file_ids_) {
      clang::FileID child = fid;
      for (clang::SourceLocation inc = sm_.getIncludeLoc(child); inc.isValid(); inc = sm_.getIncludeLoc(child)) {
        const clang::FileID parent = sm_.getFileID(inc);
        auto it = files_.find(sm_.getFileEntryForID(parent));
        if (it != files_.end() && it->second != f) {
          included[it->second].emplace_back(sm_.getFileOffset(inc), f);
          break;
        }
        child = parent;
      }
    }
    for (size_t f = 0; f < module_.files.size(); ++f) {
      std::vector<int> imports;
      auto inc = included.find(static_cast<int>(f));
      if (inc != included.end()) {
        std::sort(inc->second.begin(), inc->second.end());
        for (const auto& entry : inc->second) imports.push_back(entry.second);
      }
      for (const auto& [rf, rc] : references_[static_cast<int>(f)])
        if (rf != static_cast<int>(f) && std::find(imports.begin(), imports.end(), rf) == imports.end())
          imports.push_back(rf);
      for (int i : imports) {
        ImportDef imp;
        imp.path = module_.files[i].path;
        imp.location = module_.files[f].location;
        imp.file_index = i;
        module_.files[f].imports.push_back(std::move(imp));
      }
    }
  }

  clang::ASTContext& context_;
  clang::SourceManager& sm_;
  clang::DiagnosticsEngine& diags_;
  Module module_;
  std::map<const clang::FileEntry*, int> files_;
  std::map<int, clang::FileID> file_ids_;  // a FileID of each schema header, for its include chain
  std::map<int, std::pair<std::string, std::string>> namespace_of_;  // file -> (namespace, first class)
  std::map<const clang::CXXRecordDecl*, std::pair<int, int>> classes_;
  std::map<int, std::vector<std::pair<int, int>>> references_;  // file -> classes its classes name
  std::map<std::string, clang::SourceLocation> origins_;
  IncludeSpelling include_spelling_;
  std::map<int, const clang::FileEntry*> entries_;  // file -> its header
  std::map<std::pair<int, int>, std::pair<std::string, clang::SourceLocation>> struct_names_;  // class -> its struct
};

}  // namespace

std::shared_ptr<const Module> collect_schemas(clang::ASTContext& context, clang::DiagnosticsEngine& diags,
                                              const std::vector<RootHeader>& roots, IncludeSpelling include_spelling) {
  return Collector(context, diags, std::move(include_spelling)).run(roots);
}

}  // namespace tdgen::cpp
