#include <tensordict/json.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <limits>
#include <ostream>
#include <string_view>
#include <unordered_set>

#include <tensordict/errors.h>

namespace tensordict {
namespace json {

const char* kind_name(Kind kind) {
  switch (kind) {
    case Kind::Null: return "null";
    case Kind::Bool: return "bool";
    case Kind::Int: return "int";
    case Kind::Double: return "float";
    case Kind::String: return "string";
    case Kind::Array: return "array";
    case Kind::Object: return "object";
  }
  return "?";
}

namespace {
[[noreturn]] void kind_mismatch(Kind want, Kind got) {
  TD_THROW(TypeError, "expected a JSON ", kind_name(want), " but got a JSON ", kind_name(got));
}
}  // namespace

bool Value::as_bool() const {
  if (!is_bool()) kind_mismatch(Kind::Bool, kind());
  return std::get<bool>(data_);
}
int64_t Value::as_int() const {
  if (!is_int()) kind_mismatch(Kind::Int, kind());
  return std::get<int64_t>(data_);
}
double Value::as_double() const {
  if (is_int()) return static_cast<double>(std::get<int64_t>(data_));
  if (!is_double()) kind_mismatch(Kind::Double, kind());
  return std::get<double>(data_);
}
const std::string& Value::as_string() const {
  if (!is_string()) kind_mismatch(Kind::String, kind());
  return std::get<std::string>(data_);
}
const Array& Value::as_array() const {
  if (!is_array()) kind_mismatch(Kind::Array, kind());
  return *std::get<std::shared_ptr<Array>>(data_);
}
const Object& Value::as_object() const {
  if (!is_object()) kind_mismatch(Kind::Object, kind());
  return *std::get<std::shared_ptr<Object>>(data_);
}
Array& Value::mutable_array() {
  if (!is_array()) kind_mismatch(Kind::Array, kind());
  auto& p = std::get<std::shared_ptr<Array>>(data_);
  if (p.use_count() > 1) p = std::make_shared<Array>(*p);
  return *p;
}
Object& Value::mutable_object() {
  if (!is_object()) kind_mismatch(Kind::Object, kind());
  auto& p = std::get<std::shared_ptr<Object>>(data_);
  if (p.use_count() > 1) p = std::make_shared<Object>(*p);
  return *p;
}

const Value* Value::find(std::string_view key) const {
  if (!is_object()) return nullptr;
  for (const auto& kv : as_object()) {
    if (kv.first == key) return &kv.second;
  }
  return nullptr;
}

bool operator==(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return a.as_int() == b.as_int();
    return a.as_double() == b.as_double();
  }
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case Kind::Null: return true;
    case Kind::Bool: return a.as_bool() == b.as_bool();
    case Kind::String: return a.as_string() == b.as_string();
    case Kind::Array: return a.as_array() == b.as_array();
    case Kind::Object: return a.as_object() == b.as_object();
    default: return false;
  }
}

// ---- Writing ----------------------------------------------------------------------------

namespace {

// Python's float repr: the shortest digits that round-trip, in fixed notation for decimal
// exponents in [-4, 16) (0.0001, 1000000000000000.0) and scientific outside (1e-05, 1e+16).
// std::to_chars alone picks whichever text is shorter, which differs (1e-04, 1e+15).
std::string format_double(double d) {
  char buf[400];
  auto sci = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::scientific);
  std::string s(buf, sci.ptr);
  const size_t e = s.find('e');
  const int exponent = e == std::string::npos ? 0 : std::atoi(s.c_str() + e + 1);
  if (exponent < -4 || exponent >= 16) return s;
  auto fixed = std::to_chars(buf, buf + sizeof(buf), d, std::chars_format::fixed);
  s.assign(buf, fixed.ptr);
  if (s.find('.') == std::string::npos) s += ".0";  // Python prints 1.0, not 1
  return s;
}

// The one writer behind dump(), dump_stdlib() and the Python str/repr: the styles differ in
// separators, in how strings and non-finite numbers are spelled, and in the literals.
struct Style {
  enum class Strings : uint8_t {
    Utf8,        // JSON string, UTF-8 written as it is (orjson)
    Ascii,       // JSON string, non-ASCII as \uXXXX, surrogate pairs above U+FFFF (json.dumps)
    PythonRepr,  // Python repr of a str ('...' or "..."); str() of a top-level string is bare
  };
  const char* item_separator;
  const char* key_separator;
  Strings strings;
  const char* null;
  const char* true_literal;
  const char* false_literal;
  const char* nan;  // also written for +-inf when `inf` is null
  const char* inf;
};

