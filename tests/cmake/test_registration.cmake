# How the test executables are declared and their CTest tests registered (included by
# tests/CMakeLists.txt; the functions run in its directory, so CMAKE_CURRENT_SOURCE_DIR is tests/).

# tensordict_add_test(<name> SOURCES <files...> [LIBS <libs...>])
function(tensordict_add_test name)
  cmake_parse_arguments(PARSE_ARGV 1 ARG "" "" "SOURCES;LIBS")
  foreach(src IN LISTS ARG_SOURCES)
    # c10's logging header defines a glog-style CHECK that aborts instead of reporting; whichever
    # header comes last wins, so torch tests take Catch through support/catch_torch.h.
    file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/${src} uses_torch REGEX "#include [<\"](ATen/|torch/|tensordict/tensordict.h|tensordict/tensor_dict)")
    file(STRINGS ${CMAKE_CURRENT_SOURCE_DIR}/${src} direct_catch REGEX "#include <catch2/catch.hpp>")
    if(uses_torch AND direct_catch)
      message(FATAL_ERROR "${src}: include \"support/catch_torch.h\" instead of <catch2/catch.hpp> in a test that uses torch")
    endif()
  endforeach()
  add_executable(${name} ${ARG_SOURCES})
  target_include_directories(${name} PRIVATE ${CMAKE_CURRENT_SOURCE_DIR})
  target_link_libraries(${name} PRIVATE tensordict_catch_main TensorDict::runtime tensordict_warnings
                                        tensordict_test_code ${ARG_LIBS})
  target_compile_definitions(${name} PRIVATE TENSORDICT_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
  # Registered (and given the precompiled header) when the directory is done, so sources added
  # later with target_sources count too.
  # (EVAL: a deferred call's arguments are expanded when it runs, so the name is written in now.)
  cmake_language(EVAL CODE "cmake_language(DEFER CALL _tensordict_register_test_files [[${name}]])")
endfunction()

# One test per source file of test executable <name> that defines test cases. --warn NoTests
# fails a file whose tag matches no case (a renamed file cannot pass by running nothing).
function(_tensordict_register_test_files name)
  # Only for a test compiled with the header's own options: a test that adds sanitizer flags of
  # its own (typed_asan_tests) cannot use it. A sanitizer build, whose flags every target
  # shares, does (clang compiled each contract test file in about 15-20 s without it).
  get_target_property(options ${name} COMPILE_OPTIONS)
  get_target_property(pch_options tensordict_test_pch COMPILE_OPTIONS)
  list(FILTER options INCLUDE REGEX "^-fsanitize")
  list(FILTER pch_options INCLUDE REGEX "^-fsanitize")
  get_target_property(unity_safe ${name} TENSORDICT_UNITY_SAFE)
  if(TENSORDICT_UNITY_BUILD AND unity_safe)
    # Unity batches (top-level CMakeLists.txt) of the sources that include the precompiled
    # header, which all of a batch gets; the others compile alone, without it.
    set_target_properties(${name} PROPERTIES UNITY_BUILD ON UNITY_BUILD_BATCH_SIZE 8)
    if(TARGET tensordict_test_pch AND TENSORDICT_PRECOMPILE_HEADERS AND "${options}" STREQUAL "${pch_options}")
      tensordict_precompile(${name} REUSE_FROM tensordict_test_pch REGEX "^#include \"support/catch_torch\\.h\"")
      tensordict_cpp_sources(${name} sources)
      foreach(path IN LISTS sources)
        get_source_file_property(skip ${path} TARGET_DIRECTORY ${name} SKIP_PRECOMPILE_HEADERS)
        if(skip)
          set_source_files_properties(${path} TARGET_DIRECTORY ${name} PROPERTIES SKIP_UNITY_BUILD_INCLUSION ON)
        endif()
      endforeach()
    endif()
  elseif(TARGET tensordict_test_pch AND "${options}" STREQUAL "${pch_options}")
    tensordict_precompile(${name} REUSE_FROM tensordict_test_pch REGEX "^#include \"support/catch_torch\\.h\"")
  endif()
  # Files of long cases (TENSORDICT_TEST_SPLIT: their stems) get one test per case, so CTest runs
  # those cases side by side.
  get_target_property(split ${name} TENSORDICT_TEST_SPLIT)
  tensordict_cpp_sources(${name} sources)
  set(stems)
  foreach(path IN LISTS sources)
    file(STRINGS ${path} cases REGEX "^(TEST_CASE|TEMPLATE_[A-Z_]*TEST_CASE|SCENARIO)\\(")
    if(NOT cases)
      continue()
    endif()
    get_filename_component(stem ${path} NAME_WE)
    if(stem IN_LIST stems)
      message(FATAL_ERROR "${name}: two test sources named ${stem}; Catch's file tags would merge them")
    endif()
    list(APPEND stems ${stem})
    if(stem IN_LIST split)
      _tensordict_register_test_cases(${name} ${stem} ${path})
      continue()
    endif()
    add_test(NAME ${name}:${stem} COMMAND ${name} "[#${stem}]" --filenames-as-tags --warn NoTests)
    set_tests_properties(${name}:${stem} PROPERTIES TIMEOUT 900)
  endforeach()
  if(NOT stems)
    message(FATAL_ERROR "${name}: no source defines a test case")
  endif()
endfunction()

# One test per TEST_CASE of a file (only plain TEST_CASEs, named without Catch's filter
# characters, so the name given as the filter selects exactly that case). Cases inside
# `#ifdef NAME` ... `#endif` count only when the target defines NAME.
function(_tensordict_register_test_cases name stem path)
  get_target_property(definitions ${name} COMPILE_DEFINITIONS)
  set(defined)
  foreach(definition IN LISTS definitions)
    string(REGEX REPLACE "=.*" "" definition "${definition}")
    list(APPEND defined ${definition})
  endforeach()
  file(STRINGS ${path} lines REGEX "^(#if|#endif|TEST_CASE\\(|TEMPLATE_[A-Z_]*TEST_CASE\\(|SCENARIO\\()")
  # A case added to the file registers at the next build, not only at the next configure.
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${path})
  set(open_blocks)  # per enclosing #if: 1 compiled, 0 not (an #if expression counts as compiled)
  set(index 0)
  foreach(line IN LISTS lines)
    if(line MATCHES "^#if(n?)def ([A-Za-z0-9_]+)")
      set(compiled 0)
      if(CMAKE_MATCH_2 IN_LIST defined)
        set(compiled 1)
      endif()
      if(CMAKE_MATCH_1 STREQUAL "n")
        math(EXPR compiled "1 - ${compiled}")
      endif()
      list(APPEND open_blocks ${compiled})
    elseif(line MATCHES "^#if")
      list(APPEND open_blocks 1)
    elseif(line MATCHES "^#endif")
      list(POP_BACK open_blocks)
    elseif(NOT line MATCHES "^TEST_CASE\\(\"([^\";,*~\\[]*)\"")
      message(FATAL_ERROR "${path}: a file split into one test per case holds only TEST_CASEs named without ;,*~[ characters")
    elseif(NOT 0 IN_LIST open_blocks)
      math(EXPR index "${index} + 1")
      add_test(NAME ${name}:${stem}:${index} COMMAND ${name} "${CMAKE_MATCH_1}" --warn NoTests)
      set_tests_properties(${name}:${stem}:${index} PROPERTIES TIMEOUT 900)
    endif()
  endforeach()
endfunction()
