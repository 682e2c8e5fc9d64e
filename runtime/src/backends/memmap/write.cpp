// memmap / memmap_ / memmap_like: writes a tensordict in Python tensordict's directory format.

#include <tensordict/backends/memmap.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <set>

#include <unistd.h>

#include <ATen/ATen.h>

#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>

#include "backends/lazy_stack/lazy_stack_impl.h"
#include "backends/memmap/format.h"
#include "backends/memmap/memmap_level.h"
#include "core/dim_names.h"
#include "core/file_io.h"
#include "core/format.h"
#include "core/io_tasks.h"
#include "core/staged_directory.h"

namespace tensordict {

using namespace detail;
using namespace memmap_detail;

namespace {

// The file (leaf) or directory (collection) an entry is stored under, with the robust key encoding.
std::string entry_file_name(const std::string& key, const Entry& entry) {
  const std::string enc = encode_key_for_filesystem(key);
  return entry.is_tensor() ? enc + ".memmap" : enc;
}

// One leaf file to write; the mapped result goes into `dest` (and `in_place`, for memmap_).
struct LeafJob {
  std::string path;  // where the file will be once the write is committed
  at::Tensor source;
  std::string key;
  c10::intrusive_ptr<TensorDictBase> dest;
  c10::intrusive_ptr<TensorDictBase> in_place;
  bool reused = false;  // the source already is this file's mapping: it is the result
  at::Tensor parts_source;  // contiguous source of a leaf written in parts, while they are written
  at::Tensor result;
};

struct TextFile {
  std::string path;
  std::string text;
};

class Writer {
 public:
  Writer(const MemmapOptions& options, bool zeros, bool in_place)
      : options_(options), zeros_(zeros), in_place_(in_place) {}

  TensorDict run(const TensorDict& td, const std::string& prefix) {
    const std::string root = absolute_path(prefix);
    TD_CHECK(options_.overwrite || !path_exists(join_path(root, "meta.json")), StorageError, root,
             " already holds a tensordict (meta.json); writing there would replace its data. Set "
             "MemmapOptions::overwrite to replace it, or load it with load_memmap");
    validate(*td.impl(), NestedKey());  // refuse bad keys and dtypes before writing anything
    // Everything is written to a hidden sibling directory that replaces `root` in one rename at
    // the end: a kill or an I/O error at any point leaves the old directory whole.
    StagedDirectory staging(root);
    staging_ = &staging;
    auto out = write_collection(td.impl_ptr(), root, NestedKey());
    if (!options_.existsok && staging.staged()) {
      for (const auto& job : jobs_)
        TD_CHECK(!path_exists(job.path), StorageError, "The file ", job.path, " already exists.");
    }
    run_jobs();
    // meta.json files go last and children first, as Python writes them.
    for (auto it = texts_.rbegin(); it != texts_.rend(); ++it)
      write_text_file(staging.write_path(it->path), it->text, it->path);
    staging.commit();
    staging_ = nullptr;
    // Mapped once in place: a mapping of the staging name would be registered under it.
    for (auto& job : jobs_) {
      job.result = job.reused ? job.source : map_file(job.path, job.source.scalar_type(), job.source.sizes(), /*writable=*/true);
    }
    for (auto& job : jobs_) {
      job.dest->insert_or_assign(job.key, job.result);
      if (job.in_place) job.in_place->insert_or_assign(job.key, job.result);
    }
    TensorDict result(out);
    result.lock_();
    return result;
  }

