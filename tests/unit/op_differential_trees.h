#pragma once
// The model and the random trees of tests/unit/op_differential_test.cpp: what a tensordict
// should hold (its leaves by key path, computed leaf by leaf with plain ATen), random trees in
// every internal state the ops' fast paths key on, and the checks of a tensordict against its
// model.
#include "support/catch_torch.h"

#include <algorithm>
#include <functional>
#include <iterator>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/backends/memmap.h>
#include <tensordict/tensordict.h>
#if TENSORDICT_TEST_HDF5
#include <tensordict/backends/persistent.h>
#endif

namespace op_differential {

using namespace tensordict;  // this test's own namespace only

// HDF5 files among the states where the build has the HDF5 backend (TENSORDICT_WITH_HDF5); a
// build without it keeps that state's tree in memory.
#if TENSORDICT_TEST_HDF5
constexpr bool kWithHdf5 = true;
inline bool is_h5(const TensorDict& td) { return PersistentTensorDict::is_persistent(td); }
inline TensorDict as_h5(const TensorDict& td, const std::string& file) { return PersistentTensorDict::to_h5(td, file); }
#else
constexpr bool kWithHdf5 = false;
inline bool is_h5(const TensorDict&) { return false; }
inline TensorDict as_h5(const TensorDict& td, const std::string&) { return td; }
#endif

struct ModelLeaf {
  at::Tensor value;
  bool exact = true;  // false once an op whose per-storage and per-leaf kernels may round apart ran
};

// What a tensordict should hold: its batch size and its leaves by key path.
struct Model {
  std::vector<int64_t> batch;
  std::map<NestedKey, ModelLeaf> leaves;
};

inline Model map_model(const Model& m, const std::function<at::Tensor(const at::Tensor&)>& fn, bool exact) {
  Model out{m.batch, {}};
  for (const auto& [k, leaf] : m.leaves) out.leaves[k] = {fn(leaf.value), leaf.exact && exact};
  return out;
}

inline Model zip_model(const Model& a, const Model& b, const std::function<at::Tensor(const at::Tensor&, const at::Tensor&)>& fn,
                bool exact) {
  Model out{a.batch, {}};
  for (const auto& [k, leaf] : a.leaves) out.leaves[k] = {fn(leaf.value, b.leaves.at(k).value), leaf.exact && exact};
  return out;
}

struct Program {
  explicit Program(uint32_t seed) : seed(seed), rng(seed) {}

  uint32_t seed;
  std::mt19937 rng;
  TensorDict a;
  Model m;
  std::ostringstream log;  // the steps so far, printed with a failure
  std::string directory;   // for memory-mapped trees
  int files = 0;
  // Set where a redis-server runs (store_tests): a tree as a Redis store, by leaf or by row.
  std::function<TensorDict(const TensorDict&, bool by_rows)> to_store;

