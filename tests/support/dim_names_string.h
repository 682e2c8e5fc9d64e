#pragma once
// How Catch prints DimNames in a failed check: ['env', None], as Python prints names. Without it
// Catch picks glog's operator<< for vectors, which cannot print an optional.
#include <string>

#include <tensordict/tensor_dict_base.h>

namespace Catch {
template <>
struct StringMaker<tensordict::DimNames> {
  static std::string convert(const tensordict::DimNames& names) {
    std::string out = "[";
    for (size_t i = 0; i < names.size(); ++i) out += (i ? ", " : "") + (names[i] ? "'" + *names[i] + "'" : "None");
    return out + "]";
  }
};
}  // namespace Catch
