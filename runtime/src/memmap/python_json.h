#pragma once
// JSON text as Python's stdlib `json.dumps` writes it by default (", " and ": " separators,
// \uXXXX escapes for non-ASCII, bare NaN/Infinity): the style of the meta.json files Python
// tensordict writes when orjson is not installed, e.g. its own test artifacts.

#include <string>

#include <tensordict/json.h>

namespace tensordict {
namespace memmap_detail {

/// ValueError when a string is not valid UTF-8 (Python strings always are).
std::string dump_stdlib_json(const json::Value& value);

}  // namespace memmap_detail
}  // namespace tensordict
