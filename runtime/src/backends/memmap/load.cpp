// load_memmap and memmap_refresh_: reads Python tensordict's memmap directory format leniently
// (both JSON styles, `.memmap` tails, missing empty-leaf files, legacy raw names) and refuses
// anything it cannot read faithfully with a StorageError naming the file.

#include <tensordict/backends/memmap.h>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/function_ref.h>

#include "backends/lazy_stack/lazy_stack_impl.h"
#include "backends/memmap/format.h"
#include "backends/memmap/memmap_level.h"
#include "core/file_io.h"
#include "core/format.h"

namespace tensordict {

using namespace detail;
using namespace memmap_detail;

namespace {

class Loader {
 public:
  explicit Loader(const LoadMemmapOptions& options) : options_(options) {}

  // Loads the collection in `dir`; `parent_batch` is the batch of the enclosing tensordict.
  Entry load_dir(const std::string& dir, c10::IntArrayRef parent_batch, const std::string& what) {
    const std::string meta_path = join_path(dir, "meta.json");
    TD_CHECK(path_exists(meta_path), StorageError, meta_path, ": meta.json is missing (", what, ")");
    refuse_symlink(meta_path);
    json::Value meta;
    try {
      meta = json::parse(read_text_file(meta_path), meta_path);
    } catch (const ValueError& e) {
      TD_THROW(StorageError, "malformed meta.json: ", e.message());
    }
    TD_CHECK(meta.is_object(), StorageError, meta_path, ": malformed meta.json: expected an object, got ",
             json::kind_name(meta.kind()));
    const json::Value* type = meta.find("_type");
    TD_CHECK(type && type->is_string(), StorageError, meta_path,
             ": malformed meta.json: no \"_type\" string naming the stored class");
    const std::string& t = type->as_string();
    if (t == kTensorDictType || t == kPersistentType) return load_tensordict(dir, meta_path, meta);
    if (t == kNonTensorDataType || t == kMetaDataType) return load_non_tensor(dir, meta_path, meta);
    if (t == kNonTensorStackType) return load_non_tensor_stack(dir, meta_path, meta, parent_batch);
    if (t == kLazyStackType) return load_lazy_stack(dir, meta_path, meta);
    TD_THROW(StorageError, meta_path, ": unsupported stored class ", t,
             " (tensorclasses and lazy views are not loadable in C++)");
  }

 private:
  // `field` names the list in an error only (made then: this runs once per leaf).
  static std::vector<int64_t> read_shape(const json::Value* v, const std::string& meta_path,
                                         FunctionRef<std::string()> field) {
    TD_CHECK(v && v->is_array(), StorageError, meta_path, ": malformed meta.json: ", field(),
             " must be a list of sizes");
    std::vector<int64_t> shape;
    shape.reserve(v->as_array().size());
    for (const auto& s : v->as_array()) {
      TD_CHECK(s.is_int() && s.as_int() >= 0, StorageError, meta_path, ": malformed meta.json: ",
               field(), " holds ", s.dump(true), ", not a non-negative integer size");
      shape.push_back(s.as_int());
    }
    return shape;
  }

  // A directory from elsewhere may link out of itself (to /etc, to another user's files):
  // links are not followed unless the caller allows them.
  void refuse_symlink(const std::string& path) const {
    TD_CHECK(options_.allow_symlinks || !is_symlink(path), StorageError, path,
             ": is a symbolic link, which loading does not follow (LoadMemmapOptions::allow_symlinks)");
  }

  // `dir/<enc><suffix>`, or the raw legacy name when only that exists.
  std::string resolve(const std::string& dir, const std::string& key, const std::string& suffix,
                      bool collection) const {
    std::string encoded = join_path(dir, encode_key_for_filesystem(key) + suffix);
    if (path_exists(encoded) || !options_.robust_key || !is_safe_legacy_key(key, collection)) return encoded;
    std::string raw = join_path(dir, key + suffix);
    return path_exists(raw) ? raw : encoded;
  }

