// tdgen: YAML schemas -> typed C++ headers. All logic is in the tdgen library (driver.h).

#include <iostream>
#include <string>
#include <vector>

#include <tdgen/driver.h>

int main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  return tdgen::run_tdgen(args, std::cout, std::cerr);
}
