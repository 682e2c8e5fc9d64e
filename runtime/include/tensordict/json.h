#pragma once
// A JSON value with ordered objects. It is the value type of non-tensor entries (what Python
// tensordict can store without pickle) and the model of the meta.json files of stored
// tensordicts. Parsing accepts both Python writers' styles (orjson and stdlib json, including
// NaN/Infinity); objects keep their key order because it becomes the tensordict's key order.

#include <cstdint>
#include <iosfwd>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace tensordict {
namespace json {

class Value;
using Array = std::vector<Value>;
using Object = std::vector<std::pair<std::string, Value>>;

enum class Kind : uint8_t { Null, Bool, Int, Double, String, Array, Object };

class Value {
 public:
  Value() = default;
  Value(std::nullptr_t) {}
  Value(bool b) : data_(b) {}
  Value(int i) : data_(int64_t{i}) {}
  Value(int64_t i) : data_(i) {}
  Value(double d) : data_(d) {}
  Value(const char* s) : data_(std::string(s)) {}
  Value(std::string s) : data_(std::move(s)) {}
  Value(std::string_view s) : data_(std::string(s)) {}
  Value(Array a) : data_(std::make_shared<Array>(std::move(a))) {}
  Value(Object o) : data_(std::make_shared<Object>(std::move(o))) {}

  Kind kind() const { return static_cast<Kind>(data_.index()); }
  bool is_null() const { return kind() == Kind::Null; }
  bool is_bool() const { return kind() == Kind::Bool; }
  bool is_int() const { return kind() == Kind::Int; }
  bool is_double() const { return kind() == Kind::Double; }
  bool is_number() const { return is_int() || is_double(); }
  bool is_string() const { return kind() == Kind::String; }
  bool is_array() const { return kind() == Kind::Array; }
  bool is_object() const { return kind() == Kind::Object; }

  /// Typed accessors; each throws TypeError naming the actual kind on a mismatch.
  bool as_bool() const;
  int64_t as_int() const;
  double as_double() const;  ///< ints convert
  const std::string& as_string() const;
  const Array& as_array() const;
  const Object& as_object() const;
  Array& mutable_array();    ///< copy-on-write: values share arrays until modified
  Object& mutable_object();

  /// Object member lookup; nullptr when absent or when this is not an object.
  const Value* find(std::string_view key) const;

  /// Compact JSON (orjson style: no spaces, raw UTF-8, NaN written as null unless
  /// `allow_nan`, which writes NaN/Infinity like Python's stdlib json).
  std::string dump(bool allow_nan = false) const;
  /// JSON as Python's stdlib `json.dumps` writes it by default (", " and ": " separators,
  /// \uXXXX escapes for non-ASCII, bare NaN/Infinity): the style of the meta.json files Python
  /// tensordict writes without orjson. ValueError for a string that is not valid UTF-8.
  std::string dump_stdlib() const;
  /// What Python's str() prints for the equivalent Python object: hello, 1, 0.5, True, None,
  /// ['a', 'b'], {'k': 1}.
  std::string python_str() const;
  /// What Python's repr() prints: 'hello' for strings, otherwise as python_str().
  std::string python_repr() const;

  friend bool operator==(const Value& a, const Value& b);
  friend bool operator!=(const Value& a, const Value& b) { return !(a == b); }

 private:
  std::variant<std::monostate, bool, int64_t, double, std::string, std::shared_ptr<Array>,
               std::shared_ptr<Object>>
      data_;
};

/// Parses JSON text. Throws ValueError naming `source` (a file path or description), the line
/// and the column of the first problem.
Value parse(std::string_view text, std::string_view source = "<json>");

const char* kind_name(Kind kind);
std::ostream& operator<<(std::ostream& os, const Value& value);

}  // namespace json
}  // namespace tensordict