  Entry load_tensordict(const std::string& dir, const std::string& meta_path, const json::Value& meta) {
    std::vector<int64_t> batch = read_shape(meta.find("shape"), meta_path, [] { return std::string("\"shape\""); });
    std::optional<at::Device> device;
    if (const json::Value* d = meta.find("device")) {
      // Data is always on the CPU; "None" (older saves) means no device.
      if (d->is_string() && d->as_string() != "None") device = at::Device(at::kCPU);
    }
    auto out = c10::make_intrusive<MemmapLevel>(batch, device, dir, meta.as_object().size(), options_.writable);
    const auto& fields = meta.as_object();
    // Python's order: every leaf first, then the sub-collections.
    if (const json::Value* names = meta.find("names"); names && names->is_array()) read_names(*names, batch, meta_path, *out);
    for (const auto& [key, value] : fields) {
      if (is_reserved_meta_key(key) || (key == "names" && value.is_array())) continue;
      TD_CHECK(value.is_object(), StorageError, meta_path, ": malformed meta.json: entry ",
               NestedKey(key).repr(), " is ", json::kind_name(value.kind()), ", not an object");
      if (value.find("type")) continue;
      out->insert_or_assign(key, load_leaf(dir, meta_path, key, value, batch));
    }
    for (const auto& [key, value] : fields) {
      if (is_reserved_meta_key(key) || !value.find("type")) continue;
      const std::string child_dir = resolve(dir, key, "", /*collection=*/true);
      refuse_symlink(child_dir);
      Entry child = load_dir(child_dir, batch, "entry " + NestedKey(key).repr() + " of " + meta_path);
      if (child.is_tensordict()) {
        c10::IntArrayRef cb = child.tensordict_unchecked().batch_size();
        TD_CHECK(cb.size() >= batch.size() && cb.slice(0, batch.size()) == c10::IntArrayRef(batch),
                 StorageError, join_path(child_dir, "meta.json"), ": batch size ", detail::size_str(cb),
                 " does not start with the parent batch size ", detail::size_str(batch));
      }
      out->insert_or_assign(key, std::move(child));
    }
    return Entry(TensorDict(out));
  }

  // The batch-dim names this port writes (write.cpp); a malformed list is an error, not ignored.
  static void read_names(const json::Value& list, c10::IntArrayRef batch, const std::string& meta_path,
                         TensorDictBase& out) {
    TD_CHECK(list.as_array().size() == batch.size(), StorageError, meta_path, ": malformed meta.json: \"names\" has ",
             list.as_array().size(), " names for ", batch.size(), " batch dims");
    DimNames names;
    for (const json::Value& n : list.as_array()) {
      TD_CHECK(n.is_null() || n.is_string(), StorageError, meta_path,
               ": malformed meta.json: \"names\" holds ", json::kind_name(n.kind()), ", not a string or null");
      names.push_back(n.is_null() ? std::nullopt : std::optional<std::string>(n.as_string()));
    }
    out.set_dim_names(std::move(names));
  }

  at::Tensor load_leaf(const std::string& dir, const std::string& meta_path, const std::string& key,
                       const json::Value& entry, c10::IntArrayRef batch) {
    // Only an error names the leaf, so its name is made then (a level may hold 100k leaves).
    auto what = [&key] { return "leaf " + NestedKey(key).repr(); };
    const json::Value* dtype_v = entry.find("dtype");
    TD_CHECK(dtype_v && dtype_v->is_string(), StorageError, meta_path, ": malformed meta.json: ",
             what(), " has no \"dtype\" string");
    std::optional<at::ScalarType> dtype = dtype_from_torch_name(dtype_v->as_string());
    TD_CHECK(dtype.has_value(), StorageError, meta_path, ": unknown dtype ",
             json::Value(dtype_v->as_string()).dump(), " for ", what(),
             " (known: torch.bool, torch.uint8, torch.int8..int64, torch.float16/32/64, "
             "torch.bfloat16, torch.complex32/64/128)");
    std::vector<int64_t> shape = read_shape(entry.find("shape"), meta_path, [&] { return what() + " \"shape\""; });
    if (const json::Value* nested = entry.find("is_nested")) {
      TD_CHECK(!(nested->is_bool() && nested->as_bool()), StorageError, meta_path, ": ", what(),
               " is a nested (jagged) tensor, which the C++ loader does not support");
    }
    TD_CHECK(shape.size() >= batch.size() && c10::IntArrayRef(shape).slice(0, batch.size()) == batch,
             StorageError, meta_path, ": ", what(), " has shape ", detail::size_str(shape),
             ", which does not start with the batch size ", detail::size_str(batch));
    // An empty leaf has no file (none is looked for).
    if (shape_nbytes(shape, *dtype, [&] { return meta_path + ": " + what(); }) == 0)
      return at::empty(shape, at::TensorOptions().dtype(*dtype));
    const std::string path = resolve(dir, key, ".memmap", /*collection=*/false);
    TD_CHECK(path_exists(path), StorageError, path, ": file is missing for ", what(), " of shape ",
             detail::size_str(shape), " listed in ", meta_path);
    refuse_symlink(path);
    return map_file(path, *dtype, shape, options_.writable);
  }

  Entry load_non_tensor(const std::string& dir, const std::string& meta_path, const json::Value& meta) {
    const json::Value* data = meta.find("data");
    if (!data) {
      const bool pickled = path_exists(join_path(dir, "other.pickle"));
      TD_CHECK(!pickled, StorageError, meta_path, ": field \"data\" is pickled in ",
               join_path(dir, "other.pickle"),
               "; pickle sidecars are Python-only and are refused (load it in Python and store JSON-able data)");
      TD_THROW(StorageError, meta_path, ": malformed meta.json: NonTensorData without \"data\"");
    }
    return Entry(NonTensorData(*data));
  }

