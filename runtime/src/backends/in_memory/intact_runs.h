#pragma once
// Note [Intact runs]: a tree whose leaves lie in a few runs (Note [Packed runs],
// ops/packed_runs.h) it keeps the records of: a consolidated tensordict of several dtypes, or of
// one with Python's padding between leaves (a typed view of the storage per run), and the result
// of an elementwise op over one (a new storage per run). While none of its levels is written
// to, and its made leaves are as made (Note [Intact results]), an op runs once over each run:
// - out of place, its result laid out the same way (one new storage per run), so chains make
//   leaves only where a result is read;
// - between two such trees laid out alike (the same shape, runs of the same sizes, numbered
//   alike);
// - in place, where the runs hold leaf elements only, or the tree is a consolidated root, whose
//   storage's padding is nobody's: its bytes are kept aside and put back (an op on a nested
//   level, whose runs may also hold its siblings' leaves, is never one).

#include <cstdint>
#include <optional>
#include <vector>

#include <ATen/core/Tensor.h>
#include <c10/util/SmallVector.h>
#include <c10/util/intrusive_ptr.h>

#include <tensordict/function_ref.h>
#include <tensordict/tensor_dict.h>

namespace tensordict {

struct LevelShape;

namespace in_memory {

/// What intact_runs() finds over a tree.
struct IntactRuns {
  /// One 1-D flat per run, in the order the walk meets them.
  c10::SmallVector<at::Tensor, 4> storages;
  /// For each level with leaves, in walk order, the index in `storages` of each of its flats: two
  /// trees of one shape are laid out alike when these agree too.
  c10::SmallVector<uint32_t, 16> level_flats;
  /// A made leaf has a version counter of its own (bump_made_leaf_versions after writing).
  bool own_versions = false;
  /// Every leaf, made or not, shares its run's version counter (intact_detached).
  bool shared_versions = true;
  /// An in-place op may write the runs whole: they hold leaf elements only, or padding of a
  /// consolidated root.
  bool writable = true;
  /// The runs hold leaf elements only (no padding): a reduction, all() or any() may read them
  /// whole.
  bool exact = true;
  /// Every level with leaves lists `storages` as they are, in order (consolidate's levels and
  /// the results of ops over them do): records number flats alike at every level, so a result
  /// may share the tree's shape (Note [Shared shapes]) over its own storages, deferred.
  bool canonical = true;
  /// The records (as LazyLeaves keeps them) of each level with leaves the walk met, built or
  /// deferred (its shape's), with where the flats they number start in `level_flats`:
  /// leaf_spans decodes them without walking the tree again. They live as long as the tree's
  /// levels and shapes, unwritten.
  struct LevelRecords {
    const std::vector<int64_t>* records;
    size_t first;
  };
  c10::SmallVector<LevelRecords, 8> records;
};

/// The runs of `td` when it is a tree as above: every level in memory and as built, each of its
/// made leaves as made. Each flat of an integer or bool dtype holds leaf elements only; a floating
/// or complex one may also hold padding (under 8 bytes a leaf). Nullopt otherwise, also for a
/// tree over one storage (intact_packed_storage's) and while a forward-AD level is open.
/// `any_grad`: made leaves that require grad do not break the walk in grad mode (for detach()).
std::optional<IntactRuns> intact_runs(const TensorDictBase& td, bool any_grad = false);

/// Where one leaf of an intact tree lies: elements [begin, end) of `storages[run]`.
struct LeafSpan {
  uint32_t run;
  int64_t begin, end;
};

/// Every leaf's span over `runs` (intact_runs()'s, its tree alive and unwritten), in walk order,
/// decoded from the records the walk kept, without making a leaf.
void leaf_spans(const IntactRuns& runs, c10::SmallVector<LeafSpan, 32>& out);

/// The bytes of a run no leaf holds (Python's padding), kept while an in-place op writes the run
/// whole, and put back after (also when it raises): the storage stays as `consolidate` left it,
/// so `to_bytes` gives the same bytes for the same values.
class KeptPadding {
 public:
  /// The padding of the runs intact_runs(td) found, `td` a consolidated root (whose storage holds
  /// its leaves and nothing else; any other tree's padding may be a sibling's leaf): false where
  /// it cannot be kept (not such a root, a run off the CPU, a gap of 8 bytes or more), when the op
  /// must not write the runs whole.
  bool keep(const TensorDictBase& td, const IntactRuns& runs);
  ~KeptPadding();

 private:
  struct Gap {
    char* at;
    uint8_t size;
    char bytes[8];
  };
  c10::SmallVector<Gap, 32> gaps_;
};

/// Whether `b` is laid out as `a`, whose intact_runs() gave `ra`, given its own `rb`: the same
/// shape (keys, kinds, records, nested batch sizes) and flats of the same sizes, numbered alike.
/// `a_shape`, when given, receives a's shape where it was made (for intact_runs_like to take
/// rather than check it again).
bool runs_laid_out_alike(const TensorDictBase& a, const IntactRuns& ra, const TensorDictBase& b, const IntactRuns& rb,
                         c10::intrusive_ptr<LevelShape>* a_shape = nullptr);
/// Whether each of `partners` (the other operands of an op over `a`) is laid out as `a`; their
/// runs, in order, into `out` (filled in place: an IntactRuns is large to move). `a_shape` as
/// runs_laid_out_alike's, from the first partner.
bool partners_laid_out_alike(const TensorDictBase& a, const IntactRuns& ra, c10::ArrayRef<const TensorDictBase*> partners,
                             c10::SmallVector<IntactRuns, 2>& out, c10::intrusive_ptr<LevelShape>* a_shape = nullptr);

/// A result shaped like `like` (intact_runs found `runs`), its leaves laid out as like's over
/// `results` (one elementwise result per storage, in the same order), made on first access.
/// The leaves over a storage whose result is undefined (the op's result viewed its input, as
/// `to` a run's own dtype does) are `per_leaf(leaf)`, as the op on each leaf returns.
/// (Defined in intact_result.cpp, with the frame of every intact result.)
/// `shape`: like's, when the caller has it from runs_laid_out_alike in the same op.
TensorDict intact_runs_like(const TensorDictBase& like, const IntactRuns& runs, c10::ArrayRef<at::Tensor> results,
                            FunctionRef<at::Tensor(const at::Tensor&)> per_leaf, bool filter_empty, bool lock,
                            c10::intrusive_ptr<LevelShape> shape = {});

}  // namespace in_memory
}  // namespace tensordict
