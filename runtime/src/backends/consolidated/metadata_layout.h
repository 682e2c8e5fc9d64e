#pragma once
// What Python's consolidated metadata says about the layout of its storage: the names of a
// level's own fields (the rest are nested levels), and the typed views of the storage its leaves
// are made from.

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <ATen/core/Tensor.h>

#include <tensordict/json.h>

namespace tensordict {
namespace consolidated {

constexpr const char* kLazyClass = "LazyStackedTensorDict";

/// A level's own fields; every other key of a level names a nested level.
inline bool is_metadata_field(std::string_view key) {
  using namespace std::string_view_literals;  // lengths known: most keys differ in length
  return key == "cls"sv || key == "leaves"sv || key == "non_tensors"sv || key == "cls_metadata"sv || key == "size"sv;
}

/// The typed views of a consolidated storage (1-D bytes) its leaves are made from when read
/// (Note [Lazy leaves]): one per run of leaves (Note [Packed runs], ops/packed_runs.h), a run
/// being leaves of one dtype back to back, floating or complex ones also across Python's
/// padding. A storage whose leaves are of one dtype and tile it is one flat, the whole storage:
/// the elementwise ops of a consolidated tensordict nobody wrote to then run over it once
/// (Note [Intact results]); several flats take one kernel each (Note [Intact runs]).
class LeafFlats {
 public:
  /// Empty (the leaves are made at once, as views of the bytes) when a level is a lazy stack,
  /// an entry is malformed (the reader then names it), leaves overlap, or the runs would be more
  /// than half as many as the leaves (one kernel a leaf is then as fast).
  LeafFlats(const at::Tensor& storage, const json::Value& meta);
  /// Where one leaf lies: bytes [start, start + bytes) of `dtype`.
  struct Leaf {
    int64_t start, bytes;
    at::ScalarType dtype;
    uint32_t flat = 0;
  };
  /// The same from the leaves' places, as consolidate() laid them out (no metadata read back).
  LeafFlats(const at::Tensor& storage, std::vector<Leaf> leaves);
  bool empty() const { return flats_.empty(); }
  /// Every flat, in storage order: each level lists them all (LevelBuilder::list_flats).
  c10::ArrayRef<at::Tensor> all() const { return flats_; }
  /// One flat from the storage's start, its leaves tiling it with no padding (the one-storage
  /// path's; padding after the last leaf lies outside it).
  bool tiles() const { return tiles_; }
  /// The flat the leaf of `dtype` at bytes [start, start + bytes) views; nullptr when none does
  /// (an empty leaf outside its dtype's runs).
  const at::Tensor* find(at::ScalarType dtype, int64_t start, int64_t bytes) const;

 private:
  static bool collect(const json::Value& meta, std::vector<Leaf>& leaves);
  void lay_out(const at::Tensor& storage, std::vector<Leaf> leaves);

  std::vector<at::Tensor> flats_;
  std::vector<Leaf> leaves_;  // sorted by (start, bytes, dtype)
  bool tiles_ = false;
};

}  // namespace consolidated
}  // namespace tensordict