constexpr Style kCompact{",", ":", Style::Strings::Utf8, "null", "true", "false", "null", nullptr};
constexpr Style kCompactNan{",", ":", Style::Strings::Utf8, "null", "true", "false", "NaN", "Infinity"};
constexpr Style kStdlib{", ", ": ", Style::Strings::Ascii, "null", "true", "false", "NaN", "Infinity"};
constexpr Style kPython{", ", ": ", Style::Strings::PythonRepr, "None", "True", "False", "nan", "inf"};

const char kHex[] = "0123456789abcdef";

void append_u16(std::string& out, uint32_t unit) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 15];
}

// Decodes the UTF-8 sequence at s[i] and advances i; ValueError when it is not valid UTF-8
// (Python strings always are, so such bytes cannot be written for Python).
uint32_t next_code_point(const std::string& s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = byte(i);
  const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
  TD_CHECK(extra >= 0 && i + static_cast<size_t>(extra) < s.size(), ValueError, "string is not valid UTF-8 at byte ",
           i, ": cannot be written as JSON");
  uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1F) : extra == 2 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k <= extra; ++k) {
    const unsigned char cc = byte(i + static_cast<size_t>(k));
    TD_CHECK((cc >> 6) == 0x2, ValueError, "string is not valid UTF-8 at byte ", i + static_cast<size_t>(k),
             ": cannot be written as JSON");
    cp = (cp << 6) | (cc & 0x3F);
  }
  i += static_cast<size_t>(extra) + 1;
  return cp;
}

// The JSON escapes of a code point below 0x80; false when it needs none.
bool append_json_escape(std::string& out, uint32_t c) {
  switch (c) {
    case '"': out += "\\\""; return true;
    case '\\': out += "\\\\"; return true;
    case '\n': out += "\\n"; return true;
    case '\r': out += "\\r"; return true;
    case '\t': out += "\\t"; return true;
    case '\b': out += "\\b"; return true;
    case '\f': out += "\\f"; return true;
    default:
      if (c < 0x20) {
        append_u16(out, c);
        return true;
      }
      return false;
  }
}

void write_json_string(std::string& out, const std::string& s, bool ascii) {
  out += '"';
  if (!ascii) {
    for (unsigned char c : s) {
      if (!append_json_escape(out, c)) out += static_cast<char>(c);
    }
  } else {
    for (size_t i = 0; i < s.size();) {
      const uint32_t cp = next_code_point(s, i);
      if (cp < 0x7F) {
        if (!append_json_escape(out, cp)) out += static_cast<char>(cp);
      } else if (cp >= 0x10000) {
        const uint32_t v = cp - 0x10000;
        append_u16(out, 0xD800 + (v >> 10));
        append_u16(out, 0xDC00 + (v & 0x3FF));
      } else {
        append_u16(out, cp);
      }
    }
  }
  out += '"';
}

void write_python_repr(std::string& out, const std::string& s) {
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  out += q;
  for (char c : s) {
    if (c == '\\') out += "\\\\";
    else if (c == q) { out += '\\'; out += c; }
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else out += c;
  }
  out += q;
}

void write_string(std::string& out, const std::string& s, const Style& style, bool top_level) {
  switch (style.strings) {
    case Style::Strings::Utf8: write_json_string(out, s, /*ascii=*/false); break;
    case Style::Strings::Ascii: write_json_string(out, s, /*ascii=*/true); break;
    case Style::Strings::PythonRepr:
      if (top_level) out += s;  // str() of a string is the string itself
      else write_python_repr(out, s);
      break;
  }
}

void write_value(std::string& out, const Value& v, const Style& style, bool top_level) {
  switch (v.kind()) {
    case Kind::Null: out += style.null; break;
    case Kind::Bool: out += v.as_bool() ? style.true_literal : style.false_literal; break;
    case Kind::Int: out += std::to_string(v.as_int()); break;
    case Kind::Double: {
      const double d = v.as_double();
      if (std::isnan(d)) {
        out += style.nan;
      } else if (std::isinf(d)) {
        if (style.inf == nullptr) {
          out += style.nan;
        } else {
          if (d < 0) out += '-';
          out += style.inf;
        }
      } else {
        out += format_double(d);
      }
      break;
    }
    case Kind::String: write_string(out, v.as_string(), style, top_level); break;
    case Kind::Array: {
      out += '[';
      bool first = true;
      for (const auto& item : v.as_array()) {
        if (!first) out += style.item_separator;
        first = false;
        write_value(out, item, style, false);
      }
      out += ']';
      break;
    }
    case Kind::Object: {
      out += '{';
      bool first = true;
      for (const auto& kv : v.as_object()) {
        if (!first) out += style.item_separator;
        first = false;
        write_string(out, kv.first, style, false);
        out += style.key_separator;
        write_value(out, kv.second, style, false);
      }
      out += '}';
      break;
    }
  }
}

std::string write(const Value& v, const Style& style, bool top_level) {
  std::string out;
  write_value(out, v, style, top_level);
  return out;
}

}  // namespace