  Entry load_non_tensor_stack(const std::string& dir, const std::string& meta_path,
                              const json::Value& meta, c10::IntArrayRef batch) {
    const json::Value* data = meta.find("data");
    TD_CHECK(data, StorageError, meta_path, ": malformed meta.json: NonTensorStack without \"data\"");
    TD_CHECK(!(data->is_string() && data->as_string() == "pickle.pkl"), StorageError, meta_path,
             ": field \"data\" is pickled in ", join_path(dir, "pickle.pkl"),
             "; pickle sidecars are Python-only and are refused (load it in Python and store JSON-able data)");
    try {
      return Entry(NonTensorData::from_list(*data, batch));
    } catch (const ValueError& e) {
      TD_THROW(StorageError, meta_path, ": NonTensorStack data does not match the batch size ",
               detail::size_str(batch), ": ", e.message());
    }
  }

  Entry load_lazy_stack(const std::string& dir, const std::string& meta_path, const json::Value& meta) {
    const json::Value* dim = meta.find("stack_dim");
    TD_CHECK(dim && dim->is_int(), StorageError, meta_path,
             ": malformed meta.json: LazyStackedTensorDict without an integer \"stack_dim\"");
    // C++ records the member count; Python does not (it loads every k/ it finds).
    const json::Value* recorded = meta.find("num_members");
    TD_CHECK(!recorded || (recorded->is_int() && recorded->as_int() >= 0), StorageError, meta_path,
             ": malformed meta.json: \"num_members\" must be a non-negative integer");
    const int64_t count = recorded ? recorded->as_int() : -1;
    std::vector<TensorDict> items;
    for (int64_t i = 0; count < 0 || i < count; ++i) {
      const std::string child = join_path(dir, std::to_string(i));
      if (count < 0 && !path_exists(join_path(child, "meta.json"))) break;
      refuse_symlink(child);
      Entry e = load_dir(child, {}, "stacked element " + std::to_string(i) + " of " + meta_path);
      TD_CHECK(e.is_tensordict(), StorageError, join_path(child, "meta.json"),
               ": a stacked element must be a TensorDict");
      items.push_back(e.tensordict_unchecked());
    }
    TD_CHECK(!items.empty() || count == 0, StorageError, meta_path, ": LazyStackedTensorDict with no element directory 0/");
    if (items.empty()) return Entry(lazy::make_empty({}, 0, at::Device(at::kCPU)));
    try {
      return Entry(lazy::make_stack(std::move(items), dim->as_int()));
    } catch (const Error& e) {
      TD_THROW(StorageError, meta_path, ": cannot stack the stored members: ", e.message());
    }
  }

  const LoadMemmapOptions& options_;
};

}  // namespace

TensorDict load_memmap(const std::string& prefix, const LoadMemmapOptions& options) {
  std::string dir = absolute_path(prefix);
  Loader loader(options);
  for (const auto& part : options.subpath) {
    std::string encoded = join_path(dir, encode_key_for_filesystem(part));
    if (!path_exists(join_path(encoded, "meta.json")) && options.robust_key &&
        is_safe_legacy_key(part, /*collection=*/true) && path_exists(join_path(join_path(dir, part), "meta.json"))) {
      encoded = join_path(dir, part);
    }
    dir = encoded;
  }
  Entry root = loader.load_dir(dir, {}, "root of " + prefix);
  TD_CHECK(root.is_tensordict(), StorageError, join_path(dir, "meta.json"),
           ": the stored root is non-tensor data, not a tensordict");
  TensorDict td = root.tensordict_unchecked();
  if (options.device.has_value() && !options.device->is_cpu()) td = td.to(*options.device);
  td.lock_();
  return td;
}

TensorDict load(const std::string& prefix, const LoadMemmapOptions& options) {
  return load_memmap(prefix, options);
}

std::string memmap_path(const TensorDict& td) {
  auto* impl = dynamic_cast<MemmapLevel*>(td.impl());
  TD_CHECK(impl, ValueError, "this ", td.type_name(), " is not memory-mapped (it has no directory)");
  return impl->path();
}

TensorDict& memmap_refresh_(TensorDict& td) {
  const std::string path = memmap_path(td);
  // Load completely first: on failure the tensordict is left as it was.
  TensorDict fresh = load_memmap(path);
  auto* impl = static_cast<MemmapLevel*>(td.impl());
  for (const auto& key : impl->keys()) impl->erase(key);
  impl->set_batch_size(fresh.batch_size());
  fresh.impl()->for_each([&](const std::string& key, const Entry& entry) { impl->insert_or_assign(key, entry); });
  td.lock_();
  return td;
}

}  // namespace tensordict
