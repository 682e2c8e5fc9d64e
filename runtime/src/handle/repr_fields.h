#pragma once
// Pieces of the repr layout a backend reuses for its own parts (a lazy stack's
// exclusive_fields).

#include <string>
#include <vector>

#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace detail {

/// The sorted "key: Value(...)" lines of `keys` of `td`, each on its own line after a newline
/// (the text between the braces of `fields={...}`, before indenting).
std::string fields_repr(const TensorDict& td, const std::vector<std::string>& keys);
/// Python's textwrap.indent with `n` spaces.
std::string indent_lines(const std::string& text, size_t n);

}  // namespace detail
}  // namespace tensordict