 private:
  // A lazy stack is stored as Python stores it (a meta.json with its class and stack_dim, then
  // one directory per member, 0/, 1/, ...), plus the member count, so that stale member
  // directories of an earlier, longer save are not loaded back; overwriting removes them too,
  // so Python (which loads every k/ it finds) reads the right members as well.
  c10::intrusive_ptr<TensorDictBase> write_collection(const c10::intrusive_ptr<TensorDictBase>& src,
                                                     const std::string& dir, const NestedKey& where) {
    const auto* stack = dynamic_cast<const lazy::LazyStackImpl*>(src.get());
    if (stack == nullptr) return write_level(src, dir, where);
    ensure_directory(staging_->write_path(dir));
    std::vector<TensorDict> members;
    for (int64_t i = 0; i < stack->count(); ++i) {
      const TensorDict& m = stack->members()[static_cast<size_t>(i)];
      members.emplace_back(write_collection(m.impl_ptr(), join_path(dir, std::to_string(i)), where));
    }
    for (int64_t i = stack->count();; ++i) {
      const std::string stale = staging_->write_path(join_path(dir, std::to_string(i)));
      if (!path_exists(join_path(stale, "meta.json"))) break;
      remove_tree(stale);
      TD_CHECK(!path_exists(stale), StorageError, "Cannot remove ", stale, ", a stale member directory");
    }
    json::Object meta;
    meta.emplace_back("_type", kLazyStackType);
    meta.emplace_back("stack_dim", stack->stack_dim());
    meta.emplace_back("num_members", stack->count());
    texts_.push_back({join_path(dir, "meta.json"), json::Value(std::move(meta)).dump_stdlib()});
    TensorDict out = members.empty()
                         ? lazy::make_empty(stack->member_batch(), stack->stack_dim(), at::Device(at::kCPU))
                         : lazy::make_stack(std::move(members), stack->stack_dim());
    return out.impl_ptr();
  }

  c10::intrusive_ptr<MemmapLevel> write_level(const c10::intrusive_ptr<TensorDictBase>& src,
                                                      const std::string& dir, const NestedKey& where) {
    ensure_directory(staging_->write_path(dir));
    auto out = c10::make_intrusive<MemmapLevel>(src->batch_size(), at::Device(at::kCPU), dir, src->num_entries());
    out->set_dim_names(src->dim_names());
    json::Object meta;
    src->for_each([&](const std::string& key, const Entry& entry) {
      // Keys and file names were checked by validate() before anything was written.
      const NestedKey full = where.empty() ? NestedKey(key) : where.child(key);
      const std::string name = entry_file_name(key, entry);
      switch (entry.kind()) {
        case Entry::Kind::Tensor: {
          const at::Tensor& t = entry.tensor_unchecked();
          json::Object leaf;
          leaf.emplace_back("device", t.device().str());
          leaf.emplace_back("shape", shape_json(t.sizes()));
          leaf.emplace_back("dtype", torch_dtype_name(t.scalar_type()));
          leaf.emplace_back("is_nested", false);
          meta.emplace_back(key, json::Value(std::move(leaf)));
          if (t.numel() == 0) {
            // Python writes no file for an empty leaf; the loader rebuilds it from meta.json.
            out->insert_or_assign(key, at::empty(t.sizes(), t.options().device(at::kCPU)));
            break;
          }
          out->insert_or_assign(key, t);  // placeholder until the file is mapped
          total_bytes_ += t.numel() * static_cast<int64_t>(t.element_size());
          jobs_.push_back(LeafJob{join_path(dir, name), t, key, out, in_place_ ? src : c10::intrusive_ptr<TensorDictBase>(), false, {}, {}});
          break;
        }
        case Entry::Kind::TensorDict: {
          const TensorDict& td = entry.tensordict_unchecked();
          meta.emplace_back(key, json::Value(json::Object{{"type", lazy::as_stack(td) ? "LazyStackedTensorDict" : "TensorDict"}}));
          auto child = write_collection(td.impl_ptr(), join_path(dir, name), full);
          out->insert_or_assign(key, TensorDict(child));
          break;
        }
        case Entry::Kind::NonTensor: {
          const NonTensorData& data = entry.non_tensor();
          const std::string child_dir = join_path(dir, name);
          ensure_directory(staging_->write_path(child_dir));
          NonTensorMeta stored = non_tensor_meta(data);
          meta.emplace_back(key, json::Value(json::Object{{"type", stored.marker}}));
          // A pickle sidecar of an earlier save would be stale once the data is written as JSON.
          remove_if_present(staging_->write_path(join_path(child_dir, stored.stale_sidecar)));
          texts_.push_back({join_path(child_dir, "meta.json"), std::move(stored.text)});
          out->insert_or_assign(key, data);
          break;
        }
        case Entry::Kind::Undefined:
          break;
      }
    });
    meta.emplace_back("shape", shape_json(src->batch_size()));
    meta.emplace_back("device", "cpu");
    meta.emplace_back("_type", kTensorDictType);
    // Batch-dim names: v0.14 writes none and skips this list when it loads ("there can be other
    // metadata"), so Python still reads the directory. A leaf called "names" takes precedence.
    if (detail::any_named(src->dim_names()) && !src->has("names")) {
      json::Array names;
      for (const auto& n : src->dim_names()) names.push_back(n ? json::Value(*n) : json::Value(nullptr));
      meta.emplace_back("names", json::Value(std::move(names)));
    }
    texts_.push_back({join_path(dir, "meta.json"), json::Value(std::move(meta)).dump_stdlib()});
    return out;
  }

