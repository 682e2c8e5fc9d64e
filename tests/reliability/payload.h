#pragma once
// The tensordict the crash-consistency tests write, in generations: every value of generation
// g is g, so a destination holding parts of two writes (a leaf of one, a leaf of the other, or
// a leaf half overwritten) is told apart from a whole one.

#include <stdexcept>
#include <string>

#include <ATen/ATen.h>

#include <tensordict/tensordict.h>

namespace reliability {

// 4096 rows, ~16 MB: long enough to write that a kill lands inside the write.
inline tensordict::TensorDict payload(int generation, int64_t rows = 4096) {
  const double g = generation;
  tensordict::TensorDict td({{"obs", at::full({rows, 512}, g)},
                             {"action", at::full({rows, 4}, g, at::kLong)},
                             {"tag", "gen" + std::to_string(generation)}},
                            {rows});
  td.set({"next", "obs"}, at::full({rows, 512}, g));
  td.set({"next", "reward"}, at::full({rows}, g, at::kDouble));
  return td;
}

// Row `r` of a tensordict of payload's layout, every value r: what writers of disjoint rows set.
inline tensordict::TensorDict row_of(int64_t r) {
  const double v = static_cast<double>(r);
  tensordict::TensorDict row({{"obs", at::full({512}, v)}, {"action", at::full({4}, r, at::kLong)}}, {});
  row.set({"next", "obs"}, at::full({512}, v));
  row.set({"next", "reward"}, at::full({}, v, at::kDouble));
  return row;
}

// Whether every row r of `td` (payload's layout) holds r, as row_of(r) writes it.
inline bool rows_hold_their_index(const tensordict::TensorDict& td) {
  const int64_t rows = td.batch_size().at(0);
  const at::Tensor ids = at::arange(rows, at::kDouble);
  return at::equal(td.get("obs"), ids.unsqueeze(1).expand({rows, 512}).to(at::kFloat)) &&
         at::equal(td.get({"next", "obs"}), ids.unsqueeze(1).expand({rows, 512}).to(at::kFloat)) &&
         at::equal(td.get("action"), ids.unsqueeze(1).expand({rows, 4}).to(at::kLong)) &&
         at::equal(td.get({"next", "reward"}), ids);
}

// The generation `td` holds whole; std::logic_error when it is not one whole generation (what
// no write may ever leave behind).
inline int generation_of(const tensordict::TensorDict& td) {
  const std::string tag = td.get_non_tensor("tag").value().as_string();
  if (tag.rfind("gen", 0) != 0) throw std::logic_error("tag is '" + tag + "'");
  const int g = std::stoi(tag.substr(3));
  auto whole = [&](const tensordict::NestedKey& key, c10::IntArrayRef shape) {
    const at::Tensor t = td.get(key);
    if (t.sizes() != shape || !at::equal(t, at::full(shape, static_cast<double>(g), t.options())))
      throw std::logic_error("leaf " + key.repr() + " is not all " + std::to_string(g) + " (" + tag + ")");
  };
  const int64_t rows = td.batch_size().at(0);
  whole("obs", {rows, 512});
  whole("action", {rows, 4});
  whole({"next", "obs"}, {rows, 512});
  whole({"next", "reward"}, {rows});
  return g;
}

}  // namespace reliability
