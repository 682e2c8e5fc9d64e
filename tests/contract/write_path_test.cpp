// Contract: every write reaches the storage through the backend (Note [Reads, copies and
// writes] in tensor_dict_base.h). Each in-place operation runs on the backend and on an
// in-memory twin; the backend must end up equal. On the copy-on-read proving backend a write
// made to a tensor handed out by `get` would be lost, so these tests fail for any operation that
// bypasses write_ / write_at_ / write_many_. Also: batched reads (one snapshot per operation),
// mixed trees, and the typed error of a backend that cannot write.

#include "support/catch_torch.h"

#include <functional>

#include <ATen/ATen.h>
#include <ATen/TensorIndexing.h>

#include "contract/backends.h"
#include "contract/helpers.h"

using namespace tensordict;
using at::indexing::Slice;
using contract::ContractBackends;
using testing_backends::CopyOnRead;

namespace {

TensorDict reference() {
  at::manual_seed(7);
  return TensorDict({{"f", at::rand({4, 3}) + 0.5},
                     {"i", at::arange(4)},
                     {"g", {{"d", at::rand({4}, at::kDouble) + 0.5}, {"h", at::rand({4, 2}) + 0.5}}}},
                    {4});
}

// Every leaf of `got` equals the same leaf of `expected` (dtype included).
void check_same_leaves(const TensorDict& got, const TensorDict& expected) {
  const auto keys = expected.keys(true, true);
  REQUIRE(got.keys(true, true).size() == keys.size());
  for (const auto& k : keys) {
    INFO("key " << k.repr());
    CHECK(got.get(k).scalar_type() == expected.get(k).scalar_type());
    CHECK(at::allclose(got.get(k).to(at::kDouble), expected.get(k).to(at::kDouble)));
  }
}

using InPlaceOp = std::function<void(TensorDict&)>;

// The in-place operations of the API, each as a user spells it.
std::vector<std::pair<std::string, InPlaceOp>> in_place_ops() {
  const at::Tensor mask = at::tensor({1, 0, 0, 1}).to(at::kBool);
  TensorDict other = reference().apply([](const at::Tensor& t) { return t * 2 + 1; });
  return {
      {"zero_", [](TensorDict& td) { td.zero_(); }},
      {"fill_", [](TensorDict& td) { td.fill_(3); }},
      {"fill_ key", [](TensorDict& td) { td.fill_({"g", "h"}, 5.0); }},
      {"add_ scalar", [](TensorDict& td) { td.add_(2); }},
      {"mul_ tensor", [](TensorDict& td) { td.mul_(at::tensor({1, 2, 3, 4})); }},
      {"sub_ tensordict", [=](TensorDict& td) { td.sub_(other); }},
      {"operator*=", [](TensorDict& td) { td *= 3; }},
      {"abs_", [](TensorDict& td) { td.exclude_({"i"}).neg_().abs_(); }},
      {"clamp_", [](TensorDict& td) { td.clamp_(1, 2); }},
      {"pow_", [](TensorDict& td) { td.pow_(2); }},
      {"maximum_", [=](TensorDict& td) { td.maximum_(other); }},
      {"lerp_", [=](TensorDict& td) { td.exclude_({"i"}).lerp_(other.exclude({"i"}), 0.25); }},
      {"addcmul_", [=](TensorDict& td) { td.exclude_({"i"}).addcmul_(other.exclude({"i"}), other.exclude({"i"}), 0.5); }},
      {"masked_fill_", [=](TensorDict& td) { td.masked_fill_(mask, 7); }},
      {"index_put_ tensor", [](TensorDict& td) { td.index_put_({Slice(1, 3)}, at::tensor(9.0)); }},
      {"index_put_ scalar", [](TensorDict& td) { td.index_put_({at::tensor({3, 0})}, 4); }},
      {"index_put_ mask", [=](TensorDict& td) { td.index_put_({mask}, -1); }},
      {"index_put_ tensordict", [=](TensorDict& td) { td.index_put_({Slice(0, 2)}, other.index({Slice(2, 4)})); }},
      {"set_", [](TensorDict& td) { td.set_({"g", "d"}, at::full({4}, 8.0, at::kDouble)); }},
      {"set_at_", [](TensorDict& td) { td.set_at_("f", at::ones({3}), {2}); }},
      {"update_", [=](TensorDict& td) { td.update_(other.select({"i", {"g", "h"}})); }},
      {"update inplace", [=](TensorDict& td) { td.update(other.select({"f"}), false, /*inplace=*/true); }},
      {"update_at_", [=](TensorDict& td) { td.update_at_(other.index({0}), {3}); }},
      {"copy_", [=](TensorDict& td) { td.copy_(other); }},
      {"apply_", [](TensorDict& td) { td.apply_([](const at::Tensor& x) { return x * 10; }); }},
      {"apply_ two", [=](TensorDict& td) { td.apply_([](const at::Tensor& x, const at::Tensor& y) { return x + y; }, other); }},
      {"load_state_dict", [=](TensorDict& td) { td.load_state_dict(other.state_dict()); }},
  };
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("every in-place operation reaches the storage", "[contract][write_path]", ContractBackends) {
  for (const auto& [name, op] : in_place_ops()) {
    INFO("operation " << name);
    TensorDict expected = reference();
    TensorDict td = TestType::make(reference());
    // Ops narrowing the keys first (exclude_) need a backend whose keys can change.
    const bool narrows = name == "abs_" || name == "lerp_" || name == "addcmul_";
    if (narrows && !TestType::kMutableKeys) continue;
    op(expected);
    op(td);
    check_same_leaves(td, expected);
    // Locked, the in-place forms are still allowed and still reach the storage.
    if (narrows) continue;
    TensorDict locked = TestType::make(reference());
    locked.lock_();
    op(locked);
    check_same_leaves(locked, expected);
  }
}

TEMPLATE_LIST_TEST_CASE("views of leaves write through only where leaves alias storage",
                        "[contract][write_path]", ContractBackends) {
  TensorDict td = TestType::make(reference());
  td.get("f").fill_(-5);
  // A backend that hands out copies keeps its data: use set_ / in-place operations there.
  CHECK(at::equal(td.get("f"), at::full({4, 3}, -5.0)) == TestType::kLeavesAliasStorage);
  td.index({0}).set_("f", at::zeros({3}));  // a lazy stack's row is its member, a file's a view of it
  CHECK((td.get("f")[0].sum().item<double>() == 0.0) ==
        (TestType::kLeavesAliasStorage || TestType::kLazyStack || TestType::kViewsWriteThrough));
}

TEST_CASE("one operation over a copy-on-read tree is one batched read", "[contract][write_path][batched]") {
  // Fixture F of the benchmarks: three groups of ten [64, 16] leaves.
  std::vector<TensorDict::Item> groups;
  for (int g = 0; g < 3; ++g) {
    std::vector<TensorDict::Item> leaves;
    for (int x = 0; x < 10; ++x) leaves.emplace_back("x" + std::to_string(x), at::randn({64, 16}));
    groups.emplace_back("g" + std::to_string(g), EntryInit(TensorDict(leaves, {64})));
  }
  const TensorDict f(groups, {64});
  TensorDict td = CopyOnRead::from(f);
  auto& counts = CopyOnRead::counts(td);
  auto reset = [&] { counts = testing_backends::CallCounts(); };
  const std::vector<std::pair<std::string, std::function<void()>>> reads = {
      {"clone", [&] { td.clone(); }},
      {"to dtype", [&] { td.to(at::kDouble); }},
      {"apply", [&] { td.apply([](const at::Tensor& x) { return x * 2; }); }},
      {"index", [&] { td.index({3}); }},
      {"reshape", [&] { td.reshape({8, 8}); }},
      {"td + 1", [&] { td + 1; }},
      {"td + td", [&] { td + td; }},
      {"(td == f).all()", [&] { (td == f).all(); }},
      {"sum", [&] { td.sum(); }},
      {"split", [&] { td.split(16); }},
      {"state_dict", [&] { td.state_dict(); }},
  };
  for (const auto& [name, run] : reads) {
    INFO("operation " << name);
    reset();
    run();
    // "td + td" reads both operands: one snapshot each.
    CHECK(counts.snapshots == (name == "td + td" ? 2 : 1));
    CHECK(counts.gets == 0);
    CHECK(counts.for_each == 0);
  }
  CHECK(at::equal(td.clone().get({"g2", "x9"}), f.get({"g2", "x9"})));
  // An in-place operation: one batched read, one batched write.
  reset();
  td.mul_(2);
  CHECK(counts.snapshots == 1);
  CHECK(counts.batched_writes == 1);
  CHECK(counts.gets + counts.for_each + counts.writes == 0);
  CHECK(at::equal(td.get({"g1", "x4"}), f.get({"g1", "x4"}) * 2));
  reset();
  td.update_(f);
  CHECK(counts.batched_writes == 1);
  CHECK(counts.reads() == 0);
  // Listing keys reads no tensor data.
  reset();
  CHECK(td.keys(true, true).size() == 30);
  CHECK(counts.reads() == 0);
}

TEST_CASE("a tree mixing backends gets every level's writes", "[contract][write_path]") {
  // An in-memory root holding a copy-on-read child: the root's leaves change in place, the
  // child's through its backend.
  TensorDict child = CopyOnRead::from(TensorDict({{"y", at::ones({2})}}, {2}));
  TensorDict root({{"x", at::ones({2})}}, {2});
  root.set("c", EntryInit(child));
  root.mul_(3);
  CHECK(at::equal(root.get("x"), at::full({2}, 3.0)));
  CHECK(at::equal(child.get("y"), at::full({2}, 3.0)));
  root.index_put_({0}, 0);
  CHECK(at::equal(child.get("y"), at::tensor({0.0f, 3.0f})));
  root.zero_();
  CHECK(child.get("y").sum().item<float>() == 0.0f);
  CHECK(CopyOnRead::counts(child).batched_writes == 2);
}

namespace {

// A backend that reads as copies and implements no write at all: every in-place operation must
// raise, never change a copy and drop it.
class ReadOnlyCopies final : public TensorDictBase {
 public:
  explicit ReadOnlyCopies(TensorDict data) : TensorDictBase(data.batch_size(), data.device()), data_(std::move(data)) {}
  const char* type_name() const override { return "ReadOnlyCopies"; }
  size_t num_entries() const override { return data_.num_keys(); }
  std::vector<std::string> keys() const override { return data_.impl()->keys(); }
  bool has(std::string_view key) const override { return data_.impl()->has(key); }
  Entry get(std::string_view key) const override {
    Entry e = data_.impl()->get(key);
    return e.is_tensor() ? Entry(e.tensor().clone()) : e;
  }
  void for_each(FunctionRef<void(const std::string&, const Entry&)> fn) const override {
    data_.impl()->for_each([&](const std::string& k, const Entry& e) { fn(k, e.is_tensor() ? Entry(e.tensor().clone()) : e); });
  }
  void insert_or_assign(std::string_view key, Entry value) override { data_.impl()->insert_or_assign(key, value); }
  void erase(std::string_view key) override { data_.impl()->erase(key); }
  void rename(std::string_view from, std::string_view to) override { data_.impl()->rename(from, to); }

 private:
  TensorDict data_;
};

}  // namespace

TEST_CASE("a backend that cannot write in place raises a typed error naming itself and the operation",
          "[contract][write_path][errors]") {
  TensorDict td(c10::make_intrusive<ReadOnlyCopies>(TensorDict({{"a", at::ones({3})}}, {3})));
  for (const auto& run : std::vector<std::function<void()>>{[&] { td.zero_(); },
                                                             [&] { td.add_(1); },
                                                             [&] { td.set_("a", at::zeros({3})); },
                                                             [&] { td.index_put_({0}, 5); },
                                                             [&] { td.fill_("a", 2); },
                                                             [&] { td.apply_([](const at::Tensor& x) { return x * 2; }); }}) {
    REQUIRE_THROWS_AS(run(), NotImplementedError);
    REQUIRE_THROWS_WITH(run(), Catch::Contains("ReadOnlyCopies") && Catch::Contains("write a leaf in place"));
    CHECK(at::equal(td.get("a"), at::ones({3})));  // nothing changed
  }
  // Reads work: they go through snapshot's default.
  CHECK(at::equal((td * 2).get("a"), at::full({3}, 2.0)));
  CHECK(at::equal(td.index({1}).get("a"), at::ones({})));
}
