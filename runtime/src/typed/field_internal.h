#pragma once
// What the typed field sources (field.cpp, named_dims.cpp) share.

#include <cstdint>
#include <string>

#include <c10/util/ArrayRef.h>

#include <tensordict/entry.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/typed/field.h>

namespace tensordict {
namespace typed {

/// "[3, 4]": a shape as the typed checks' messages write it.
std::string dims_str(c10::IntArrayRef dims);
/// The entry `name` of `td` as the checks need it. A backend whose reads are copies (a file, a
/// server) gives a tensor leaf as a meta tensor of its shape and dtype, from its metadata:
/// checking a store's fields must not read its data.
Entry checked_entry(const TensorDict& td, const char* name);
/// The size the tensor fields set in `td` give the named dim `dim` (the first one found), or -1.
int64_t named_dim_size(const Schema& schema, const TensorDict& td, const char* dim);

}  // namespace typed
}  // namespace tensordict