std::string Value::dump(bool allow_nan) const { return write(*this, allow_nan ? kCompactNan : kCompact, false); }
std::string Value::dump_stdlib() const { return write(*this, kStdlib, false); }
std::string Value::python_str() const { return write(*this, kPython, true); }
std::string Value::python_repr() const { return write(*this, kPython, false); }

std::ostream& operator<<(std::ostream& os, const Value& value) { return os << value.dump(true); }

// ---- Parsing ----------------------------------------------------------------------------

namespace {

// Positions of an object's members in the parser's stack of them, hashed and compared by their
// keys (positions stay valid as the stack grows; views of its keys would not).
struct KeyHash {
  const Object* obj;
  size_t operator()(size_t i) const { return std::hash<std::string_view>()((*obj)[i].first); }
};
struct KeyEquals {
  const Object* obj;
  bool operator()(size_t a, size_t b) const { return (*obj)[a].first == (*obj)[b].first; }
};
using KeyPositions = std::unordered_set<size_t, KeyHash, KeyEquals>;
constexpr size_t kScannedKeys = 16;

class Parser {
 public:
  Parser(std::string_view text, std::string_view source) : text_(text), source_(source) {}

  Value parse_document() {
    skip_ws();
    Value v = parse_value(0);
    skip_ws();
    if (pos_ != text_.size()) fail("unexpected trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    size_t line = 1, col = 1;
    for (size_t i = 0; i < pos_ && i < text_.size(); ++i) {
      if (text_[i] == '\n') { ++line; col = 1; } else { ++col; }
    }
    TD_THROW(ValueError, source_, ":", line, ":", col, ": invalid JSON: ", what);
  }

  void skip_ws() {
    while (pos_ < text_.size() &&
           (text_[pos_] == ' ' || text_[pos_] == '\n' || text_[pos_] == '\r' || text_[pos_] == '\t'))
      ++pos_;
  }

  bool consume(std::string_view word) {
    if (text_.substr(pos_, word.size()) == word) {
      pos_ += word.size();
      return true;
    }
    return false;
  }

  Value parse_value(int depth) {
    if (depth > 512) fail("nesting too deep");
    if (pos_ >= text_.size()) fail("unexpected end of input");
    char c = text_[pos_];
    if (c == '{') return parse_object(depth);
    if (c == '[') return parse_array(depth);
    if (c == '"') return Value(parse_string());
    // Numbers first (most values of stored metadata), without trying each word on them.
    if ((c >= '0' && c <= '9') || (c == '-' && !(pos_ + 1 < text_.size() && text_[pos_ + 1] == 'I')))
      return parse_number();
    if (consume("true")) return Value(true);
    if (consume("false")) return Value(false);
    if (consume("null")) return Value();
    if (consume("NaN")) return Value(std::numeric_limits<double>::quiet_NaN());
    if (consume("Infinity")) return Value(std::numeric_limits<double>::infinity());
    if (consume("-Infinity")) return Value(-std::numeric_limits<double>::infinity());
    if (c == '-') return parse_number();  // "-I..." that is not -Infinity: named a bad number
    fail(std::string("unexpected character '") + c + "'");
  }

  // Python keeps the last of duplicated keys, at the position of the first: the member just
  // added (the last of members_, its object's from `base`) moves its value there. A small object
  // is scanned; a large one keeps the positions of its keys in `seen` (a scan per key made an
  // object of n keys cost n^2 / 2 compares: 0.3 s for 20,000 keys).
  void keep_last_of_duplicates(size_t base, KeyPositions& seen) {
    const size_t last = members_.size() - 1;
    if (last - base < kScannedKeys) {
      const std::string& key = members_[last].first;
      for (size_t i = base; i < last; ++i) {
        // Lengths and last bytes first: numbered keys ("x0", "x1", ...) differ there, and the
        // full compare is a call to memcmp.
        const std::string& other = members_[i].first;
        if (other.size() == key.size() && (key.empty() || other.back() == key.back()) && other == key)
          return move_back_to(i);
      }
      return;
    }
    if (seen.empty()) {
      seen.reserve(2 * kScannedKeys);
      for (size_t i = base; i < last; ++i) seen.insert(i);  // distinct: kept so while scanned
    }
    const auto [at, added] = seen.insert(last);
    if (!added) move_back_to(*at);
  }
  void move_back_to(size_t i) {
    members_[i].second = std::move(members_.back().second);
    members_.pop_back();
  }

  Value parse_object(int depth) {
    ++pos_;  // {
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == '}') {
      ++pos_;
      return Value(Object());
    }
    // The members wait on a stack shared by the nesting levels (as parse_array's elements do),
    // then move into an object of their number: one allocation an object.
    const size_t base = members_.size();
    KeyPositions seen(0, KeyHash{&members_}, KeyEquals{&members_});
    while (true) {
      skip_ws();
      if (pos_ >= text_.size() || text_[pos_] != '"') fail("expected a string key");
      std::string key = parse_string();
      skip_ws();
      if (pos_ >= text_.size() || text_[pos_] != ':') fail("expected ':'");
      ++pos_;
      skip_ws();
      Value value = parse_value(depth + 1);
      members_.emplace_back(std::move(key), std::move(value));
      keep_last_of_duplicates(base, seen);
      skip_ws();
      if (pos_ >= text_.size()) fail("unexpected end of input in object");
      if (text_[pos_] == ',') { ++pos_; continue; }
      if (text_[pos_] == '}') { ++pos_; break; }
      fail("expected ',' or '}'");
    }
    Object obj(std::make_move_iterator(members_.begin() + static_cast<std::ptrdiff_t>(base)),
               std::make_move_iterator(members_.end()));
    members_.resize(base);
    return Value(std::move(obj));
  }