  static void validate(const TensorDictBase& src, const NestedKey& where) {
    if (const auto* stack = dynamic_cast<const lazy::LazyStackImpl*>(&src)) {
      for (const TensorDict& m : stack->members()) validate(*m.impl(), where);
      return;
    }
    std::set<std::string> names{"meta.json"};
    src.for_each([&](const std::string& key, const Entry& entry) {
      const NestedKey full = where.empty() ? NestedKey(key) : where.child(key);
      TD_CHECK(!is_reserved_meta_key(key), ValueError, "key ", full.repr(),
               " cannot be stored in a memmap directory: Python tensordict's meta.json uses '",
               key, "' for its own field and would lose the entry (reserved: 'shape', 'device', '_type')");
      const std::string name = entry_file_name(key, entry);
      TD_CHECK(names.insert(name).second, ValueError, "key ", full.repr(), " would be stored as '",
               name, "', which another entry of the same level already uses");
      if (entry.is_tensor()) {
        const at::Tensor& t = entry.tensor_unchecked();
        TD_CHECK(t.layout() == at::kStrided, NotImplementedError, "key ", full.repr(),
                 ": only strided tensors can be memory-mapped");
        TD_CHECK(is_storable_dtype(t.scalar_type()), NotImplementedError, "key ", full.repr(), ": dtype ",
                 torch_dtype_name(t.scalar_type()),
                 " cannot be stored in a memmap directory: Python tensordict could not load it back");
      } else if (entry.is_tensordict()) {
        validate(*entry.tensordict_unchecked().impl(), full);
      }
    });
  }


  // Writes the job's file at its staging name (mapped after the commit): all of it, or its first
  // part when it is large and other threads write the rest (job.parts_source is set then).
  void start_job(LeafJob& job, int threads) {
    const std::string target = staging_->write_path(job.path);
    const size_t nbytes = job_bytes(job);
    if (zeros_) {
      create_zero_file(target, nbytes, options_.existsok, job.path);
    } else if (!reuse_mapping(job, target)) {
      at::Tensor src = job.source.detach().to(at::kCPU).contiguous();
      // Written in place, a source that maps the destination would be overwritten while read.
      if (!staging_->staged() && storage_maps(src, job.path)) src = src.clone();
      if (threads > 1 && nbytes > kPartBytes) {
        begin_file_write(target, nbytes, options_.existsok, job.path);
        write_file_part(target, src.data_ptr(), kPartBytes, 0, job.path);
        job.parts_source = src;
        report(kPartBytes);
        return;
      }
      write_file(target, src.data_ptr(), nbytes, options_.existsok, job.path);
    }
    report(nbytes);
  }

  void report(size_t bytes) {
    if (!options_.progress) return;
    std::lock_guard<std::mutex> lock(progress_mutex_);
    done_bytes_ += static_cast<int64_t>(bytes);
    options_.progress(done_bytes_, total_bytes_);
  }

  static size_t job_bytes(const LeafJob& job) {
    return static_cast<size_t>(job.source.numel()) * job.source.element_size();
  }

