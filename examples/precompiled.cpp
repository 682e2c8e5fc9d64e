// Builds the precompiled <ATen/ATen.h> the example programs reuse (examples/CMakeLists.txt).
#include <ATen/ATen.h>

int main() { return 0; }
