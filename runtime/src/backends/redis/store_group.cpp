#include <tensordict/backends/store_group.h>

#include <mutex>
#include <optional>

#include <ATen/ATen.h>

#include <tensordict/errors.h>

#include "backends/redis/store_level.h"

namespace tensordict {

struct StoreGroup::Impl {
  explicit Impl(std::vector<TensorDictStore> all) : stores(std::move(all)), client(stores.front().options()) {}

  std::vector<TensorDictStore> stores;
  // The group's own connections: its pipelines hold commands of every store, whose handles
  // each have one connection to their own store's node.
  mutable redis::RedisClient client;
  mutable std::mutex mutex;
};

namespace {

const redis::StoreLevel& level_of(const TensorDictStore& store) {
  const redis::StoreLevel* level = redis::as_store_level(*store.impl());
  TD_CHECK(level != nullptr, TypeError, "StoreGroup: not a TensorDictStore");
  return *level;
}

}  // namespace

StoreGroup::StoreGroup(std::vector<TensorDictStore> stores) {
  TD_CHECK(!stores.empty(), ValueError, "StoreGroup: no store");
  const std::string endpoint = stores.front().options().endpoint();
  for (const TensorDictStore& store : stores) {
    TD_CHECK(store.options().endpoint() == endpoint, ValueError, "StoreGroup: store '", store.td_id(), "' is at ",
             store.options().endpoint(), ", not ", endpoint, " as the first store");
    TD_CHECK(level_of(store).path().empty(), ValueError, "StoreGroup: store '", store.td_id(),
             "' is a nested level; give the root stores");
    TD_CHECK(store.batch_dims() >= 1, ValueError, "StoreGroup: store '", store.td_id(), "' has no batch dim");
  }
  impl_ = std::make_shared<Impl>(std::move(stores));
}

size_t StoreGroup::size() const { return impl_->stores.size(); }

const TensorDictStore& StoreGroup::store(size_t i) const {
  TD_CHECK(i < impl_->stores.size(), IndexError, "StoreGroup: store ", i, " of ", impl_->stores.size());
  return impl_->stores[i];
}

std::vector<TensorDict> StoreGroup::index(const std::vector<at::Tensor>& rows) const {
  const std::vector<TensorDictStore>& stores = impl_->stores;
  TD_CHECK(rows.size() == stores.size(), ValueError, "StoreGroup::index: ", rows.size(), " row tensors for ",
           stores.size(), " stores");
  std::lock_guard<std::mutex> lock(impl_->mutex);
  redis::RedisClient& client = impl_->client;
  // Each store's rows as its cached structure places them (read first by a store that has
  // none), in one transaction with the structure the server holds, which must be the same: one
  // round trip per master when no store changed.
  std::vector<redis::Layout> layouts;
  std::vector<BatchIndex> indices;
  std::vector<std::optional<redis::RowRead>> reads;
  std::vector<redis::Command> commands;
  std::vector<size_t> offsets;
  for (size_t i = 0; i < stores.size(); ++i) {
    const redis::StoreLevel& level = level_of(stores[i]);
    {
      const auto guard = level.state()->lock();
      layouts.push_back(level.state()->layout(false));
    }
    const at::indexing::TensorIndex index(rows[i]);
    indices.emplace_back(c10::ArrayRef<at::indexing::TensorIndex>(&index, 1), stores[i].batch_size());
    reads.push_back(level.plan_row_read(indices.back(), layouts.back()));
    offsets.push_back(commands.size());
    if (!reads.back()) continue;
    // In one transaction with the structure, to check that the rows were planned from it.
    commands.push_back({"MULTI"});
    commands.push_back(redis::layout_command(level.state()->keys));
    commands.insert(commands.end(), reads.back()->commands.begin(), reads.back()->commands.end());
    commands.push_back({"EXEC"});
  }
  const redis::Replies replies = client.pipeline(commands);
  std::vector<TensorDict> out;
  for (size_t i = 0; i < stores.size(); ++i) {
    const redis::StoreLevel& level = level_of(stores[i]);
    std::optional<redis::ReplyRef> exec;
    if (reads[i]) {
      const size_t n = reads[i]->commands.size();
      for (size_t j = 0; j < n + 3; ++j) client.check(replies[offsets[i] + j], commands[offsets[i] + j]);
      exec = replies[offsets[i] + n + 2];
      bool usable = exec->is_array() && exec->size() == n + 1;
      for (size_t j = 0; usable && j <= n; ++j) usable = !(*exec)[j].is_error();
      if (usable) {
        const redis::Layout now = redis::parse_layout((*exec)[0], level.state()->keys, client.options().endpoint());
        TD_CHECK(now.exists, KeyError, "StoreGroup: no TensorDictStore with id '", stores[i].td_id(), "' at ",
                 client.options().endpoint());
        usable = redis::same_structure(now, layouts[i]);
      }
      if (!usable) exec.reset();
    }
    if (!exec) {  // no rows, not rows of dim 0, or the store changed since it was cached: it reads them itself
      out.push_back(stores[i].index({rows[i]}));
      continue;
    }
    std::vector<redis::ReplyRef> mine;
    for (size_t j = 1; j < exec->size(); ++j) mine.push_back((*exec)[j]);
    out.push_back(level.finish_row_read(indices[i], layouts[i], *reads[i], mine));
  }
  return out;
}

TensorDict StoreGroup::sample(int64_t count, c10::optional<at::Generator> generator) const {
  TD_CHECK(count >= 0, ValueError, "StoreGroup::sample: count must be >= 0, got ", count);
  const std::vector<TensorDictStore>& stores = impl_->stores;
  std::vector<int64_t> sizes;
  int64_t total = 0;
  for (const TensorDictStore& store : stores) {
    sizes.push_back(store.batch_size()[0]);
    total += sizes.back();
  }
  TD_CHECK(total > 0, ValueError, "StoreGroup::sample: the stores hold no rows");
  // Global rows, sorted so each store's share is a contiguous piece.
  const at::Tensor picks = std::get<0>(at::randint(total, {count}, generator, at::kLong).sort());
  std::vector<at::Tensor> rows;
  int64_t start = 0;
  const int64_t* p = picks.data_ptr<int64_t>();
  int64_t at_pick = 0;
  for (size_t i = 0; i < stores.size(); ++i) {
    const int64_t end = start + sizes[i];
    int64_t stop = at_pick;
    while (stop < count && p[stop] < end) ++stop;
    rows.push_back(picks.slice(0, at_pick, stop) - start);
    at_pick = stop;
    start = end;
  }
  std::vector<TensorDict> parts = index(rows);
  return cat(parts, 0);
}

}  // namespace tensordict
