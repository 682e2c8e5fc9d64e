// docs/operations.md: the snippets, verbatim, in order, run by CTest (docs_snippet_operations).
// The shapes the comments state are checked after each block.
#include <cstdlib>
#include <iostream>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>

using namespace tensordict;

namespace {
void expect(bool ok, const char* what) {
  if (!ok) {
    std::cerr << "docs/operations.md: " << what << "\n";
    std::exit(1);
  }
}
}  // namespace

int main() {
  TensorDict td({{"a", at::ones({3, 4, 5})}, {"b", TensorDict({{"c", at::ones({3, 4, 5, 6})}}, {3, 4, 5})}}, {3, 4});
  TensorDict per_leaf = td.mean(feature);         // a: [3, 4]; b (batch [3, 4, 5]): c: [3, 4, 5]
  at::Tensor total = td.sum(reduce);              // 0-dim: every element of every leaf
  at::Tensor per_row = td.sum(reduce, feature);   // [3, 4]: all features of all leaves
  TensorDict pair({{"x", at::ones({3, 4, 5})}, {"y", at::ones({3, 4, 5})}}, {3, 4});
  at::Tensor by_dim = pair.sum(reduce, 1);        // [3, 5]: leaves joined along dim 1, summed there
  ValuesIndices top = td.max(0);                  // values and indices, batch [4]
  expect(per_leaf.get("a").sizes() == c10::IntArrayRef({3, 4}), "mean(feature) of a");
  expect(per_leaf.get({"b", "c"}).sizes() == c10::IntArrayRef({3, 4, 5}), "mean(feature) of b.c");
  expect(total.dim() == 0 && total.item<double>() == 60 + 360, "sum(reduce)");
  expect(at::equal(per_row, at::full({3, 4}, 35.0)), "sum(reduce, feature)");
  expect(at::equal(by_dim, at::full({3, 5}, 8.0)), "sum(reduce, 1)");
  expect(top.indices.get("a").sizes() == c10::IntArrayRef({4, 5}), "max(0)");

  TensorDict doubled = td.apply([](const at::Tensor& x) { return x * 2; });
  TensorDict firsts = td.apply(call_on_nested, [](const Entry& e) -> Entry {
    return e.is_tensordict() ? Entry(e.tensordict().select({"c"})) : e;
  });
  TensorDict target({}, {3, 4});
  ApplyOptions into;
  into.out = &target;
  td.apply([](const at::Tensor& x) { return x.neg(); }, into);  // fills target, returns it
  expect(at::equal(doubled.get("a"), at::full({3, 4, 5}, 2.0)), "apply");
  expect(firsts.keys(true, true) == td.keys(true, true), "call_on_nested");
  expect(at::equal(target.get({"b", "c"}), -td.get({"b", "c"})), "apply out");

  td.select_({"a", {"b", "c"}});
  td.exclude_({{"b", "c"}});
  expect(td.keys(true) == std::vector<NestedKey>({"a", "b"}), "select_ / exclude_");
  expect(td.get_tensordict("b").num_keys() == 0, "exclude_ of b.c");

  {
    // docs/operations.md#struct-arrays
    struct Pose { double t; float pos[3]; int64_t id; };
    std::vector<Pose> rows(100);
    auto layout = StructLayout<Pose>().field("t", &Pose::t).field({"state", "pos"}, &Pose::pos).field("id", &Pose::id);
    TensorDict td = from_struct_array(rows, layout);  // td.get({"state", "pos"}): [100, 3], a view
    td.get({"state", "pos"}).fill_(1.5);
    expect(td.get({"state", "pos"}).sizes() == c10::IntArrayRef({100, 3}) && rows[42].pos[2] == 1.5f, "struct array view");
  }
  return 0;
}
