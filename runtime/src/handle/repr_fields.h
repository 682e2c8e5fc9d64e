#pragma once
// Pieces of the repr layout a backend reuses for its own parts (a lazy stack's
// exclusive_fields).

#include <functional>
#include <string>
#include <vector>

#include <tensordict/tensor_dict.h>

namespace tensordict {
namespace detail {

/// How a nested tensordict at `key` prints, when the caller knows better than its own repr (a
/// typed class names its nested classes); empty: `child.repr()`.
using NestedRepr = std::function<std::string(const std::string& key, const TensorDict& child)>;

/// The sorted "key: Value(...)" lines of `keys` of `td`, each on its own line after a newline
/// (the text between the braces of `fields={...}`, before indenting). An entry that cannot be
/// read prints `<unreadable: why>`: printing never throws.
std::string fields_repr(const TensorDict& td, const std::vector<std::string>& keys,
                        const NestedRepr& nested_repr = {});
/// `td`'s repr with `class_name` as its type name and nested levels printed by `nested_repr`.
std::string repr_as(const TensorDict& td, const char* class_name, const NestedRepr& nested_repr);
/// Python's textwrap.indent with `n` spaces.
std::string indent_lines(const std::string& text, size_t n);

}  // namespace detail
}  // namespace tensordict
