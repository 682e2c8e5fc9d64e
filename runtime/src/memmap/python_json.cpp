#include "memmap/python_json.h"

#include <tensordict/errors.h>

namespace tensordict {
namespace memmap_detail {

namespace {

const char* kHex = "0123456789abcdef";

void append_u16(std::string& out, uint32_t unit) {
  out += "\\u";
  for (int shift = 12; shift >= 0; shift -= 4) out += kHex[(unit >> shift) & 15];
}

// Decodes one UTF-8 sequence starting at s[i]; advances i.
uint32_t next_code_point(const std::string& s, size_t& i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  unsigned char c = byte(i);
  int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xE ? 2 : (c >> 3) == 0x1E ? 3 : -1;
  TD_CHECK(extra >= 0 && i + static_cast<size_t>(extra) < s.size(), ValueError,
           "string is not valid UTF-8 at byte ", i, ": cannot be written as JSON");
  uint32_t cp = extra == 0 ? c : extra == 1 ? (c & 0x1F) : extra == 2 ? (c & 0x0F) : (c & 0x07);
  for (int k = 1; k <= extra; ++k) {
    unsigned char cc = byte(i + k);
    TD_CHECK((cc >> 6) == 0x2, ValueError, "string is not valid UTF-8 at byte ", i + k,
             ": cannot be written as JSON");
    cp = (cp << 6) | (cc & 0x3F);
  }
  i += static_cast<size_t>(extra) + 1;
  return cp;
}

void dump_string(std::string& out, const std::string& s) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    uint32_t cp = next_code_point(s, i);
    switch (cp) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (cp < 0x20 || cp >= 0x7F) {
          if (cp >= 0x10000) {
            uint32_t v = cp - 0x10000;
            append_u16(out, 0xD800 + (v >> 10));
            append_u16(out, 0xDC00 + (v & 0x3FF));
          } else {
            append_u16(out, cp);
          }
        } else {
          out += static_cast<char>(cp);
        }
    }
  }
  out += '"';
}

void dump_value(std::string& out, const json::Value& v) {
  switch (v.kind()) {
    case json::Kind::Array: {
      out += '[';
      bool first = true;
      for (const auto& item : v.as_array()) {
        if (!first) out += ", ";
        first = false;
        dump_value(out, item);
      }
      out += ']';
      break;
    }
    case json::Kind::Object: {
      out += '{';
      bool first = true;
      for (const auto& kv : v.as_object()) {
        if (!first) out += ", ";
        first = false;
        dump_string(out, kv.first);
        out += ": ";
        dump_value(out, kv.second);
      }
      out += '}';
      break;
    }
    case json::Kind::String: dump_string(out, v.as_string()); break;
    default: out += v.dump(/*allow_nan=*/true); break;  // null, bools and numbers as Python
  }
}

}  // namespace

std::string dump_stdlib_json(const json::Value& value) {
  std::string out;
  dump_value(out, value);
  return out;
}

}  // namespace memmap_detail
}  // namespace tensordict
