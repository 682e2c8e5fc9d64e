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

# Sanitizers for the whole build, e.g. "address,undefined" (scripts/test.sh --sanitize): every
# report is an error that stops the process.
set(TENSORDICT_SANITIZE "" CACHE STRING "Sanitizers to build everything with (-fsanitize=...), empty for none")
if(TENSORDICT_SANITIZE)
  add_compile_options(-fsanitize=${TENSORDICT_SANITIZE} -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=${TENSORDICT_SANITIZE})
endif()

# libFuzzer targets (fuzz/): Clang only. Everything is built with the fuzzer's coverage
# instrumentation, so the readers the targets call are guided too.
option(TENSORDICT_BUILD_FUZZERS "Build the libFuzzer targets in fuzz/ (needs Clang and libFuzzer)" OFF)
if(TENSORDICT_BUILD_FUZZERS)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "TENSORDICT_BUILD_FUZZERS needs Clang (CC=clang-14 CXX=clang++-14); got ${CMAKE_CXX_COMPILER_ID}")
  endif()
  add_compile_options(-fsanitize=fuzzer-no-link)
endif()
