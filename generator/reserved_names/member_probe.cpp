// Prints the names a field of a generated class may not take, one per line (member_probe.h).
// Run at build time; its output is compiled into tdgen (reserved_names.inc).

#include <cstdio>

#include "member_probe.h"

int main() {
  tdgen_probe::for_each_member_name([](const char* name) { std::puts(name); });
  return 0;
}
