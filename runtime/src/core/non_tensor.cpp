#include <tensordict/non_tensor.h>

#include <algorithm>
#include <map>
#include <ostream>

#include <ATen/ATen.h>

#include <tensordict/errors.h>

#include "core/format.h"
#include "core/non_tensor_write.h"

namespace tensordict {

// A ragged value: each member's values as a dense stack over its own batch.
struct NonTensorData::Ragged {
  std::vector<NonTensorData> members;
  int64_t stack_dim;
  std::vector<int64_t> batch_size;
};

NonTensorData NonTensorData::ragged(const std::vector<NonTensorData>& members,
                                    const std::vector<std::vector<int64_t>>& member_batches, int64_t stack_dim,
                                    c10::IntArrayRef batch_size) {
  TD_CHECK(!members.empty() && members.size() == member_batches.size(), ValueError,
           "a ragged non-tensor stack needs one batch size per member");
  auto r = std::make_shared<Ragged>();
  r->members.reserve(members.size());
  for (size_t i = 0; i < members.size(); ++i) {
    const std::vector<int64_t>& b = member_batches[i];
    // A member that is itself ragged (a stack of ragged stacks), or one value over a ragged
    // batch, has no dense form: it stays as it is.
    const bool dense = !members[i].is_ragged() && std::none_of(b.begin(), b.end(), [](int64_t s) { return s < 0; });
    r->members.push_back(dense ? members[i].as_stack(b) : members[i]);
  }
  r->stack_dim = stack_dim;
  r->batch_size.assign(batch_size.begin(), batch_size.end());
  NonTensorData out;
  out.ragged_ = std::move(r);
  return out;
}

const std::vector<NonTensorData>& NonTensorData::members() const {
  static const std::vector<NonTensorData> none;
  return ragged_ ? ragged_->members : none;
}

c10::IntArrayRef NonTensorData::shape() const {
  if (ragged_) return ragged_->batch_size;
  if (ids_.defined()) return ids_.sizes();
  return {};
}

void NonTensorData::throw_ragged(const char* what) const {
  std::string sizes;
  for (const NonTensorData& m : ragged_->members) sizes += (sizes.empty() ? "" : ", ") + detail::size_str(m.shape());
  TD_THROW(ShapeError, "non-tensor data of a ragged lazy stack (batch size ", detail::size_str(ragged_->batch_size),
           ", members of batch sizes ", sizes, ") has no dense ", what,
           ": read it per member (members(), tolist(), or index the lazy stack first)");
}

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
  if (ragged_) {
    const NonTensorData& first = ragged_->members.front();
    for (const NonTensorData& m : ragged_->members) {
      if (!m.is_uniform() || (&m != &first && m.value() != first.value())) return false;
    }
    return true;
  }
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
  if (ragged_) {
    TD_CHECK(is_uniform(), ValueError, "this ragged non-tensor stack holds different values per batch element: ",
             tolist().python_str(), "; use tolist()");
    return ragged_->members.front().value();
  }
  TD_CHECK(is_uniform(), ValueError,
           "this non-tensor stack holds different values per batch element: ",
           tolist().python_str(), "; use tolist()");
  if (ids_.numel() == 0) return pool_->front();
  return (*pool_)[ids_.flatten()[0].item<int64_t>()];
}

namespace {
// The members' nested lists joined at depth `stack_dim`: the dims before it are the members'
// own leading dims, equal in every member (the stack's batch shows them whole).
json::Value join_at(const std::vector<json::Value>& lists, int64_t stack_dim) {
  if (stack_dim == 0) return json::Value(json::Array(lists.begin(), lists.end()));
  const size_t n = lists.front().as_array().size();
  json::Array out;
  out.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    std::vector<json::Value> column;
    column.reserve(lists.size());
    for (const json::Value& l : lists) column.push_back(l.as_array()[i]);
    out.push_back(join_at(column, stack_dim - 1));
  }
  return json::Value(std::move(out));
}
}  // namespace

json::Value NonTensorData::tolist() const {
  if (!is_stack()) return pool_->front();
  if (ragged_) {
    std::vector<json::Value> lists;
    lists.reserve(ragged_->members.size());
    for (const NonTensorData& m : ragged_->members) lists.push_back(m.tolist());
    return join_at(lists, ragged_->stack_dim);
  }
  at::Tensor flat = ids_.contiguous().cpu();
  int64_t pos = 0;
  return nest_list(*pool_, flat.data_ptr<int64_t>(), ids_.sizes(), 0, pos);
}

NonTensorData NonTensorData::with_ids(at::Tensor ids) const {
  if (ragged_) throw_ragged("ids to apply a batch operation to");
  NonTensorData out = *this;
  out.ids_ = std::move(ids);
  return out;
}

NonTensorData NonTensorData::compacted() const {
  if (!is_stack() || ragged_ || pool_->size() <= 2 * static_cast<size_t>(ids_.numel()) + 16) return *this;
  return detail::held_values_only(*this);
}

NonTensorData NonTensorData::as_stack(c10::IntArrayRef batch_size) const {
  if (ragged_) throw_ragged("stack");
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

std::ostream& operator<<(std::ostream& os, const NonTensorData& data) {
  if (!data.is_stack()) return os << "NonTensorData(data=" << data.value().python_str() << ")";
  return os << "NonTensorStack(" << data.tolist().python_str() << ", batch_size=" << detail::size_str(data.shape())
            << ")";
}

namespace detail {

NonTensorData held_values_only(const NonTensorData& value) {
  if (!value.is_stack()) return value;
  auto [used, inverse] = at::_unique(value.ids().flatten(), /*sorted=*/true, /*return_inverse=*/true);
  std::vector<json::Value> kept;
  kept.reserve(static_cast<size_t>(used.numel()));
  const int64_t* u = used.data_ptr<int64_t>();
  for (int64_t i = 0; i < used.numel(); ++i) kept.push_back(value.pool()[static_cast<size_t>(u[i])]);
  return NonTensorData::from_ids(std::move(kept), inverse.view(value.ids().sizes()));
}

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
