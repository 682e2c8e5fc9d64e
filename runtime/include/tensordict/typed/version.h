#pragma once
// Version of the interface between tdgen's generated headers and the typed runtime. A generated
// header static_asserts it, so a header generated for another runtime fails to compile with a
// message saying to regenerate it rather than with obscure template errors.

#define TENSORDICT_TYPED_RUNTIME_VERSION 3
