// One kernel per run of leaves (issue 34 item 1, Note [Packed runs]): a consolidated tensordict of
// mixed dtypes runs each op once per dtype, one that Python's layout pads reads over the padding
// out of place (and writes it in place only where it is nobody's), and every result equals the
// per-leaf one. Kernels are counted with a RecordFunction callback: the per-leaf path makes one
// call per leaf.
#include "support/catch_torch.h"

#include <string>

#include <tensordict/backends/consolidated.h>
#include <tensordict/entry.h>
#include <tensordict/ops.h>

#include "backends/in_memory/intact_result.h"
#include "backends/in_memory/intact_runs.h"
#include "backends/in_memory/tensor_dict_impl.h"
#include "ops/packed_runs.h"
#include "support/runs_fixtures.h"

using namespace tensordict;

// A namespace of its own, not an anonymous one: the sanitizer build compiles test files together
// (unity build), where the helpers of another file share the anonymous namespace.
namespace packed_runs_test {
namespace {

using runs_fixtures::KernelCount;
using runs_fixtures::mixed;
using runs_fixtures::require_same;
using runs_fixtures::storages;

// A leaf's byte offset in its consolidated storage.
int64_t byte_offset(const TensorDict& c, const NestedKey& key) {
  const at::Tensor t = c.get(key);
  return t.storage_offset() * static_cast<int64_t>(t.element_size());
}

}  // namespace

TEST_CASE("consolidate lays each dtype's leaves out together, and reads back", "[unit][packed][runs]") {
  const TensorDict plain = mixed();
  const TensorDict c = consolidate(plain);
  // Groups in the order the dtypes first appear (float, double, int64), key order within each.
  CHECK(byte_offset(c, "f0") == 0);
  CHECK(byte_offset(c, {"n", "f1"}) == 48);
  CHECK(byte_offset(c, "f3") == 48 + 80);
  CHECK(byte_offset(c, "d0") == 48 + 80 + 32);
  CHECK(byte_offset(c, {"n", "d1"}) == 160 + 32);
  CHECK(byte_offset(c, "i0") == 160 + 32 + 64);
  CHECK(consolidated_storage(c).numel() == 256 + 64 + 32 + 96);
  // The metadata gives each leaf its own [start, stop): the file and byte forms read back.
  const json::Value& leaf = *consolidated_metadata(c).find("leaves")->find("d0");
  CHECK(leaf.dump() == R"(["torch.float64",[4],160,192,0])");
  require_same(from_bytes(to_bytes(plain)), plain);
  require_same(c, plain);
  // One dtype: Python's key-order layout, byte for byte.
  const TensorDict floats = consolidate(TensorDict({{"b", at::ones({3})}, {"a", at::ones({2})}}, {}));
  CHECK(byte_offset(floats, "b") == 0);
  CHECK(byte_offset(floats, "a") == 16);  // 12 bytes and 4 of padding
}

TEST_CASE("out-of-place ops over mixed dtypes run once per dtype, exactly", "[unit][packed][runs]") {
  const TensorDict plain = mixed();
  const TensorDict c = consolidate(plain);
  TensorDict out;
  CHECK(KernelCount::of("aten::exp", [&] { out = c.exp(); }) == 3);
  require_same(out, plain.exp());
  CHECK(storages(out) == 3);
  CHECK(out.is_locked() == c.is_locked());
  // An int64 leaf times a c10::Scalar is two calls (the Scalar overload wraps it and calls the
  // Tensor one): at most two a run, where the per-leaf path makes at least one a leaf (9).
  CHECK(KernelCount::of("aten::mul", [&] { out = c * 2; }) <= 4);
  require_same(out, plain * 2);
  // The result's runs (a storage per dtype) are runs again: a chain stays at one kernel a dtype.
  const TensorDict once = c + 1;
  CHECK(KernelCount::of("aten::sub", [&] { out = once.sub(3); }) <= 4);
  require_same(out, (plain + 1).sub(3));
  CHECK(storages(out) == 3);
  // `to` the double run's own dtype returns its leaves themselves, as per leaf; the others convert
  // once a run.
  CHECK(KernelCount::of("aten::_to_copy", [&] { out = c.to(at::kDouble); }) == 2);
  require_same(out, plain.to(at::kDouble));
  CHECK(out.get("d0").is_same(c.get("d0")));
  require_same(c.clone(), plain.clone());
  require_same(c.clamp(-0.5, 0.5), plain.clamp(-0.5, 0.5));
}

TEST_CASE("an unread result over runs takes the next op over its storages, its leaves unmade",
          "[unit][packed][runs]") {
  const TensorDict plain = mixed();
  const TensorDict c = consolidate(plain);
  const TensorDict once = c * 2;
  const auto storages = in_memory::intact_runs(*once.impl());
  REQUIRE(storages);
  CHECK(storages->storages.size() == 3);
  TensorDict twice;
  CHECK(KernelCount::of("aten::exp", [&] { twice = once.exp(); }) == 3);
  CHECK(in_memory::intact_runs(*once.impl()));  // still unread: exp made none of its leaves
  CHECK(in_memory::intact_runs(*twice.impl()));
  require_same(twice, (plain * 2).exp());
  require_same(twice.sub(1), (plain * 2).exp().sub(1));
  // Read, its leaves are made: a leaf pointed elsewhere through its handle is seen by the next op.
  const TensorDict read = c * 2;
  at::Tensor f0 = read.get("f0");
  CHECK(in_memory::intact_runs(*read.impl()));  // its made leaves are as made
  f0.set_(at::zeros({4, 3}));
  CHECK_FALSE(in_memory::intact_runs(*read.impl()));
  CHECK(at::equal(read.exp().get("f0"), at::ones({4, 3})));
  // Written: its records are dropped.
  TensorDict written = c * 2;
  written.unlock_();  // (results keep their operand's lock)
  written.set("f3", at::full({4, 2}, 3.f));
  CHECK_FALSE(in_memory::intact_runs(*written.impl()));
  CHECK(at::allclose(written.exp().get("f3"), at::full({4, 2}, 3.f).exp()));
  // In place, an unread result takes the runs path over its made leaves.
  TensorDict inplace = c * 2;
  inplace.add_(1);
  require_same(inplace, plain * 2 + 1);
}

TEST_CASE("ops between two mixed consolidated tensordicts of one layout run once per dtype", "[unit][packed][runs]") {
  const TensorDict x = mixed(), y = mixed();
  const TensorDict a = consolidate(x), b = consolidate(y);
  TensorDict out;
  CHECK(KernelCount::of("aten::add", [&] { out = a + b; }) == 3);
  require_same(out, x + y);
  require_same(a.eq(b), x.eq(y));
  CHECK(storages(a.eq(b)) == 3);  // one bool result a run
  CHECK((a == a.clone()).all());
  CHECK_FALSE((a == b).all());
  require_same(a.maximum(b), x.maximum(y));
  // In place, a's storage written once per dtype.
  TensorDict xa = x.clone(), ya = y.clone();
  TensorDict target = consolidate(xa);
  const TensorDict partner = consolidate(ya);
  CHECK(KernelCount::of("aten::add_", [&] { target.add_(partner); }) == 3);
  xa.add_(ya);
  require_same(target, xa);
}

TEST_CASE("in-place ops over mixed dtypes write each dtype's run once, versions bumped", "[unit][packed][runs]") {
  TensorDict plain = mixed();
  TensorDict c = consolidate(plain);
  const at::Tensor f0 = c.get("f0");
  const auto version = f0._version();
  // (the int64 run's Scalar overload calls the Tensor one)
  CHECK(KernelCount::of("aten::mul_", [&] { c.mul_(3); }) <= 4);
  plain.mul_(3);
  require_same(c, plain);
  CHECK(f0._version() > version);
  CHECK(KernelCount::of("aten::zero_", [&] { c.zero_(); }) == 3);
  plain.zero_();
  require_same(c, plain);
}

TEST_CASE("an in-place op a packed storage's dtype refuses bumps no version, as per leaf", "[unit][packed][runs]") {
  // Bool leaves tiling one storage: mul_(2) cannot cast its result back, before any element is
  // written, so no held leaf's version moves (a helper's fuzz found it bumped).
  const at::Tensor base = at::rand({2, 3}).gt(0.5);
  TensorDict td({}, {3});
  td.set("a", base[0]);
  td.set("b", base[1]);
  const at::Tensor a = td.get("a");
  const auto version = a._version();
  const at::Tensor before = base.clone();
  try {
    td.mul_(2);
    FAIL("mul_(2) of bool leaves did not raise");
  } catch (const tensordict::Error& e) {
    CHECK_THAT(e.what(), Catch::Contains("'a'"));
  }
  CHECK(a._version() == version);
  CHECK(at::equal(base, before));
}

TEST_CASE("reductions, all() and any() over mixed dtypes read each run once", "[unit][packed][runs]") {
  const TensorDict plain = mixed();
  const TensorDict c = consolidate(plain);
  CHECK(at::allclose(c.sum(reduce), plain.sum(reduce), 1e-5, 1e-5));
  CHECK(c.sum(reduce).scalar_type() == plain.sum(reduce).scalar_type());
  CHECK(at::allclose(c.mean(reduce), plain.mean(reduce), 1e-5, 1e-5));
  CHECK(at::equal(c.amax(reduce), plain.amax(reduce)));
  const TensorDict positive = c.gt(-100);
  CHECK(positive.all());
  CHECK(c.gt(100).any() == false);
  CHECK(c.lt(0).any() == plain.lt(0).any());
}

TEST_CASE("reductions over runs that padding splits read one strided view, never the padding",
          "[unit][packed][runs]") {
  // Python's layout: 6 leaves of 3 floats, each followed by 4 bytes of padding.
  TensorDict plain({}, {3});
  for (int i = 0; i < 6; ++i) plain.set("l" + std::to_string(i), at::randn({3}));
  const TensorDict c = consolidate(plain);
  REQUIRE(consolidated_storage(c).numel() == 6 * 16);
  // at::sum of one tensor: its calls through the dispatcher (the overload without dims calls the other).
  const at::Tensor matrix = at::arange(24, at::kFloat).reshape({4, 6});
  const int one_sum = KernelCount::of("aten::sum", [&] { at::sum(matrix); });
  at::Tensor sum;
  CHECK(KernelCount::of("aten::sum", [&] { sum = c.sum(reduce); }) == one_sum);
  CHECK(KernelCount::of("aten::cat", [&] { c.sum(reduce); }) == 0);
  CHECK(at::allclose(sum, plain.sum(reduce)));
  CHECK(at::allclose(c.mean(reduce), plain.mean(reduce)));
  CHECK(at::allclose(c.std(reduce), plain.std(reduce)));
  CHECK(at::equal(c.amin(reduce), plain.amin(reduce)));
  // Found from the records of the consolidated levels: no leaf made.
  const TensorDictImpl* root = in_memory::packed_level(*c.impl());
  REQUIRE(root != nullptr);
  CHECK(root->has_lazy_leaves());
  // A result's runs hold the image of the padding (1 here): the views skip it too, from the
  // shape of an unread (deferred) result, its leaves still unmade, and from the records of its
  // levels once one leaf was read.
  const TensorDict unread = c + 1;
  CHECK(at::allclose(unread.sum(reduce), (plain + 1).sum(reduce)));
  CHECK(at::allclose(unread.mean(reduce), (plain + 1).mean(reduce)));
  CHECK(in_memory::packed_level(*unread.impl())->is_deferred());
  TensorDict nested_plain({}, {3});
  for (int i = 0; i < 8; ++i) nested_plain.set({i < 3 ? "a" : "b", "l" + std::to_string(i)}, at::randn({3}));
  // Double leaves too: two runs, which every level's records number alike.
  for (int i = 0; i < 4; ++i) nested_plain.set({i < 2 ? "a" : "b", "d" + std::to_string(i)}, at::randn({3, 2}, at::kDouble));
  const TensorDict nested_unread = consolidate(nested_plain) + 1;
  CHECK(at::allclose(nested_unread.mean(reduce), (nested_plain + 1).mean(reduce)));
  CHECK(in_memory::packed_level(*nested_unread.impl())->is_deferred());
  const TensorDict read_result = c + 1;
  CHECK(read_result.get("l0").defined());
  CHECK(KernelCount::of("aten::cat", [&] { sum = read_result.mean(reduce); }) == 0);
  CHECK(at::allclose(sum, (plain + 1).mean(reduce)));
  // An empty leaf of another dtype holds nothing, but promotes the result as per leaf.
  TensorDict with_empty = plain.clone();
  with_empty.set("z", at::empty({3, 0}, at::kDouble));
  CHECK(consolidate(with_empty).sum(reduce).scalar_type() == at::kDouble);
  CHECK(with_empty.sum(reduce).scalar_type() == at::kDouble);
  // Rows of a matrix cut short: the column left out is padding no leaf holds, read by no kernel.
  TensorDict rows({}, {5});
  for (int i = 0; i < 4; ++i) rows.set("r" + std::to_string(i), matrix[i].narrow(0, 0, 5));
  CHECK(KernelCount::of("aten::sum", [&] { sum = rows.sum(reduce); }) == one_sum);
  CHECK(KernelCount::of("aten::cat", [&] { rows.sum(reduce); }) == 0);
  CHECK(sum.item<float>() == matrix.narrow(1, 0, 5).sum().item<float>());
  CHECK(rows.amax(reduce).item<float>() == 22);
  const at::Tensor int_matrix = matrix.to(at::kLong);
  TensorDict int_rows({}, {5});
  for (int i = 0; i < 4; ++i) int_rows.set("r" + std::to_string(i), int_matrix[i].narrow(0, 0, 5));
  int_rows.set("z", at::empty({5, 0}));  // float: the mean of the joined int64 leaves is defined
  CHECK(KernelCount::of("aten::reshape", [&] { sum = int_rows.mean(reduce); }) == 1);  // the 2-D view (per leaf: 5)
  CHECK(sum.item<float>() == matrix.narrow(1, 0, 5).mean().item<float>());
  // An empty leaf on another device: per leaf, as `cat` decides (here: the meta device).
  TensorDict mixed_devices({}, {5});
  for (int i = 0; i < 4; ++i) mixed_devices.set("r" + std::to_string(i), matrix[i].narrow(0, 0, 5));
  mixed_devices.set("z", at::empty({5, 0}, at::TensorOptions().device(at::kMeta)));
  std::vector<at::Tensor> parts;
  for (const auto& e : mixed_devices.values(true, true)) parts.push_back(e.tensor().reshape({-1}));
  CHECK(mixed_devices.sum(reduce).device() == at::cat(parts).sum().device());
  // Two sizes, each evenly spaced: two views, joined; sizes alternating: per leaf. Same values.
  TensorDict two({}, {3});
  for (int i = 0; i < 4; ++i) two.set("a" + std::to_string(i), at::randn({3}));
  for (int i = 0; i < 4; ++i) two.set("b" + std::to_string(i), at::randn({3, 5}));
  const TensorDict two_c = consolidate(two);
  CHECK(KernelCount::of("aten::sum", [&] { sum = two_c.sum(reduce); }) == one_sum);
  CHECK(KernelCount::of("aten::cat", [&] { two_c.sum(reduce); }) == 1);
  CHECK(KernelCount::of("aten::reshape", [&] { two_c.sum(reduce); }) == 2);  // a view a size, not a leaf
  CHECK(at::allclose(sum, two.sum(reduce), 1e-5, 1e-5));
  TensorDict alternating({}, {3});
  for (int i = 0; i < 4; ++i) {
    alternating.set("k" + std::to_string(2 * i), at::randn({3}));
    alternating.set("k" + std::to_string(2 * i + 1), at::randn({3, 5}));
  }
  CHECK(at::allclose(consolidate(alternating).sum(reduce), alternating.sum(reduce), 1e-5, 1e-5));
  // Leaves that overlap count their shared elements twice, as per leaf.
  const at::Tensor base = at::arange(8, at::kFloat);
  const TensorDict overlapping({{"a", base.narrow(0, 0, 4)}, {"b", base.narrow(0, 2, 4)}, {"c", base.narrow(0, 6, 2)}},
                               {});
  CHECK(overlapping.sum(reduce).item<float>() == (0 + 1 + 2 + 3) + (2 + 3 + 4 + 5) + (6 + 7));
}

TEST_CASE("Python's padding is read over out of place, written in place only where it is nobody's",
          "[unit][packed][runs]") {
  // 3-float leaves: each padded with 4 bytes, as Python lays them out.
  TensorDict plain({}, {3});
  for (int i = 0; i < 6; ++i) plain.set("l" + std::to_string(i), at::randn({3}));
  TensorDict c = consolidate(plain);
  const at::Tensor storage = consolidated_storage(c);
  REQUIRE(storage.numel() == 6 * 16);
  TensorDict doubled;
  CHECK(KernelCount::of("aten::mul", [&] { doubled = c * 2; }) == 1);  // one run over the padding
  require_same(doubled, plain * 2);
  CHECK(storages(doubled) == 1);
  // A consolidated root holds every leaf of its storage: in place, one kernel over its padding too.
  CHECK(KernelCount::of("aten::add_", [&] { c.add_(1); }) == 1);
  CHECK(KernelCount::of("aten::mul_", [&] { c.mul_(-2); }) == 1);
  plain.add_(1).mul_(-2);
  require_same(c, plain);
  // A result's runs hold the image of padding, never written in place: per leaf, the image kept.
  const at::Tensor result_storage = doubled.get("l0");
  const at::Tensor whole = at::empty({0}, result_storage.options()).set_(result_storage.storage());
  REQUIRE(whole.numel() >= 6 * 4 - 1);
  const at::Tensor images_before = whole.narrow(0, 3, 1).clone();
  doubled.add_(1);
  require_same(doubled, (plain.clone().div_(-2).sub_(1)) * 2 + 1);
  CHECK(at::equal(whole.narrow(0, 3, 1), images_before));
  // A nested level of a consolidated root is no root: its runs hold its siblings' leaves.
  TensorDict nested_plain({}, {3});
  for (int i = 0; i < 4; ++i) nested_plain.set({"n", "l" + std::to_string(i)}, at::randn({3}));
  for (int i = 0; i < 4; ++i) nested_plain.set("m" + std::to_string(i), at::randn({3}));
  const TensorDict nested_c = consolidate(nested_plain);
  TensorDict n = nested_c.get_tensordict("n");
  n.add_(1);
  nested_plain.get_tensordict("n").add_(1);
  require_same(nested_c, nested_plain);
  // Integer leaves never run over padding: per leaf (one run a leaf gains nothing), the same values.
  TensorDict ints({}, {3});
  for (int i = 0; i < 4; ++i) ints.set("i" + std::to_string(i), at::randint(-5, 5, {3}, at::kInt));
  const TensorDict ci = consolidate(ints);
  require_same(ci * 3, ints * 3);
  CHECK(storages(ci * 3) == 4);
}

TEST_CASE("a subset of a consolidated tensordict runs over its own leaves only", "[unit][packed][runs]") {
  TensorDict plain({}, {4});
  for (int i = 0; i < 8; ++i) plain.set("l" + std::to_string(i), at::randn({4, 2}));
  TensorDict c = consolidate(plain);
  TensorDict out;
  CHECK(KernelCount::of("aten::exp", [&] { out = c.select({"l0", "l1", "l5", "l6"}).exp(); }) == 2);
  require_same(out, plain.select({"l0", "l1", "l5", "l6"}).exp());
  const at::Tensor kept = c.get("l3").clone();
  TensorDict subset = c.exclude({"l3"});
  CHECK(KernelCount::of("aten::mul_", [&] { subset.mul_(10); }) == 2);  // l0-l2 and l4-l7
  CHECK(at::equal(c.get("l3"), kept));  // between two runs, never written
  CHECK(at::allclose(c.get("l4"), plain.get("l4") * 10));
}

TEST_CASE("leaves that overlap, are not contiguous or need grad take the per-leaf path", "[unit][packed][runs]") {
  // Overlapping views: in place, the shared elements change twice, as leaf by leaf.
  at::Tensor x = at::zeros({6});
  TensorDict overlap({{"a", x.narrow(0, 0, 4)}, {"b", x.narrow(0, 2, 4)}, {"c", at::zeros({4}, at::kDouble)}}, {4});
  overlap.add_(1);
  CHECK(at::equal(x, at::tensor({1.f, 1.f, 2.f, 2.f, 1.f, 1.f})));
  // A transposed leaf among packed ones: per leaf, the same values.
  TensorDict plain = mixed();
  TensorDict c = consolidate(plain);
  TensorDict partial = c.clone();
  partial.set("t", at::randn({3, 4}).t());
  TensorDict expected = plain.clone();
  expected.set("t", partial.get("t"));
  require_same(partial.exp(), expected.exp());
  // A leaf that needs grad: autograd sees every op.
  TensorDict grads = consolidate(TensorDict({{"a", at::randn({4})}, {"b", at::randn({4})}, {"c", at::randn({4}, at::kDouble)}}, {4})).clone();
  grads.get("a").requires_grad_(true);
  grads.get("c").requires_grad_(true);
  const TensorDict doubled = grads * 2;
  (doubled.get("a").sum() + doubled.get("c").sum()).backward();
  CHECK(at::equal(grads.get("a").grad(), at::full({4}, 2.f)));
}

TEST_CASE("an in-place error in any run writes the leaves before the failing key only, as per leaf",
          "[unit][packed][runs]") {
  TensorDict plain({}, {4});
  plain.set("f0", at::ones({4, 2}));
  plain.set("b0", at::ones({4, 2}, at::kBool));
  plain.set("f1", at::ones({4, 2}));
  plain.set("b1", at::ones({4, 2}, at::kBool));
  // bool * 2.5 cannot be cast back. Per leaf (and in Python): f0 written, then b0 raises, f1 and
  // b1 as they were. The float run comes first in the storage; the bool run fails over an empty
  // slice before either is written, and the per-leaf path names b0.
  TensorDict c = consolidate(plain);
  TensorDict per_leaf = plain.clone();
  CHECK_THROWS_WITH(per_leaf.mul_(2.5), Catch::Contains("'b0'"));
  CHECK_THROWS_WITH(c.mul_(2.5), Catch::Contains("'b0'"));
  for (const char* key : {"f0", "b0", "f1", "b1"}) CHECK(at::equal(c.get(key), per_leaf.get(key)));
  CHECK(at::equal(c.get("f0"), at::full({4, 2}, 2.5f)));
  CHECK(at::equal(c.get("f1"), at::ones({4, 2})));
  CHECK(c.get("b1").all().item<bool>());
  // The same over the runs a consolidated tree keeps intact, its leaves read (Note [Intact runs]),
  // and between two trees: a float partner for the bool run.
  TensorDict d = consolidate(plain);
  const std::vector<at::Tensor> held = {d.get("f0"), d.get("b0"), d.get("f1"), d.get("b1")};
  CHECK_THROWS_WITH(d.mul_(2.5), Catch::Contains("'b0'"));
  CHECK(at::equal(held[0], at::full({4, 2}, 2.5f)));
  CHECK(at::equal(held[2], at::ones({4, 2})));
  TensorDict e = consolidate(plain);
  TensorDict floats({}, {4});
  for (const char* key : {"f0", "b0", "f1", "b1"}) floats.set(key, at::full({4, 2}, 3.f));
  CHECK_THROWS_WITH(e.add_(floats), Catch::Contains("'b0'"));
  CHECK(at::equal(e.get("f0"), at::full({4, 2}, 4.f)));
  CHECK(at::equal(e.get("f1"), at::ones({4, 2})));
  // A kernel missing for one dtype (clamp has none for complex), whether its run comes first in
  // the storage or after the float run whose leaves lie on both sides of the failing key.
  for (const bool complex_first : {true, false}) {
    TensorDict z({}, {4});
    const auto add_complex = [&] {
      z.set("c", at::ones({4}, at::kComplexFloat));
      z.set("d", at::ones({4}, at::kComplexFloat));
    };
    if (complex_first) add_complex();
    z.set("a", at::full({4}, 5.f));
    if (!complex_first) add_complex();
    z.set("f", at::full({4}, 5.f));
    z.set("g", at::full({4}, 5.f));
    TensorDict cz = consolidate(z);
    REQUIRE(runs_fixtures::storages(cz) == 1);
    TensorDict per_leaf_z = z.clone();
    CHECK_THROWS_WITH(per_leaf_z.clamp_(0, 1), Catch::Contains("'c'"));
    CHECK_THROWS_WITH(cz.clamp_(0, 1), Catch::Contains("'c'"));
    for (const char* key : {"a", "c", "d", "f", "g"}) CHECK(at::equal(cz.get(key), per_leaf_z.get(key)));
    CHECK(at::equal(cz.get("f"), at::full({4}, 5.f)));
  }
  // The first run failing writes nothing: the per-leaf path names the key, as before.
  TensorDict ints = consolidate(TensorDict({{"i", at::ones({4}, at::kLong)}, {"j", at::ones({4}, at::kLong)}, {"f", at::ones({4})}}, {4}));
  CHECK_THROWS_WITH(ints.sqrt_(), Catch::Contains("'i'"));
}

TEST_CASE("runs never pair overlapping bytes, never stretch over an empty leaf, never take a nested level",
          "[unit][packed][runs]") {
  // b's runs laid out as a's, but b's first run is a's second (x and y read q's bytes before p and
  // q write them), and b's second overlaps a's second in part: leaf by leaf, in key order.
  const at::Tensor p = at::arange(8, at::kFloat), q = at::arange(12, at::kFloat) + 100;
  TensorDict a({{"x", p.narrow(0, 0, 4)}, {"y", p.narrow(0, 4, 4)}, {"p", q.narrow(0, 0, 4)}, {"q", q.narrow(0, 4, 4)}}, {4});
  TensorDict b({{"x", q.narrow(0, 0, 4)}, {"y", q.narrow(0, 4, 4)}, {"p", q.narrow(0, 4, 4)}, {"q", q.narrow(0, 8, 4)}}, {4});
  const at::Tensor p0 = p.clone(), q0 = q.clone();
  a.add_(b);
  CHECK(at::equal(p, p0 + q0.narrow(0, 0, 8)));  // q as it was before p and q were written
  CHECK(at::equal(q.narrow(0, 0, 4), q0.narrow(0, 0, 4) + q0.narrow(0, 4, 4)));
  CHECK(at::equal(q.narrow(0, 4, 4), q0.narrow(0, 4, 4) + q0.narrow(0, 8, 4)));
  // An empty leaf a few bytes past the last one (here past the storage's end) is no reason to read
  // further: the runs stop at the last leaf with elements.
  const at::Tensor x = at::arange(10, at::kFloat);
  TensorDict tail({{"a", x.narrow(0, 0, 5)}, {"b", x.narrow(0, 5, 5)}, {"c", x.as_strided({0}, {1}, 11)}}, {});
  const TensorDict doubled = tail * 2;
  CHECK(at::equal(doubled.get("b"), x.narrow(0, 5, 5) * 2));
  CHECK(doubled.get("c").numel() == 0);
  // The nested level of a result over runs holds part of each storage: not an unread result of its own.
  const TensorDict plain = mixed();
  const TensorDict result = consolidate(plain) * 2;
  const TensorDict nested = result.get_tensordict("n");
  CHECK_FALSE(in_memory::intact_runs(*nested.impl()));
  require_same(nested + 1, plain.get_tensordict("n") * 2 + 1);
}

TEST_CASE("an integer kernel that fails midway is not run again leaf by leaf", "[unit][packed][runs]") {
  // floor_divide_ checks each divisor inside its loop: x's elements are divided, then y's zero
  // raises. The per-leaf path after that would divide x a second time.
  TensorDict plain({{"x", at::full({2}, 10, at::kLong)}, {"y", at::full({2}, 10, at::kLong)}}, {2});
  TensorDict c = consolidate(plain);
  const ops::LeafList a = {c.get("x"), c.get("y")};
  const at::Tensor divisors = at::tensor({2, 2, 0, 1}, at::kLong);
  const ops::LeafList b = {divisors.narrow(0, 0, 2), divisors.narrow(0, 2, 2)};
  CHECK_THROWS_WITH(ops::write_packed(
                        a, b, [](const at::Tensor& t, const at::Tensor& u) { t.floor_divide_(u); },
                        [](size_t i) { return NestedKey(i == 0 ? "x" : "y"); }, "floor_divide_"),
                    Catch::Contains("'y'"));
  CHECK(at::equal(c.get("x"), at::full({2}, 5, at::kLong)));  // divided once
}

}  // namespace packed_runs_test
