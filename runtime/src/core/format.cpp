#include "core/format.h"

#include <algorithm>

#include <tensordict/key.h>

namespace tensordict {
namespace detail {

std::string size_str(c10::IntArrayRef sizes) {
  std::string out = "torch.Size([";
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(sizes[i]);
  }
  out += "])";
  return out;
}

std::string keys_str(std::vector<std::string> keys) {
  std::sort(keys.begin(), keys.end());
  std::string out = "[";
  for (size_t i = 0; i < keys.size(); ++i) {
    if (i) out += ", ";
    out += NestedKey(keys[i]).repr();
  }
  out += "]";
  return out;
}

void append_escaped(std::string& out, std::string_view text, char quote) {
  static constexpr char kHex[] = "0123456789abcdef";
  for (char c : text) {
    const auto u = static_cast<unsigned char>(c);
    if (quote != '\0' && (c == '\\' || c == quote)) {
      out += '\\';
      out += c;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c == '\r') {
      out += "\\r";
    } else if (u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += kHex[u >> 4];
      out += kHex[u & 15];
    } else {
      out += c;
    }
  }
}

std::string printable(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_escaped(out, text, '\0');
  return out;
}

}  // namespace detail
}  // namespace tensordict
