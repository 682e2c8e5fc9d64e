# Turns the probe's output (one name per line) into the body of a C++ string list.
#   cmake -DIN=<names.txt> -DOUT=<names.inc> -P to_initializer.cmake
cmake_minimum_required(VERSION 3.22)
file(STRINGS "${IN}" names)
list(SORT names)
set(out "// Generated from the runtime's public headers by tdgen_member_probe. Do not edit.\n")
foreach(name IN LISTS names)
  string(APPEND out "\"${name}\",\n")
endforeach()
file(WRITE "${OUT}" "${out}")
