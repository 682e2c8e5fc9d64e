// The public headers whose members a field may not shadow. Preprocessed (not compiled) at build
// time, so that names made by macros (the in-place `abs_` of TENSORDICT_FORALL_UNARY_OPS, ...)
// are seen as the compiler sees them.
#include <tensordict/tensor_dict.h>
#include <tensordict/typed/tensor_class.h>
#include <tensordict/typed/typed_tensor_dict.h>
