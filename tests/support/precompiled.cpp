// The source that builds the tests' precompiled header (tests/CMakeLists.txt: tensordict_test_pch).
#include "support/catch_torch.h"
