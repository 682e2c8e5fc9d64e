#include <tensordict/non_tensor.h>

#include <map>

#include <ATen/ATen.h>

#include <tensordict/errors.h>

#include "core/non_tensor_write.h"

namespace tensordict {

NonTensorData::NonTensorData(json::Value value)
    : pool_(std::make_shared<const std::vector<json::Value>>(1, std::move(value))) {}

NonTensorData NonTensorData::from_ids(std::vector<json::Value> pool, at::Tensor ids) {
  TD_CHECK(ids.scalar_type() == at::kLong, TypeError,
           "non-tensor stack ids must be int64, got ", ids.scalar_type());
  TD_CHECK(!pool.empty() || ids.numel() == 0, ValueError, "non-tensor stack without values");
  NonTensorData out;
  out.pool_ = std::make_shared<const std::vector<json::Value>>(std::move(pool));
  out.ids_ = std::move(ids);
  return out;
}

namespace {
void flatten_list(const json::Value& v, c10::IntArrayRef shape, size_t depth,
                  std::vector<const json::Value*>& out) {
  if (depth == shape.size()) {
    out.push_back(&v);
    return;
  }
  TD_CHECK(v.is_array() && static_cast<int64_t>(v.as_array().size()) == shape[depth], ValueError,
           "non-tensor list does not match the batch size ", shape, " at depth ", depth);
  for (const auto& item : v.as_array()) flatten_list(item, shape, depth + 1, out);
}

json::Value nest_list(const std::vector<json::Value>& pool, const int64_t* ids,
                      c10::IntArrayRef shape, size_t depth, int64_t& pos) {
  if (depth == shape.size()) return pool[ids[pos++]];
  json::Array arr;
  arr.reserve(shape[depth]);
  for (int64_t i = 0; i < shape[depth]; ++i) arr.push_back(nest_list(pool, ids, shape, depth + 1, pos));
  return json::Value(std::move(arr));
}
}  // namespace

NonTensorData NonTensorData::from_list(const json::Value& nested, c10::IntArrayRef batch_size) {
  std::vector<const json::Value*> flat;
  flatten_list(nested, batch_size, 0, flat);
  std::vector<json::Value> pool;
  std::map<std::string, int64_t> seen;  // dedupe by canonical text
  at::Tensor ids = at::empty({static_cast<int64_t>(flat.size())}, at::kLong);
  int64_t* ids_data = ids.data_ptr<int64_t>();
  for (size_t i = 0; i < flat.size(); ++i) {
    std::string text = flat[i]->dump(true);
    auto it = seen.find(text);
    if (it == seen.end()) {
      it = seen.emplace(std::move(text), static_cast<int64_t>(pool.size())).first;
      pool.push_back(*flat[i]);
    }
    ids_data[i] = it->second;
  }
  if (pool.empty()) pool.emplace_back();
  return from_ids(std::move(pool), ids.view(batch_size));
}

bool NonTensorData::is_uniform() const {
  if (!is_stack() || pool_->size() == 1) return true;
  if (ids_.numel() == 0) return true;
  at::Tensor flat = ids_.contiguous().cpu();
  const int64_t* p = flat.data_ptr<int64_t>();
  const json::Value& first = (*pool_)[p[0]];
  for (int64_t i = 1; i < flat.numel(); ++i) {
    if (p[i] != p[0] && (*pool_)[p[i]] != first) return false;
  }
  return true;
}

const json::Value& NonTensorData::value() const {
  if (!is_stack()) return pool_->front();
  TD_CHECK(is_uniform(), ValueError,
           "this non-tensor stack holds different values per batch element: ",
           tolist().python_str(), "; use tolist()");
  if (ids_.numel() == 0) return pool_->front();
  return (*pool_)[ids_.flatten()[0].item<int64_t>()];
}

json::Value NonTensorData::tolist() const {
  if (!is_stack()) return pool_->front();
  at::Tensor flat = ids_.contiguous().cpu();
  int64_t pos = 0;
  return nest_list(*pool_, flat.data_ptr<int64_t>(), ids_.sizes(), 0, pos);
}

NonTensorData NonTensorData::with_ids(at::Tensor ids) const {
  NonTensorData out = *this;
  out.ids_ = std::move(ids);
  return out;
}

NonTensorData NonTensorData::compacted() const {
  if (!is_stack() || pool_->size() <= 2 * static_cast<size_t>(ids_.numel()) + 16) return *this;
  auto [used, inverse] = at::_unique(ids_.flatten(), /*sorted=*/true, /*return_inverse=*/true);
  std::vector<json::Value> kept;
  kept.reserve(static_cast<size_t>(used.numel()));
  const int64_t* u = used.data_ptr<int64_t>();
  for (int64_t i = 0; i < used.numel(); ++i) kept.push_back((*pool_)[static_cast<size_t>(u[i])]);
  return from_ids(std::move(kept), inverse.view(ids_.sizes()));
}

NonTensorData NonTensorData::as_stack(c10::IntArrayRef batch_size) const {
  if (is_stack()) {
    TD_CHECK(ids_.sizes() == batch_size, ShapeError, "non-tensor stack of shape ", ids_.sizes(),
             " used with batch size ", batch_size);
    return *this;
  }
  return with_ids(at::zeros(batch_size, at::kLong));
}

NonTensorData NonTensorData::stack(const std::vector<NonTensorData>& items, int64_t dim,
                                   c10::IntArrayRef batch_size) {
  TD_CHECK(!items.empty(), ValueError, "cannot stack an empty list of non-tensor values");
  bool all_same = true;
  for (const auto& item : items) {
    if (item.is_stack() || item.value() != items.front().value()) {
      all_same = false;
      break;
    }
  }
  if (all_same) return items.front();
  std::vector<json::Value> pool;
  std::vector<at::Tensor> ids;
  for (const auto& item : items) {
    NonTensorData s = item.as_stack(batch_size);
    ids.push_back(s.ids_ + static_cast<int64_t>(pool.size()));
    pool.insert(pool.end(), s.pool_->begin(), s.pool_->end());
  }
  return from_ids(std::move(pool), at::stack(ids, dim)).compacted();
}

bool operator==(const NonTensorData& a, const NonTensorData& b) {
  if (!a.is_stack() && !b.is_stack()) return a.value() == b.value();
  if (a.is_stack() && b.is_stack()) return a.tolist() == b.tolist();
  const NonTensorData& stack = a.is_stack() ? a : b;
  const NonTensorData& single = a.is_stack() ? b : a;
  return stack.is_uniform() && stack.value() == single.value();
}

namespace detail {

NonTensorData assign_non_tensor(const NonTensorData& current, c10::IntArrayRef batch, const BatchIndex& index,
                                const NonTensorData& incoming) {
  const NonTensorData stacked = current.as_stack(batch);
  std::vector<json::Value> pool = stacked.pool();
  const NonTensorData src = incoming.as_stack(index.result_batch_size());
  at::Tensor ids = stacked.ids().clone();
  index.assign(ids, src.ids() + static_cast<int64_t>(pool.size()));
  pool.insert(pool.end(), src.pool().begin(), src.pool().end());
  // Row-by-row writes would otherwise grow the pool without bound: compacted.
  NonTensorData updated = NonTensorData::from_ids(std::move(pool), ids).compacted();
  if (updated.is_uniform()) return NonTensorData(updated.value());
  return updated;
}

}  // namespace detail
}  // namespace tensordict
