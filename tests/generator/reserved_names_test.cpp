// tdgen's reserved field names: every member of TensorDict, TensorClass and TypedTensorDict (the
// typed operations included) and the generated class's own member types, derived from the
// public headers at build time. A field with such a name would hide the member.
#include "support/catch_torch.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include <tdgen/sema.h>

#include "generator/support.h"
#include "member_probe.h"

namespace {
bool reserved(const std::string& name) {
  const auto& names = tdgen::reserved_member_names();
  return std::binary_search(names.begin(), names.end(), name);
}
}  // namespace

TEST_CASE("tdgen reserves every member the public headers declare, as the compiler sees them", "[generator][names]") {
  // The same probe, compiled here against the headers as they are now: a member tdgen's list
  // lacks (a stale list, or a derivation that missed a header) fails this test.
  std::vector<std::string> missing;
  tdgen_probe::for_each_member_name([&](const char* name) {
    if (!reserved(name)) missing.emplace_back(name);
  });
  INFO("members of TensorDict / TensorClass / TypedTensorDict not reserved by tdgen:");
  for (const auto& m : missing) INFO(m);
  CHECK(missing.empty());
  CHECK(std::is_sorted(tdgen::reserved_member_names().begin(), tdgen::reserved_member_names().end()));
}

TEST_CASE("members made by macros and inherited from the typed roots are reserved", "[generator][names]") {
  // The review's examples, which a hand-kept list missed.
  for (const char* name : {"std", "abs", "add", "norm", "prod", "gather", "state_dict", "var", "amax", "quantile",
                           "logsumexp", "copy_"}) {
    INFO(name);
    CHECK(reserved(name));
  }
  // Every unary op and its in-place form (declared through TENSORDICT_FORALL_UNARY_OPS).
#define TDGEN_CHECK_UNARY(op) \
  CHECK(reserved(#op));        \
  CHECK(reserved(#op "_"));
  TENSORDICT_FORALL_UNARY_OPS(TDGEN_CHECK_UNARY)
#undef TDGEN_CHECK_UNARY
  // The typed classes' own members and the generated class's Traits.
  for (const char* name : {"from_tensordict", "typed_storage", "to_tensordict", "tensordict", "Traits"}) {
    INFO(name);
    CHECK(reserved(name));
  }
  // Not members, so allowed as field names (Python data often uses them).
  for (const char* name : {"data", "obs", "reward", "action", "depth", "dtype", "grad"}) {
    INFO(name);
    CHECK_FALSE(reserved(name));
  }
  // The batch-dim names are a member, as Python's TensorDict.names property: reserved.
  CHECK(reserved("names"));
}

TEST_CASE("a field named after a member, or whose in-place setter is one, is refused", "[generator][names][errors]") {
  tdgen_test::TempDir dir("tdgen_names");
  for (const char* field : {"std", "norm", "at", "gather"}) {
    INFO(field);
    const std::string schema = dir.write(std::string("c_") + field + ".yaml",
                                         std::string("namespace: n\nclasses:\n  C:\n    kind: typed_tensordict\n    fields:\n      ") +
                                             field + ": {dtype: float32}\n");
    auto r = tdgen_test::run({"--check", schema});
    CHECK(r.exit_code == 1);
    // `at` itself is free; its in-place setter set_at_ would hide TensorDict::set_at_.
    CHECK(r.err.find(std::string("clashes with the member '") + (std::string(field) == "at" ? "set_at_" : field) + "'") !=
          std::string::npos);
  }
}