  // A leaf that already maps its destination file (memmap_ again at the same place) keeps that
  // file: hard-linked into the staging directory, it is the same file after the commit, so its
  // mapping, and every handle sharing it, stays live. A leaf mapped from another file is copied
  // only with copy_existing, as in Python.
  bool reuse_mapping(LeafJob& job, const std::string& target) {
    if (!already_maps(job.source, job.path, options_.copy_existing)) return false;
    if (staging_->staged() && ::link(job.path.c_str(), target.c_str()) != 0) return false;  // copied instead
    job.reused = true;
    return true;
  }

  // Leaves are written side by side on the inter-op pool (MemmapOptions::num_threads), and a
  // leaf larger than kPartBytes in parts of that size once its first part is written.
  void run_jobs() {
    size_t bytes = 0;
    for (const auto& job : jobs_) bytes += job_bytes(job);
    // Below a few parts, starting helpers costs more than it saves.
    const int threads = bytes >= 2 * kPartBytes ? io_threads(options_.num_threads) : 1;
    run_io_tasks(jobs_.size(), threads, [&](size_t i) { start_job(jobs_[i], threads); });
    struct Part {
      LeafJob* job;
      size_t offset;
    };
    std::vector<Part> parts;
    for (auto& job : jobs_) {
      if (!job.parts_source.defined()) continue;
      for (size_t offset = kPartBytes; offset < job_bytes(job); offset += kPartBytes) parts.push_back({&job, offset});
    }
    run_io_tasks(parts.size(), threads, [&](size_t i) {
      const Part& part = parts[i];
      const size_t n = std::min(kPartBytes, job_bytes(*part.job) - part.offset);
      const char* data = static_cast<const char*>(part.job->parts_source.data_ptr()) + part.offset;
      write_file_part(staging_->write_path(part.job->path), data, n, part.offset, part.job->path);
      report(n);
    });
    for (auto& job : jobs_) job.parts_source.reset();
  }

  static constexpr size_t kPartBytes = size_t{8} << 20;
  const MemmapOptions& options_;
  StagedDirectory* staging_ = nullptr;  // set while run() writes
  bool zeros_;
  bool in_place_;
  std::vector<LeafJob> jobs_;
  std::vector<TextFile> texts_;
  int64_t total_bytes_ = 0;
  int64_t done_bytes_ = 0;
  std::mutex progress_mutex_;
};

}  // namespace

TensorDict memmap(const TensorDict& td, const std::string& prefix, const MemmapOptions& options) {
  return Writer(options, /*zeros=*/false, /*in_place=*/false).run(td, prefix);
}

TensorDict& memmap_(TensorDict& td, const std::string& prefix, const MemmapOptions& options) {
  TD_CHECK(!td.device().has_value() || td.device()->is_cpu(), ValueError,
           "memmap_ works in place and needs a CPU tensordict, this one is on ",
           td.device()->str(), "; use memmap() to write a CPU copy");
  // A lazy stack's members may be ragged: their leaves are checked member by member.
  const lazy::LazyStackImpl* stack = lazy::as_stack(td);
  for (const TensorDict& level : stack ? stack->members() : c10::ArrayRef<TensorDict>(td)) {
    for (const auto& entry : level.values(/*include_nested=*/true, /*leaves_only=*/true)) {
      TD_CHECK(entry.tensor().device().is_cpu(), ValueError,
               "memmap_ works in place and needs CPU leaves; use memmap() to write a CPU copy");
    }
  }
  TensorDict result = Writer(options, /*zeros=*/false, /*in_place=*/true).run(td, prefix);
  if (!td.is_locked()) td.lock_();
  td = result;
  return td;
}

TensorDict memmap_like(const TensorDict& td, const std::string& prefix, const MemmapOptions& options) {
  return Writer(options, /*zeros=*/true, /*in_place=*/false).run(td, prefix);
}

TensorDict save(const TensorDict& td, const std::string& prefix, const MemmapOptions& options) {
  return memmap(td, prefix, options);
}

}  // namespace tensordict
