#pragma once
// Catch2 for tests that use torch: include this instead of <catch2/catch.hpp>, before any
// other header. c10's logging headers define a glog-style CHECK macro that aborts on failure
// and silently replaces Catch's CHECK when they come after catch.hpp; loading them first and
// dropping their CHECK keeps every CHECK a reported Catch assertion.
// Guarded by Catch's own macro: the tests' precompiled header (tests/CMakeLists.txt) has run this
// already, and a second #undef would drop Catch's CHECK (#pragma once does not see through a PCH).
#ifndef TWOBLUECUBES_SINGLE_INCLUDE_CATCH_HPP_INCLUDED
#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#undef CHECK
#include <catch2/catch.hpp>
#endif
