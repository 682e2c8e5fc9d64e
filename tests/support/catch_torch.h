#pragma once
// Catch2 for tests that use torch: include this instead of <catch2/catch.hpp>, before any
// other header. c10's logging headers define a glog-style CHECK macro that aborts on failure
// and silently replaces Catch's CHECK when they come after catch.hpp; loading them first and
// dropping their CHECK keeps every CHECK a reported Catch assertion.
#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#undef CHECK
#include <catch2/catch.hpp>
