#pragma once
// Diagnostics: every error tdgen reports is a compiler-style `file:line:column: message`, so
// editors and build logs point at the schema line. Checks throw a Diagnostic; the checks of
// independent classes and fields are collected, so one run reports every error of a phase. The
// driver prints them on stderr and exits with 1.

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include <tdgen/ir.h>

namespace tdgen {

class Diagnostic : public std::runtime_error {
 public:
  Diagnostic(SourceLocation location, const std::string& message)
      : std::runtime_error(location.str() + ": " + message), location_(location), message_(message) {
    entries_.emplace_back(std::move(location), message);
  }

  /// Several errors reported at once (one per line, in the order given); the location and
  /// message are the first one's.
  static Diagnostic combined(const std::vector<Diagnostic>& all) {
    Diagnostic out = all.front();
    std::string text = all.front().what();
    for (size_t i = 1; i < all.size(); ++i) text += std::string("\n") + all[i].what();
    out.text_ = text;
    out.entries_.clear();
    for (const Diagnostic& d : all)
      for (const auto& entry : d.entries()) out.entries_.push_back(entry);
    return out;
  }
  const char* what() const noexcept override { return text_.empty() ? std::runtime_error::what() : text_.c_str(); }

  const SourceLocation& location() const { return location_; }
  /// The message without the location.
  const std::string& message() const { return message_; }
  /// Every error, location and message (one for a single diagnostic): a frontend that prints
  /// its own diagnostics (the C++ one, with Clang's caret) reports each at its place.
  const std::vector<std::pair<SourceLocation, std::string>>& entries() const { return entries_; }

 private:
  SourceLocation location_;
  std::string message_;
  std::string text_;  // every error of a combined diagnostic
  std::vector<std::pair<SourceLocation, std::string>> entries_;
};

}  // namespace tdgen
