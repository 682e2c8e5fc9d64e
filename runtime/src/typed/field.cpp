// Checks, errors and non-tensor values of typed classes (TensorClass, TypedTensorDict).

#include <tensordict/typed/field.h>

#include <algorithm>
#include <iterator>
#include <sstream>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/typed/accessors.h>
#include <tensordict/typed/field_cache.h>
#include <tensordict/typed/tensor_class.h>
#include <tensordict/typed/typed_tensor_dict.h>

#include "backends/lazy_stack/lazy_stack_impl.h"
#include "core/format.h"
#include "core/non_tensor_write.h"
#include "typed/field_internal.h"

namespace tensordict {
namespace typed {

std::string dims_str(c10::IntArrayRef dims) {
  std::ostringstream out;
  out << '[';
  for (size_t i = 0; i < dims.size(); ++i) out << (i ? ", " : "") << dims[i];
  out << ']';
  return out.str();
}

namespace {

// The full expected shape: batch dims then the event shape ("..." for any shape).
std::string expected_shape_str(const FieldDescriptor& field, c10::IntArrayRef batch_size) {
  std::ostringstream out;
  out << '[';
  bool first = true;
  for (int64_t d : batch_size) {
    out << (first ? "" : ", ") << d;
    first = false;
  }
  if (field.rank < 0) {
    out << (first ? "" : ", ") << "...";
  } else {
    for (int64_t i = 0; i < field.rank; ++i) {
      out << (first ? "" : ", ") << field.shape[i];
      first = false;
    }
  }
  out << ']';
  return out.str();
}

const char* kind_description(FieldKind kind) {
  switch (kind) {
    case FieldKind::Tensor: return "a tensor";
    case FieldKind::Nested: return "a nested tensordict";
    case FieldKind::String: return "a string";
    case FieldKind::Int: return "an int";
    case FieldKind::Float: return "a float";
    case FieldKind::Bool: return "a bool";
  }
  return "?";
}

const char* json_kind_description(const json::Value& value) {
  if (value.is_null()) return "null";
  if (value.is_bool()) return "a bool";
  if (value.is_int()) return "an int";
  if (value.is_double()) return "a float";
  if (value.is_string()) return "a string";
  if (value.is_array()) return "a list";
  return "an object";
}

bool json_matches(FieldKind kind, const json::Value& value) {
  switch (kind) {
    case FieldKind::String: return value.is_string();
    case FieldKind::Int: return value.is_int();
    case FieldKind::Float: return value.is_number();
    case FieldKind::Bool: return value.is_bool();
    default: return false;
  }
}

// {'a', 'b'}: Python's repr of a set of strings, sorted so messages are deterministic.
std::string set_str(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string out = "{";
  for (size_t i = 0; i < names.size(); ++i) out += (i ? ", '" : "'") + names[i] + "'";
  return out + "}";
}

std::string join(const std::vector<std::string>& names, const char* separator, bool quote) {
  std::string out;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i) out += separator;
    out += quote ? "'" + names[i] + "'" : names[i];
  }
  return out;
}

std::vector<std::string> declared_names(const Schema& schema) {
  std::vector<std::string> out;
  for (size_t i = 0; i < schema.num_fields; ++i) out.emplace_back(schema.fields[i].name);
  return out;
}

// A number given to a non-tensor field arrives as a 0-dim tensor (EntryInit's conversion):
// turn it back into the JSON value the field stores.
json::Value scalar_value(const char* class_name, const FieldDescriptor& field, const Entry& entry) {
  if (entry.is_non_tensor()) return entry.non_tensor().value();
  if (entry.is_tensor() && entry.tensor_unchecked().defined() && entry.tensor_unchecked().dim() == 0) {
    const at::Tensor& t = entry.tensor_unchecked();
    if (t.scalar_type() == at::kBool) return json::Value(t.item<bool>());
    if (at::isIntegralType(t.scalar_type(), /*includeBool=*/false)) return json::Value(t.item<int64_t>());
    if (at::isFloatingType(t.scalar_type())) return json::Value(t.item<double>());
  }
  TD_THROW(TypeError, class_name, ".", field.name, ": expected ", kind_description(field.kind), ", got ",
           entry.defined() ? kind_name(entry.kind()) : "nothing");
}

// Stores one constructor/set value in `field`, checked.
void store_field(const Schema& schema, const FieldDescriptor& field, TensorDict& td, EntryInit value) {
  const char* class_name = schema.class_name;
  switch (field.kind) {
    case FieldKind::Tensor: {
      TD_CHECK(!value.is_nested_list() && value.entry().is_tensor(), TypeError, class_name, ".", field.name,
               ": expected a tensor, got ",
               value.is_nested_list() ? "a nested list" : kind_name(value.entry().kind()));
      write_tensor(td, schema, field, value.entry().tensor_unchecked());
      return;
    }
    case FieldKind::Nested: {
      if (value.is_nested_list()) {
        td.set(field.name, std::move(value));
        return;
      }
      TD_CHECK(value.entry().is_tensordict(), TypeError, class_name, ".", field.name, ": expected a ",
               field.class_name, " (a tensordict), got ", kind_name(value.entry().kind()));
      write_nested(td, class_name, field, value.entry().tensordict_unchecked());
      return;
    }
    default: {
      TD_CHECK(!value.is_nested_list(), TypeError, class_name, ".", field.name, ": expected ",
               kind_description(field.kind), ", got a nested list");
      json::Value v = scalar_value(class_name, field, value.entry());
      TD_CHECK(json_matches(field.kind, v), TypeError, class_name, ".", field.name, ": expected ",
               kind_description(field.kind), ", got ", json_kind_description(v));
      write_scalar(td, field, std::move(v));
      return;
    }
  }
}

void check_no_duplicates(c10::ArrayRef<TensorDict::Item> items) {
  for (size_t i = 0; i < items.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      TD_CHECK(items[i].first != items[j].first, ValueError, "The key ", items[i].first,
               " is already set in kwargs");
}

}  // namespace

const FieldDescriptor* Schema::find(const std::string& name) const {
  for (size_t i = 0; i < num_fields; ++i)
    if (name == fields[i].name) return &fields[i];
  return nullptr;
}

std::string event_shape_string(const FieldDescriptor& field) {
  if (field.rank < 0) return "any";
  return dims_str(c10::IntArrayRef(field.shape, static_cast<size_t>(field.rank)));
}

void check_tensor(const char* class_name, const FieldDescriptor& field, c10::IntArrayRef batch_size,
                  const at::Tensor& value) {
  TD_CHECK(value.defined(), TypeError, class_name, ".", field.name, ": expected a tensor, got an undefined tensor");
  c10::IntArrayRef sizes = value.sizes();
  const int64_t batch_dims = static_cast<int64_t>(batch_size.size());
  bool ok = value.dim() >= batch_dims && sizes.slice(0, batch_dims) == batch_size;
  if (ok && field.rank >= 0) {
    ok = value.dim() == batch_dims + field.rank;
    for (int64_t i = 0; ok && i < field.rank; ++i)
      ok = field.shape[i] < 0 || field.shape[i] == sizes[batch_dims + i];
  }
  TD_CHECK(ok, ShapeError, class_name, ".", field.name, ": expected shape ", expected_shape_str(field, batch_size),
           " (batch size ", dims_str(batch_size), ", event shape ", event_shape_string(field), "), got ",
           dims_str(sizes));
  TD_CHECK(field.any_dtype || value.scalar_type() == field.dtype, TypeError, class_name, ".", field.name,
           ": expected dtype ", short_dtype_name(field.dtype), ", got ", short_dtype_name(value.scalar_type()));
}

void check_nested(const char* class_name, const FieldDescriptor& field, c10::IntArrayRef batch_size,
                  const TensorDict& value) {
  c10::IntArrayRef nested = value.batch_size();
  TD_CHECK(nested.size() >= batch_size.size() && nested.slice(0, batch_size.size()) == batch_size, ShapeError,
           class_name, ".", field.name, ": expected a ", field.class_name, " whose batch size starts with ",
           dims_str(batch_size), ", got batch size ", dims_str(nested));
}

void check_entry(const char* class_name, const FieldDescriptor& field, c10::IntArrayRef batch_size,
                 const Entry& entry) {
  switch (field.kind) {
    case FieldKind::Tensor:
      TD_CHECK(entry.is_tensor(), TypeError, class_name, ".", field.name, ": expected a tensor, got ",
               kind_name(entry.kind()));
      check_tensor(class_name, field, batch_size, entry.tensor_unchecked());
      return;
    case FieldKind::Nested:
      TD_CHECK(entry.is_tensordict(), TypeError, class_name, ".", field.name, ": expected a ", field.class_name,
               " (a tensordict), got ", kind_name(entry.kind()));
      check_nested(class_name, field, batch_size, entry.tensordict_unchecked());
      return;
    default: {
      TD_CHECK(entry.is_non_tensor(), TypeError, class_name, ".", field.name, ": expected ",
               kind_description(field.kind), ", got ", kind_name(entry.kind()));
      const auto fits = [&](const json::Value& v) { return json_matches(field.kind, v) || (v.is_null() && field.optional); };
      const NonTensorData& data = entry.non_tensor();
      if (std::all_of(data.pool().begin(), data.pool().end(), fits)) return;
      // A stack's pool keeps values no element holds any more (the null a first indexed write
      // left in rows since written): only the values held count. Named, so the pool outlives
      // the loop (a range over the temporary's pool() would read it after it is destroyed).
      const NonTensorData held = detail::held_values_only(data);
      for (const json::Value& v : held.pool())
        TD_CHECK(fits(v), TypeError, class_name, ".", field.name, ": expected ", kind_description(field.kind), ", got ",
                 json_kind_description(v));
      return;
    }
  }
}

void throw_bad_read(const char* class_name, const FieldDescriptor& field, const Entry* entry,
                    const TensorDictBase* backend) {
  if (entry == nullptr)
    TD_THROW(AttributeError, "'", class_name, "' has field '", field.name, "' declared but not set",
             backend ? backend->missing_key_note(field.name) : std::string());
  TD_THROW(TypeError, class_name, ".", field.name, ": expected ", kind_description(field.kind), ", got ",
           kind_name(entry->kind()));
}

namespace {
const json::Value& read_scalar(const char* class_name, const FieldDescriptor& field, const Entry* entry) {
  if (entry == nullptr || !entry->is_non_tensor()) throw_bad_read(class_name, field, entry);
  const NonTensorData& data = entry->non_tensor();
  TD_CHECK(data.is_uniform(), ValueError, class_name, ".", field.name,
           " holds different values per batch element: ", data.tolist().python_str(), "; read them with ",
           field.name, "_list()");
  const json::Value& v = data.value();
  TD_CHECK(json_matches(field.kind, v), TypeError, class_name, ".", field.name, ": expected ",
           kind_description(field.kind), ", got ", json_kind_description(v));
  return v;
}
}  // namespace

std::string read_string(const char* class_name, const FieldDescriptor& field, const Entry* entry) {
  return read_scalar(class_name, field, entry).as_string();
}
int64_t read_int(const char* class_name, const FieldDescriptor& field, const Entry* entry) {
  return read_scalar(class_name, field, entry).as_int();
}
double read_float(const char* class_name, const FieldDescriptor& field, const Entry* entry) {
  return read_scalar(class_name, field, entry).as_double();
}
bool read_bool(const char* class_name, const FieldDescriptor& field, const Entry* entry) {
  return read_scalar(class_name, field, entry).as_bool();
}

std::vector<json::Value> read_rows(const char* class_name, const FieldDescriptor& field, const Entry* entry,
                                   c10::IntArrayRef batch_size) {
  int64_t n = 1;
  for (int64_t s : batch_size) n *= s;
  TD_CHECK(n >= 0, ShapeError, class_name, ".", field.name, ": the batch size ", detail::size_str(batch_size),
           " has ragged dims; read the rows through the tensordict (read_rows(..., td, ...))");
  if (entry == nullptr && field.optional) return std::vector<json::Value>(static_cast<size_t>(n));
  if (entry == nullptr || !entry->is_non_tensor()) throw_bad_read(class_name, field, entry);
  const NonTensorData& data = entry->non_tensor();
  std::vector<json::Value> rows;
  rows.reserve(static_cast<size_t>(n));
  if (!data.is_stack()) {
    rows.assign(static_cast<size_t>(n), data.value());
  } else {
    const at::Tensor ids = data.ids().contiguous().cpu();
    const int64_t* p = ids.data_ptr<int64_t>();
    for (int64_t i = 0; i < ids.numel(); ++i) rows.push_back(data.pool()[static_cast<size_t>(p[i])]);
  }
  for (const json::Value& v : rows) {
    if (v.is_null() && field.optional) continue;
    TD_CHECK(json_matches(field.kind, v), TypeError, class_name, ".", field.name, ": expected ",
             kind_description(field.kind), " in every row, got ", json_kind_description(v));
  }
  return rows;
}

std::vector<json::Value> read_rows(const char* class_name, const FieldDescriptor& field, const TensorDict& td,
                                   const Entry* entry) {
  c10::IntArrayRef batch = td.batch_size();
  if (std::none_of(batch.begin(), batch.end(), [](int64_t s) { return s < 0; })) {
    return read_rows(class_name, field, entry, batch);
  }
  // A ragged lazy stack has no row-major order: its members' rows, member after member.
  const lazy::LazyStackImpl* stack = lazy::as_stack(td);
  TD_CHECK(stack != nullptr, ShapeError, class_name, ".", field.name, "_list(): batch size ", detail::size_str(batch),
           " has ragged dims but the tensordict is no lazy stack");
  std::vector<json::Value> rows;
  for (const TensorDict& m : stack->members()) {
    const Entry e = m.find(field.name);
    std::vector<json::Value> part = read_rows(class_name, field, m, e.defined() ? &e : nullptr);
    rows.insert(rows.end(), std::make_move_iterator(part.begin()), std::make_move_iterator(part.end()));
  }
  return rows;
}

void check_write(const Schema& schema, const TensorDict& value) {
  value.impl()->for_each([&](const std::string& key, const Entry& entry) {
    const FieldDescriptor* field = schema.find(key);
    if (field == nullptr) {
      TD_CHECK(!schema.closed, AttributeError, "Cannot set the attribute '", key, "', expected attributes are ",
               set_str(declared_names(schema)), ".");
      return;
    }
    check_entry(schema.class_name, *field, value.batch_size(), entry);
    if (field->kind == FieldKind::Nested && field->nested_schema != nullptr) {
      check_write(field->nested_schema(), entry.tensordict_unchecked());
    }
  });
  check_named_dims(schema, value);
}

void check_write_at(const Schema& schema, KeyRef key, c10::IntArrayRef batch_size,
                    const at::Tensor& value) {
  const Schema* level = &schema;
  for (size_t i = 0; i < key.size(); ++i) {
    const FieldDescriptor* field = level->find(std::string(key[i]));
    if (field == nullptr) {
      TD_CHECK(!level->closed, AttributeError, "Cannot set the attribute '", key[i], "', expected attributes are ",
               set_str(declared_names(*level)), ".");
      return;  // an undeclared key of a TypedTensorDict: unchecked, as its other extra keys
    }
    if (i + 1 == key.size()) {
      TD_CHECK(field->kind == FieldKind::Tensor, TypeError, level->class_name, ".", field->name, ": expected ",
               kind_description(field->kind), ", got a tensor");
      check_tensor(level->class_name, *field, batch_size, value);
      return;
    }
    TD_CHECK(field->kind == FieldKind::Nested && field->nested_schema != nullptr, TypeError, level->class_name,
             ".", field->name, ": expected ", kind_description(field->kind), ", got a nested key below it");
    level = &field->nested_schema();
  }
}

void apply_defaults(const Schema& schema, TensorDict& td) {
  for (size_t i = 0; i < schema.num_fields; ++i) {
    const FieldDescriptor& f = schema.fields[i];
    if (f.default_value == nullptr || td.contains(f.name)) continue;
    const FieldDefault& value = *f.default_value;
    if (f.kind != FieldKind::Tensor) {
      json::Value v = value.kind == FieldDefault::Kind::String ? json::Value(std::string(value.text))
                      : value.kind == FieldDefault::Kind::Bool ? json::Value(value.boolean)
                      : value.kind == FieldDefault::Kind::Int  ? json::Value(value.integer)
                                                               : json::Value(value.number);
      td.set_non_tensor(f.name, std::move(v));
      continue;
    }
    std::vector<int64_t> shape(td.batch_size().begin(), td.batch_size().end());
    for (int64_t d = 0; d < f.rank; ++d) {
      int64_t size = f.shape[d];
      if (f.dim_names != nullptr && f.dim_names[d] != nullptr) {
        size = named_dim_size(schema, td, f.dim_names[d]);
        TD_CHECK(size >= 0, ValueError, schema.class_name, ".", f.name, ": cannot fill the default, the size of dim ",
                 f.dim_names[d], " is unknown (no field that gives it is set); give ", f.name, " explicitly");
      }
      shape.push_back(size);
    }
    const at::Scalar fill = value.kind == FieldDefault::Kind::Bool  ? at::Scalar(value.boolean)
                            : value.kind == FieldDefault::Kind::Int ? at::Scalar(value.integer)
                                                                    : at::Scalar(value.number);
    at::TensorOptions options = at::TensorOptions().dtype(f.dtype);
    if (td.device()) options = options.device(*td.device());
    td.set(f.name, at::full(shape, fill, options));
  }
}

TensorDict schema_skeleton(const Schema& schema, c10::IntArrayRef batch_size) {
  TensorDict out = TensorDict::empty_with(batch_size);
  for (size_t i = 0; i < schema.num_fields; ++i) {
    const FieldDescriptor& f = schema.fields[i];
    switch (f.kind) {
      case FieldKind::Tensor: {
        bool concrete = !f.any_dtype && f.rank >= 0;
        for (int64_t d = 0; concrete && d < f.rank; ++d) concrete = f.shape[d] >= 0;
        if (!concrete) {
          TD_CHECK(f.optional, ValueError, schema.class_name, ".", f.name,
                   " cannot be preallocated from the schema: its ",
                   f.any_dtype ? "dtype is any" : "event shape " + event_shape_string(f) + " is not concrete",
                   "; declare a dtype and an event shape without -1, or memmap_like an example tensordict");
          break;
        }
        std::vector<int64_t> shape(batch_size.begin(), batch_size.end());
        shape.insert(shape.end(), f.shape, f.shape + f.rank);
        // One zero element expanded to the full shape: memmap_like only reads shape and dtype.
        out.set(f.name, at::zeros({}, at::TensorOptions().dtype(f.dtype)).expand(shape));
        break;
      }
      case FieldKind::Nested:
        TD_CHECK(f.nested_schema != nullptr, ValueError, schema.class_name, ".", f.name,
                 ": the nested class's schema is unknown (regenerate the header)");
        out.set(f.name, schema_skeleton(f.nested_schema(), batch_size));
        break;
      case FieldKind::String: out.set_non_tensor(f.name, f.optional ? json::Value() : json::Value("")); break;
      case FieldKind::Int: out.set_non_tensor(f.name, f.optional ? json::Value() : json::Value(int64_t{0})); break;
      case FieldKind::Float: out.set_non_tensor(f.name, f.optional ? json::Value() : json::Value(0.0)); break;
      case FieldKind::Bool: out.set_non_tensor(f.name, f.optional ? json::Value() : json::Value(false)); break;
    }
  }
  return out;
}

void write_scalar(TensorDict& td, const FieldDescriptor& field, json::Value value) {
  td.set_non_tensor(field.name, std::move(value));
}

void write_scalar_(TensorDict& td, const FieldDescriptor& field, json::Value value) {
  td.set_non_tensor_(field.name, NonTensorData(std::move(value)));
}

const Entry* FieldCache::refresh(const TensorDictBase* base, std::string_view name) const {
  // Backends whose entries live in memory hand out stable addresses (peek): cache them.
  if (base->entries_in_memory()) {
    base_ = base;
    version_ = base->layout_version();
    entry_ = base->peek(name);
    return entry_;
  }
  base_ = nullptr;
  holder_ = base->get(name);
  return holder_.defined() ? &holder_ : nullptr;
}

TensorDict build_typed_tensordict(const Schema& schema, c10::ArrayRef<TensorDict::Item> items,
                                  c10::IntArrayRef batch_size, std::optional<at::Device> device) {
  check_no_duplicates(items);
  std::vector<std::string> missing, unexpected;
  for (size_t i = 0; i < schema.num_fields; ++i) {
    const FieldDescriptor& f = schema.fields[i];
    bool given = std::any_of(items.begin(), items.end(), [&](const TensorDict::Item& it) { return it.first == f.name; });
    if (!given && !f.optional) missing.emplace_back(f.name);
  }
  std::sort(missing.begin(), missing.end());
  TD_CHECK(missing.empty(), TypeError, schema.class_name, "() missing required field(s): ", join(missing, ", ", false));
  for (const auto& item : items)
    if (schema.find(item.first) == nullptr) unexpected.push_back(item.first);
  std::sort(unexpected.begin(), unexpected.end());
  TD_CHECK(unexpected.empty(), TypeError, schema.class_name, "() got unexpected field(s): ",
           join(unexpected, ", ", false));
  TensorDict td = TensorDict::empty_with(batch_size, device);
  for (const auto& item : items) store_field(schema, *schema.find(item.first), td, item.second);
  apply_defaults(schema, td);
  if (schema.frozen) td.lock_();
  return td;
}

void check_typed_tensordict(const Schema& schema, const TensorDict& td) {
  std::vector<std::string> missing;
  for (size_t i = 0; i < schema.num_fields; ++i)
    if (!schema.fields[i].optional && !td.contains(schema.fields[i].name)) missing.emplace_back(schema.fields[i].name);
  std::sort(missing.begin(), missing.end());
  TD_CHECK(missing.empty(), TypeError, schema.class_name, ".from_tensordict() missing required field(s): ",
           join(missing, ", ", false));
  for (size_t i = 0; i < schema.num_fields; ++i) {
    Entry entry = checked_entry(td, schema.fields[i].name);
    if (entry.defined()) check_entry(schema.class_name, schema.fields[i], td.batch_size(), entry);
  }
  check_named_dims(schema, td);
}

TensorDict build_tensor_class(const Schema& schema, c10::ArrayRef<TensorDict::Item> items,
                              c10::IntArrayRef batch_size, std::optional<at::Device> device) {
  check_no_duplicates(items);
  std::vector<std::string> missing;
  for (size_t i = 0; i < schema.num_fields; ++i) {
    const FieldDescriptor& f = schema.fields[i];
    bool given = std::any_of(items.begin(), items.end(), [&](const TensorDict::Item& it) { return it.first == f.name; });
    if (!given && !f.optional) missing.emplace_back(f.name);
  }
  TD_CHECK(missing.empty(), TypeError, schema.class_name, ".__init__() missing ", missing.size(), " required positional ",
           missing.size() == 1 ? "argument: " : "arguments: ", join(missing, ", ", true));
  for (const auto& item : items)
    TD_CHECK(schema.find(item.first) != nullptr, AttributeError, "Cannot set the attribute '", item.first,
             "', expected attributes are ", set_str(declared_names(schema)), ".");
  TensorDict td = TensorDict::empty_with(batch_size, device);
  for (const auto& item : items) store_field(schema, *schema.find(item.first), td, item.second);
  apply_defaults(schema, td);
  if (schema.frozen) td.lock_();
  return td;
}

void check_tensor_class(const Schema& schema, const TensorDict& td) {
  std::vector<std::string> keys;
  bool unknown = false;
  for (const NestedKey& key : td.keys()) {
    keys.push_back(key.front());
    if (schema.find(key.front()) == nullptr) unknown = true;
  }
  TD_CHECK(!unknown, ValueError, "Keys from the tensordict (", set_str(keys),
           ") must correspond to the class attributes (", set_str(declared_names(schema)), ").");
  for (size_t i = 0; i < schema.num_fields; ++i) {
    Entry entry = checked_entry(td, schema.fields[i].name);
    if (entry.defined()) check_entry(schema.class_name, schema.fields[i], td.batch_size(), entry);
  }
  check_named_dims(schema, td);
}

void set_tensor_class_field(const Schema& schema, TensorDict& td, const std::string& key, EntryInit value) {
  const FieldDescriptor* field = schema.find(key);
  TD_CHECK(field != nullptr, AttributeError, "Cannot set the attribute '", key, "', expected attributes are ",
           set_str(declared_names(schema)), ".");
  store_field(schema, *field, td, std::move(value));
}

}  // namespace typed
}  // namespace tensordict
