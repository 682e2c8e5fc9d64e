#pragma once
// Formatting helpers shared by error messages and repr (Python spellings).

#include <string>
#include <string_view>
#include <vector>

#include <c10/core/ScalarType.h>
#include <c10/util/ArrayRef.h>

namespace tensordict {
namespace detail {

/// torch.Size([3, 4])
std::string size_str(c10::IntArrayRef sizes);
/// ['a', 'b'] (sorted, as Python's KeyError messages list them)
std::string keys_str(std::vector<std::string> keys);
/// Appends `text` with control bytes escaped as Python's repr does (\x00, \n, \t, \r); with a
/// `quote`, backslashes and that quote are escaped too (the body of a quoted repr).
void append_escaped(std::string& out, std::string_view text, char quote);
/// `text` as it is, but with control bytes escaped (\x00, \n, ...): a message quoting a key
/// must not be cut short at a NUL byte.
std::string printable(std::string_view text);

}  // namespace detail
}  // namespace tensordict
