// The YAML frontend: a schema text through parse and sema (nothing is written).
#include <cstdint>
#include <string>

#include <tdgen/diagnostic.h>
#include <tdgen/sema.h>
#include <tdgen/yaml_frontend.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    tdgen::Module module;
    module.files.push_back(tdgen::parse_yaml_schema(text, "fuzz.yaml"));
    module.files[0].imports.clear();  // imports name files; this target reads one text
    module.roots = {0};
    (void)tdgen::resolve(std::move(module));
  } catch (const tdgen::Diagnostic&) {
  }
  return 0;
}
