# Compiler launcher and warnings shared by every target of the project.

find_program(TENSORDICT_CCACHE ccache)
if(TENSORDICT_CCACHE AND NOT CMAKE_CXX_COMPILER_LAUNCHER)
  set(CMAKE_C_COMPILER_LAUNCHER ${TENSORDICT_CCACHE})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${TENSORDICT_CCACHE})
  message(STATUS "tensordict-cpp: using ccache (${TENSORDICT_CCACHE})")
endif()

# Warnings for this project's own code; LibTorch's headers come in as system headers.
add_library(tensordict_warnings INTERFACE)
target_compile_options(tensordict_warnings INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:-Wall -Wextra -Wno-unused-parameter>)
