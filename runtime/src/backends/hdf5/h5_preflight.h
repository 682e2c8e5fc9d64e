#pragma once
// The check of an HDF5 file from an untrusted source, in a child process (docs/reliability.md,
// "Untrusted HDF5 files"). HDF5 1.10 itself crashes or hangs on some corrupt files, before this
// project's code sees any data, and no caller can prevent that inside its own process. So a
// forked copy of the process opens the file first and touches every group, dataset and
// attribute the backend reads; if that copy dies or hangs, the file is refused with a
// StorageError naming it, and the caller's process goes on.

#include <chrono>
#include <string>

namespace tensordict {
namespace h5 {

/// What the child does: opens `path` read-only and touches what the backend would read (every
/// group listed both ways, every link opened, every attribute, every dataset's type, shape,
/// layout, chunk index and first element, attributes and string datasets whole). Plain HDF5 C
/// calls, no LibTorch. Returns "" for a clean walk, else the first call that failed on the
/// file's structure ("/g: H5Literate failed: <HDF5's message>"): HDF5 1.10's error paths on
/// corrupt metadata free invalid pointers, which may or may not crash the process that runs
/// them, so such a file is refused too. Values HDF5 cannot read (a missing filter) and files it
/// cannot open at all are left to the backend's typed errors.
std::string walk_for_check(const char* path);

/// Runs `walk(path)` in a forked child, and waits for it at most `timeout`. StorageError naming
/// `path` when the walk reports a failure, when the child dies of a signal ("the HDF5 library
/// crashed (SIGSEGV)"), exits without finishing, or runs past the timeout (it is then killed:
/// "timed out"). RuntimeError when no child can be started. The child is forked while this
/// thread holds HDF5's global lock, so no other thread of the process is inside HDF5 at that
/// instant and the child never inherits a lock it cannot take.
void run_contained(const std::string& path, std::chrono::milliseconds timeout, std::string (*walk)(const char* path));

/// The check from_h5 runs for an untrusted file: run_contained(path, timeout, walk_for_check),
/// skipped for a file this process has open for writing (HDF5 would share that open file with
/// the child, whose cache could flush the parent's pending writes; the process wrote it, so it
/// is not untrusted).
void check_in_child(const std::string& path, std::chrono::milliseconds timeout);

}  // namespace h5
}  // namespace tensordict
