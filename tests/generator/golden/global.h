// Golden input: the C++ twin of global.yaml (no namespace, an empty class, a tensorclass
// extending a tensorclass).
#pragma once

#include <string>

#include <tensordict/schema.h>

namespace schema {  // generated into the global namespace

struct TD_TYPED_TENSORDICT Empty {};

struct TD_TENSORCLASS Base {
  td::schema::Tensor<td::schema::complex64, 2, td::schema::any_size> a;
};

struct TD_TENSORCLASS Derived : Base {
  TD_OPTIONAL td::schema::Tensor<td::schema::bfloat16, td::schema::any_shape> b;
  TD_OPTIONAL std::string c;
};

}  // namespace schema
