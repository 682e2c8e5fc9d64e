#pragma once
// Exception hierarchy of tensordict-cpp. Each class maps to the Python exception that Python
// tensordict raises in the same situation, so ported tests and user code can catch by kind.
// Messages name the key path, shape, file or line involved.

#include <stdexcept>
#include <string>
#include <utility>

#include <c10/util/StringUtil.h>

namespace tensordict {

/// Base of every error thrown by tensordict-cpp. Context lines (outer operations) can be added
/// while the exception unwinds; `what()` shows the message followed by them.
class Error : public std::runtime_error {
 public:
  explicit Error(std::string message);
  /// Appends a line describing an enclosing operation, e.g. "while stacking key 'obs'".
  void add_context(std::string context);
  const char* what() const noexcept override { return full_.c_str(); }
  /// The message without context lines.
  const std::string& message() const { return message_; }

 private:
  std::string message_;
  std::string full_;
};

/// A key is missing or already present (Python KeyError).
class KeyError : public Error { using Error::Error; };
/// An argument has the right type but a bad value (Python ValueError).
class ValueError : public Error { using Error::Error; };
/// An entry or argument has the wrong kind (Python TypeError).
class TypeError : public Error { using Error::Error; };
/// An index is out of range or has too many dimensions (Python IndexError).
class IndexError : public Error { using Error::Error; };
/// Anything else Python reports as RuntimeError.
class RuntimeError : public Error { using Error::Error; };
/// A shape or batch size does not match (Python RuntimeError).
class ShapeError : public RuntimeError { using RuntimeError::RuntimeError; };
/// A locked tensordict refused a change (Python RuntimeError).
class LockedError : public RuntimeError { using RuntimeError::RuntimeError; };
/// Stored data is malformed or unreadable: names the file (Python RuntimeError / OSError).
class StorageError : public RuntimeError { using RuntimeError::RuntimeError; };
/// An operation the backend or this version does not support (Python NotImplementedError).
class NotImplementedError : public Error { using Error::Error; };

}  // namespace tensordict

/// Throws `ErrorType` with the concatenated message parts when `cond` is false.
/// TD_CHECK(dim < n, IndexError, "dim ", dim, " is out of range for ", n, " batch dims");
#define TD_CHECK(cond, ErrorType, ...)                              \
  do {                                                              \
    if (__builtin_expect(!(cond), 0)) {                             \
      throw ::tensordict::ErrorType(::c10::str(__VA_ARGS__));       \
    }                                                               \
  } while (0)

/// Throws `ErrorType` unconditionally with the concatenated message parts.
#define TD_THROW(ErrorType, ...) throw ::tensordict::ErrorType(::c10::str(__VA_ARGS__))
