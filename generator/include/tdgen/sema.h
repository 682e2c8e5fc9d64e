#pragma once
// Checks on a whole Module, independent of the frontend that built it: names (C++ keywords,
// clashes with generated or TensorDict members, C++ names), duplicate classes, fields and dims
// (also through inheritance), class references, cyclic `extends`, kinds (non-tensor fields only
// in a tensorclass), named dims (declared), defaults (on optional fields, of the field's kind,
// in range). Fills the resolution fields of ClassRefs.

#include <memory>
#include <string>
#include <vector>

#include <tdgen/ir.h>

namespace tdgen {

/// Checks and resolves `module`, returning the immutable IR. Throws Diagnostic.
std::shared_ptr<const Module> resolve(Module module);

/// The class a resolved reference points to.
const ClassDef& referenced_class(const Module& module, const ClassRef& ref);
/// "::rl::Observation"
std::string qualified_cpp_name(const Module& module, const ClassRef& ref);

/// Every field of `cls`, inherited ones first.
std::vector<const FieldDef*> all_fields(const Module& module, const ClassDef& cls);

/// Every named dim of `cls`, inherited ones first.
std::vector<const DimDef*> all_dims(const Module& module, const ClassDef& cls);
/// True when `cls` or a class it extends is frozen.
bool is_frozen(const Module& module, const ClassDef& cls);

/// Classes of file `file_index` in emission order: a class after its base and after the
/// classes its fields nest, otherwise in declaration order.
std::vector<const ClassDef*> emission_order(const Module& module, int file_index);

/// Names a field may not take: every member of TensorDict, TensorClass and TypedTensorDict (with
/// the typed operations), and the member types of the generated class. Derived at build time
/// from the public headers (generator/reserved_names/), sorted.
const std::vector<std::string>& reserved_member_names();
bool is_cpp_keyword(const std::string& name);
/// The members a class generated from a plain-data struct adds (Row, struct_layout,
/// from_struct_array, to_struct_array): its fields' accessors may not take them.
const std::vector<const char*>& plain_struct_member_names();

}  // namespace tdgen