  size_t pick(size_t n) { return std::uniform_int_distribution<size_t>(0, n - 1)(rng); }
  bool coin(int one_in = 2) { return pick(static_cast<size_t>(one_in)) == 0; }
  std::string where() const { return "seed " + std::to_string(seed) + ", steps:" + log.str(); }
};

// ---- Trees and their states ---------------------------------------------------------------------

inline at::Tensor random_leaf(Program& p, c10::IntArrayRef batch, at::ScalarType dtype) {
  static const std::vector<std::vector<int64_t>> features{{}, {2}, {3}, {2, 2}, {0}, {5}};
  std::vector<int64_t> shape(batch.begin(), batch.end());
  const auto& f = features[p.pick(p.coin(8) ? features.size() : features.size() - 2)];  // {0} and {5} rarely
  shape.insert(shape.end(), f.begin(), f.end());
  return at::randn(shape, at::TensorOptions().dtype(dtype));
}

inline Model random_model(Program& p) {
  Model m;
  const size_t batch_dims = p.coin(6) ? 2 : 1;
  for (size_t d = 0; d < batch_dims; ++d) m.batch.push_back(p.coin(10) ? 0 : static_cast<int64_t>(1 + p.pick(4)));
  const at::ScalarType dtype = p.coin(4) ? at::kDouble : at::kFloat;  // one dtype for most trees
  auto leaf_dtype = [&] { return p.coin(5) ? at::kDouble : dtype; };
  const size_t entries = 1 + p.pick(4);
  for (size_t i = 0; i < entries; ++i) {
    if (p.coin(3)) {
      const std::string level = "n" + std::to_string(i);
      const size_t inner = 1 + p.pick(3);
      for (size_t j = 0; j < inner; ++j) {
        NestedKey key = p.coin(5) ? NestedKey({level, "deep", "k" + std::to_string(j)}) : NestedKey({level, "k" + std::to_string(j)});
        m.leaves[key] = {random_leaf(p, m.batch, leaf_dtype()), true};
      }
    } else {
      m.leaves[NestedKey("k" + std::to_string(i))] = {random_leaf(p, m.batch, leaf_dtype()), true};
    }
  }
  return m;
}

// Values for a second operand: the same keys, shapes and dtypes as `m`.
inline Model random_like(const Model& m) {
  return map_model(m, [](const at::Tensor& t) { return at::randn_like(t); }, true);
}

// The model as a plain tensordict, its keys set in map order or shuffled (other key orders in
// every level: what the by-position fast paths must notice).
inline TensorDict build(Program& p, const Model& m) {
  std::vector<const std::pair<const NestedKey, ModelLeaf>*> order;
  for (const auto& kv : m.leaves) order.push_back(&kv);
  if (p.coin()) std::shuffle(order.begin(), order.end(), p.rng);
  TensorDict td({}, m.batch);
  for (const auto* kv : order) td.set(kv->first, kv->second.value.clone());
  return td;
}

inline void read_some(Program& p, const TensorDict& td) {
  for (const NestedKey& k : td.keys(true, true))
    if (p.coin()) (void)td.get(k);
}

// The leaves copied into one flat tensor and set back as views of it, in listing order: a tree
// over one storage that consolidate did not make. Trees of mixed dtypes stay as they are.
inline TensorDict tiled(const TensorDict& td) {
  const std::vector<NestedKey> keys = td.keys(true, true);
  int64_t total = 0;
  for (const NestedKey& k : keys) {
    if (td.get(k).scalar_type() != td.get(keys.front()).scalar_type()) return td;
    total += td.get(k).numel();
  }
  if (keys.empty()) return td;
  at::Tensor flat = at::empty({total}, td.get(keys.front()).options());
  TensorDict out({}, td.batch_size());
  int64_t offset = 0;
  for (const NestedKey& k : keys) {
    const at::Tensor leaf = td.get(k);
    at::Tensor view = flat.narrow(0, offset, leaf.numel()).view(leaf.sizes());
    view.copy_(leaf);
    out.set(k, view);
    offset += leaf.numel();
  }
  return out;
}

// Every leaf of more than one element replaced by a non-contiguous copy (reversed dims, or every
// other element of a larger tensor).
inline TensorDict strided(const TensorDict& td) {
  TensorDict out = td.clone();
  for (const NestedKey& k : out.keys(true, true)) {
    const at::Tensor leaf = out.get(k);
    if (leaf.numel() < 2) continue;
    at::Tensor copy;
    if (leaf.dim() >= 2) {
      std::vector<int64_t> reversed(leaf.sizes().rbegin(), leaf.sizes().rend()), perm;
      for (int64_t d = leaf.dim() - 1; d >= 0; --d) perm.push_back(d);
      copy = at::empty(reversed, leaf.options()).permute(perm);
    } else {
      copy = at::empty({2 * leaf.numel()}, leaf.options()).slice(0, 0, 2 * leaf.numel(), 2);
    }
    copy.copy_(leaf);
    out.set(k, copy);
  }
  return out;
}

// `m` as a tensordict in a random internal state.
inline TensorDict in_some_state(Program& p, const Model& m, const char* role) {
  TensorDict td = build(p, m);
  static const char* const kStates[] = {"constructed",           "consolidated, unread", "consolidated, read",
                                        "packed result, unread", "packed result, read",  "tiled by hand",
                                        "non-contiguous",        "cloned",               "a lazy stack of its rows",
                                        "memory-mapped",         "an HDF5 file",
                                        "a Redis store",         "a Redis store by rows"};
  // With a server, half the trees are stores; without, the stream of picks is as it always was.
  const size_t state = p.to_store && p.coin() ? 11 + p.pick(2) : p.pick(11);
  if (state == 1 || state == 2) td = consolidate(td);
  if (state == 3) td = consolidate(td) * 1.0;
  if (state == 4) td = consolidate(td).clone();
  if (state == 5) td = tiled(td);
  if (state == 6) td = strided(td);
  if (state == 7) td = td.clone();
  if (state == 8 && !m.batch.empty() && m.batch[0] > 0) td = lazy_stack(td.unbind(0), 0);
  const std::string file = p.directory + "/" + std::to_string(p.seed) + "_" + std::to_string(p.files++);
  if (state == 9) td = memmap(td, file);
  if (state == 10) td = as_h5(td, file + ".h5");
  if (state >= 11) td = p.to_store(td, state == 12);
  if (state == 2 || state == 4 || state == 7) read_some(p, td);
  const bool locked = p.coin(5);
  if (locked) td.lock_();
  p.log << "\n  " << role << ": " << (state == 10 && !kWithHdf5 ? "constructed (a build without HDF5)" : kStates[state])
        << (locked ? ", locked" : "");
  return td;
}

// ---- Checks --------------------------------------------------------------------------------------

inline std::string keys_str(const std::vector<NestedKey>& keys) {
  std::ostringstream os;
  for (const NestedKey& k : keys) os << k.repr() << " ";
  return os.str();
}

// `td` holds what `m` says. Reports the first difference; false then. Reading a leaf makes it
// (Note [Lazy leaves]): half the time a clone is read instead, so that an unread result stays
// unread for the next op (the clone is checked against the model all the same).
inline bool same(Program& p, const TensorDict& checked, const Model& m, const char* what) {
  const TensorDict td = p.coin() ? checked : checked.clone();
  const std::vector<int64_t> batch(td.batch_size().begin(), td.batch_size().end());
  if (batch != m.batch) {
    FAIL_CHECK(what << ": batch size " << td.batch_size() << ", expected " << c10::IntArrayRef(m.batch) << "\n"
                    << p.where());
    return false;
  }
  std::vector<NestedKey> keys = td.keys(true, true);
  std::sort(keys.begin(), keys.end());
  std::vector<NestedKey> expected;
  for (const auto& kv : m.leaves) expected.push_back(kv.first);
  if (keys != expected) {
    FAIL_CHECK(what << ": keys " << keys_str(keys) << ", expected " << keys_str(expected) << "\n" << p.where());
    return false;
  }
  for (const auto& [k, leaf] : m.leaves) {
    const at::Tensor t = td.get(k);
    const at::Tensor& v = leaf.value;
    const bool equal = t.scalar_type() == v.scalar_type() && t.sizes() == v.sizes() &&
                       (!t.is_floating_point() ? at::equal(t, v)
                                                  : leaf.exact ? at::allclose(t, v, 0, 0, /*equal_nan=*/true)
                                                               : at::allclose(t, v, 1e-5, 1e-6, /*equal_nan=*/true));
    if (!equal) {
      FAIL_CHECK(what << ": leaf " << k.repr() << " is " << t.scalar_type() << " " << t.sizes() << "\n"
                      << t << "\nexpected " << v.scalar_type() << " " << v.sizes() << "\n"
                      << v << "\n" << p.where());
      return false;
    }
  }
  return true;
}

// A result lists its keys as its (first) operand does.
inline bool same_order(Program& p, const TensorDict& result, const TensorDict& operand, const char* what) {
  if (result.keys(true, true) == operand.keys(true, true)) return true;
  FAIL_CHECK(what << ": keys listed " << keys_str(result.keys(true, true)) << ", the operand lists "
                  << keys_str(operand.keys(true, true)) << "\n" << p.where());
  return false;
}

}  // namespace op_differential