  Value parse_array(int depth) {
    ++pos_;  // [
    skip_ws();
    if (pos_ < text_.size() && text_[pos_] == ']') {
      ++pos_;
      return Value(Array());
    }
    // The elements wait on a stack shared by the nesting levels, then move into an array of
    // their number: one allocation an array, where growing it took up to four for a leaf's spec.
    const size_t base = pending_.size();
    while (true) {
      skip_ws();
      Value element = parse_value(depth + 1);
      pending_.push_back(std::move(element));
      skip_ws();
      if (pos_ >= text_.size()) fail("unexpected end of input in array");
      if (text_[pos_] == ',') { ++pos_; continue; }
      if (text_[pos_] == ']') { ++pos_; break; }
      fail("expected ',' or ']'");
    }
    Array arr(std::make_move_iterator(pending_.begin() + static_cast<std::ptrdiff_t>(base)),
              std::make_move_iterator(pending_.end()));
    pending_.resize(base);
    return Value(std::move(arr));
  }

  unsigned parse_hex4() {
    if (pos_ + 4 > text_.size()) fail("truncated \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = text_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= c - '0';
      else if (c >= 'a' && c <= 'f') v |= c - 'a' + 10;
      else if (c >= 'A' && c <= 'F') v |= c - 'A' + 10;
      else fail("bad hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string parse_string() {
    ++pos_;  // "
    std::string out;
    while (true) {
      // A run of plain characters is appended at once (a string without escapes is one run).
      const size_t run = pos_;
      while (pos_ < text_.size()) {
        const auto p = static_cast<unsigned char>(text_[pos_]);
        if (p == '"' || p == '\\' || p < 0x20) break;
        ++pos_;
      }
      out.append(text_.data() + run, pos_ - run);
      if (pos_ >= text_.size()) fail("unterminated string");
      char c = text_[pos_++];
      if (c == '"') break;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (pos_ >= text_.size()) fail("unterminated escape");
      char e = text_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = parse_hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {
            // A high surrogate must be followed by a low one: together one code point.
            if (text_.substr(pos_, 2) == "\\u") {
              size_t save = pos_;
              pos_ += 2;
              unsigned lo = parse_hex4();
              if (lo >= 0xDC00 && lo < 0xE000) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
              } else {
                pos_ = save;
              }
            }
          }
          append_utf8(out, cp);
          break;
        }
        default: fail(std::string("bad escape '\\") + e + "'");
      }
    }
    return out;
  }

  Value parse_number() {
    size_t start = pos_;
    bool is_float = false;
    if (text_[pos_] == '-') ++pos_;
    while (pos_ < text_.size()) {
      char c = text_[pos_];
      if (c >= '0' && c <= '9') { ++pos_; continue; }
      if (c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && pos_ > start)) {
        is_float = true;
        ++pos_;
        continue;
      }
      break;
    }
    std::string_view num = text_.substr(start, pos_ - start);
    if (num == "-" ) fail("bad number");
    if (!is_float) {
      int64_t v = 0;
      auto res = std::from_chars(num.data(), num.data() + num.size(), v);
      if (res.ec == std::errc() && res.ptr == num.data() + num.size()) return Value(v);
      // Out of int64 range: keep the magnitude as a double like a lenient reader would.
    }
    double d = 0;
    auto res = std::from_chars(num.data(), num.data() + num.size(), d);
    if (res.ec != std::errc() || res.ptr != num.data() + num.size()) {
      pos_ = start;
      fail("bad number '" + std::string(num) + "'");
    }
    return Value(d);
  }

  std::string_view text_;
  std::string source_;
  size_t pos_ = 0;
  std::vector<Value> pending_;  // elements of the arrays being parsed (parse_array)
  Object members_;              // members of the objects being parsed (parse_object)
};

}  // namespace

Value parse(std::string_view text, std::string_view source) {
  return Parser(text, source).parse_document();
}

}  // namespace json
}  // namespace tensordict
