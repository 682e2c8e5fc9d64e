#pragma once
// Diagnostics: every error tdgen reports is a compiler-style `file:line:column: message`, so
// editors and build logs point at the schema line. Checks throw a Diagnostic; the driver prints
// it on stderr and exits with 1.

#include <stdexcept>
#include <string>

#include <tdgen/ir.h>

namespace tdgen {

class Diagnostic : public std::runtime_error {
 public:
  Diagnostic(SourceLocation location, const std::string& message)
      : std::runtime_error(location.str() + ": " + message), location_(std::move(location)), message_(message) {}

  const SourceLocation& location() const { return location_; }
  /// The message without the location.
  const std::string& message() const { return message_; }

 private:
  SourceLocation location_;
  std::string message_;
};

}  // namespace tdgen
