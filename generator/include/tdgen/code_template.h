#pragma once
// Text templates with named placeholders, kept as data files in templates/. A placeholder is
// `{{NAME}}` (upper-case letters, digits, underscores). Rendering substitutes each placeholder
// once, left to right; substituted text is never scanned again, so user text (doc comments)
// cannot inject placeholders. A placeholder without a value, or a value no placeholder uses,
// is a hard error naming the template file and line.

#include <map>
#include <stdexcept>
#include <string>

namespace tdgen {

/// A template file that cannot be read, or a rendering with missing or unused values.
class TemplateError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class CodeTemplate {
 public:
  /// `name` is used in errors (the template's file name).
  CodeTemplate(std::string name, std::string text) : name_(std::move(name)), text_(std::move(text)) {}
  /// Reads `dir/name`.
  static CodeTemplate load(const std::string& dir, const std::string& name);

  using Values = std::map<std::string, std::string>;
  std::string render(const Values& values) const;

  const std::string& name() const { return name_; }

 private:
  std::string name_;
  std::string text_;
};

}  // namespace tdgen
