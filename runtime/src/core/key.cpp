#include <tensordict/key.h>

#include <ostream>

#include "core/format.h"

namespace tensordict {

NestedKey::NestedKey(std::initializer_list<std::string_view> parts) {
  parts_.reserve(parts.size());
  for (std::string_view p : parts) parts_.emplace_back(p);
}

NestedKey NestedKey::child(std::string_view part) const {
  NestedKey out = *this;
  out.parts_.emplace_back(part);
  return out;
}

std::string NestedKey::join(std::string_view separator) const {
  std::string out;
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (i) out += separator;
    out += parts_[i];
  }
  return out;
}

NestedKey NestedKey::split(std::string_view joined, std::string_view separator) {
  std::vector<std::string> parts;
  size_t start = 0;
  for (;;) {
    const size_t pos = separator.empty() ? std::string_view::npos : joined.find(separator, start);
    if (pos == std::string_view::npos) {
      parts.emplace_back(joined.substr(start));
      return NestedKey(std::move(parts));
    }
    parts.emplace_back(joined.substr(start, pos - start));
    start = pos + separator.size();
  }
}

namespace {
void append_quoted(std::string& out, const std::string& s) {
  // Python's repr of a str: single quotes unless the text holds one and no double quote.
  const bool use_double = s.find('\'') != std::string::npos && s.find('"') == std::string::npos;
  const char q = use_double ? '"' : '\'';
  out += q;
  // Control bytes (NUL included) are escaped: an error message must not end at a NUL.
  detail::append_escaped(out, s, q);
  out += q;
}
}  // namespace

std::string NestedKey::repr() const {
  if (parts_.size() == 1) {
    std::string out;
    append_quoted(out, parts_[0]);
    return out;
  }
  std::string out = "(";
  for (size_t i = 0; i < parts_.size(); ++i) {
    if (i) out += ", ";
    append_quoted(out, parts_[i]);
  }
  if (parts_.size() == 1) out += ",";
  out += ")";
  return out;
}

std::ostream& operator<<(std::ostream& os, const NestedKey& key) { return os << key.repr(); }

}  // namespace tensordict
