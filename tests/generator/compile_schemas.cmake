# cmake -DCOMPILER=c++ -DFILES="a.h;b.h" -DINCLUDE=dir -P compile_schemas.cmake
# Each C++ schema header, included (-include: a header, not the main file) and checked by
# COMPILER with every warning an error.
foreach(file ${FILES})
  execute_process(
    COMMAND ${COMPILER} -std=c++17 -fsyntax-only -Wall -Wextra -Wpedantic -Werror -I${INCLUDE} -include ${file} -x c++ /dev/null
    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${COMPILER} ${file}:\n${out}")
  endif()
endforeach()
list(LENGTH FILES n)
message(STATUS "${n} schema headers compile warning-free with ${COMPILER}")
