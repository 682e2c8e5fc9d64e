# Builds the negative-compile target (tests/CMakeLists.txt: every misuse case in one compile)
# and saves the compiler's output to LOG for the per-case tests. Fails when the build succeeds:
# every case must make it fail.
#   cmake -DBUILD_DIR=... -DTARGET=... -DLOG=... -P compile_cases.cmake
execute_process(COMMAND ${CMAKE_COMMAND} --build ${BUILD_DIR} --target ${TARGET}
                RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE output)
file(WRITE "${LOG}" "${output}")
if(result EQUAL 0)
  message(FATAL_ERROR "${TARGET} compiled: a misuse case no longer fails (output in ${LOG})")
endif()
message(STATUS "${TARGET} failed to compile, as every case must; output in ${LOG}")
