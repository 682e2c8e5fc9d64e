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

# Tests, examples and doc snippets are thin code over the runtime and LibTorch, so optimising them
# buys nothing at run time; at -O2 -g they were most of the build (a contract test file: 70 s,
# 18 s at -O0). They get these options after the build type's (line tables keep backtraces).
set(TENSORDICT_TEST_CODE_OPTIONS "-O0;-g1" CACHE STRING
    "Compile options of tests, examples and doc snippets, after the build type's (GCC and Clang)")
add_library(tensordict_test_code INTERFACE)
target_compile_options(tensordict_test_code INTERFACE
  $<$<CXX_COMPILER_ID:GNU,Clang>:${TENSORDICT_TEST_CODE_OPTIONS}>)

# Precompiled headers: <ATen/ATen.h> is ~10 s of every source that includes it. Only sources that
# include the precompiled header themselves get it, so no file compiles only thanks to it.
option(TENSORDICT_PRECOMPILE_HEADERS "Precompile ATen for the runtime and Catch for the tests" ON)

# tensordict_cpp_sources(<target> <var>): the absolute paths of <target>'s .cpp sources.
function(tensordict_cpp_sources target var)
  get_target_property(sources ${target} SOURCES)
  get_target_property(source_dir ${target} SOURCE_DIR)
  set(out)
  foreach(src IN LISTS sources)
    if(src MATCHES "\\.cpp$")
      get_filename_component(path ${src} ABSOLUTE BASE_DIR ${source_dir})
      list(APPEND out ${path})
    endif()
  endforeach()
  set(${var} ${out} PARENT_SCOPE)
endfunction()

# tensordict_precompile(<target> REGEX <regex> HEADER <header> | REUSE_FROM <other>): a
# precompiled header for the .cpp sources of <target> that have a line matching <regex> (their own
# include of it); the other sources compile as before. Call it after the target's last sources.
function(tensordict_precompile target)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "REGEX;HEADER;REUSE_FROM" "")
  if(NOT TENSORDICT_PRECOMPILE_HEADERS)
    return()
  endif()
  get_target_property(source_dir ${target} SOURCE_DIR)
  tensordict_cpp_sources(${target} sources)
  set(using)
  foreach(path IN LISTS sources)
    file(STRINGS ${path} includes_it REGEX "${ARG_REGEX}")
    if(includes_it)
      list(APPEND using ${path})
    else()
      set_source_files_properties(${path} DIRECTORY ${source_dir} PROPERTIES SKIP_PRECOMPILE_HEADERS ON)
    endif()
  endforeach()
  if(using AND ARG_REUSE_FROM)
    target_precompile_headers(${target} REUSE_FROM ${ARG_REUSE_FROM})
  elseif(using)
    target_precompile_headers(${target} PRIVATE ${ARG_HEADER})
  endif()
endfunction()
