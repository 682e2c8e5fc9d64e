#pragma once
// Keys. A key names an entry; a nested key names an entry inside nested tensordicts:
// "obs" and {"obs", "pixels"}. `NestedKey` owns its parts; `KeyRef` borrows them and is the
// parameter type of every lookup, so a string literal or a braced list costs no allocation.

#include <cstddef>
#include <initializer_list>
#include <iosfwd>
#include <string>
#include <string_view>
#include <vector>

namespace tensordict {

class KeyRef;

/// An owning key path, one string per nesting level.
class NestedKey {
 public:
  NestedKey() = default;
  NestedKey(const char* key) : parts_{std::string(key)} {}
  NestedKey(std::string key) { parts_.push_back(std::move(key)); }
  NestedKey(std::string_view key) : parts_{std::string(key)} {}
  NestedKey(std::initializer_list<std::string_view> parts);
  explicit NestedKey(std::vector<std::string> parts) : parts_(std::move(parts)) {}
  NestedKey(const KeyRef& key);

  const std::vector<std::string>& parts() const { return parts_; }
  size_t size() const { return parts_.size(); }
  bool empty() const { return parts_.empty(); }
  bool is_nested() const { return parts_.size() > 1; }
  const std::string& operator[](size_t i) const { return parts_[i]; }
  const std::string& front() const { return parts_.front(); }
  const std::string& back() const { return parts_.back(); }

  /// This key followed by `part` (one level deeper).
  NestedKey child(std::string_view part) const;
  /// Parts joined with `separator`, e.g. "a.b".
  std::string join(std::string_view separator) const;
  /// The inverse of join: "a.b" split at every (non-empty) `separator` into {"a", "b"}.
  static NestedKey split(std::string_view joined, std::string_view separator);
  /// Python spelling: 'a' for one part, ('a', 'b') for several.
  std::string repr() const;

  friend bool operator==(const NestedKey& a, const NestedKey& b) { return a.parts_ == b.parts_; }
  friend bool operator!=(const NestedKey& a, const NestedKey& b) { return a.parts_ != b.parts_; }
  friend bool operator<(const NestedKey& a, const NestedKey& b) { return a.parts_ < b.parts_; }

 private:
  std::vector<std::string> parts_;
};

std::ostream& operator<<(std::ostream& os, const NestedKey& key);

/// A borrowed key path. Only valid while the strings it views live: take it as a parameter,
/// never store it.
class KeyRef {
 public:
  KeyRef(const char* key) : single_(key), size_(1) {}
  KeyRef(const std::string& key) : single_(key), size_(1) {}
  KeyRef(std::string_view key) : single_(key), size_(1) {}
// The braced list outlives the call that takes the KeyRef, which is all a KeyRef is for.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Winit-list-lifetime"
#endif
  KeyRef(std::initializer_list<std::string_view> parts) : views_(parts.begin()), size_(parts.size()) {}
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif
  KeyRef(const NestedKey& key) : strings_(key.parts().data()), size_(key.size()) {}
  KeyRef(const std::vector<std::string>& parts) : strings_(parts.data()), size_(parts.size()) {}

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  std::string_view operator[](size_t i) const {
    if (views_ != nullptr) return views_[i];
    if (strings_ != nullptr) return strings_[i];
    return single_;
  }
  std::string_view back() const { return (*this)[size_ - 1]; }
  /// The first `n` parts.
  KeyRef prefix(size_t n) const {
    KeyRef copy = *this;
    copy.size_ = n;
    return copy;
  }

  NestedKey to_owned() const { return NestedKey(*this); }
  std::string repr() const { return to_owned().repr(); }

 private:
  std::string_view single_;
  const std::string_view* views_ = nullptr;
  const std::string* strings_ = nullptr;
  size_t size_ = 0;
};

inline NestedKey::NestedKey(const KeyRef& key) {
  parts_.reserve(key.size());
  for (size_t i = 0; i < key.size(); ++i) parts_.emplace_back(key[i]);
}

}  // namespace tensordict
