// I/O errors in the middle of a write (a file-size limit, RLIMIT_FSIZE, makes the kernel answer
// EFBIG as a full disk would answer ENOSPC): a typed error naming the file, and the previous
// contents of the destination intact, with no temporary left behind.
#include "support/catch_torch.h"

#include <sys/resource.h>
#include <sys/wait.h>

#include <csignal>
#include <filesystem>

#include <tensordict/backends/memmap.h>
#include <tensordict/backends/memory_mapped_tensor.h>
#include <tensordict/tensordict.h>
#ifdef TENSORDICT_TEST_HDF5
#include <tensordict/backends/persistent.h>
#endif

#include "support/child_process.h"
#include "reliability/payload.h"
#include "support/temp_dir.h"

using namespace tensordict;
using testing_support::TempDir;
namespace fs = std::filesystem;

namespace {

// No file of this process (or of the children it starts) may grow past `bytes` while this
// lives. SIGXFSZ, which would kill the process, is ignored, so the write fails with EFBIG.
class FileSizeLimit {
 public:
  explicit FileSizeLimit(rlim_t bytes) {
    ::getrlimit(RLIMIT_FSIZE, &old_);
    rlimit limit = old_;
    limit.rlim_cur = bytes;
    REQUIRE(::setrlimit(RLIMIT_FSIZE, &limit) == 0);
    old_handler_ = std::signal(SIGXFSZ, SIG_IGN);
  }
  ~FileSizeLimit() {
    ::setrlimit(RLIMIT_FSIZE, &old_);
    std::signal(SIGXFSZ, old_handler_);
  }

 private:
  rlimit old_{};
  void (*old_handler_)(int) = nullptr;
};

constexpr rlim_t kLimit = 1 << 20;  // 1 MiB: the payload's 8 MiB leaves cannot be written

std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(dir)) out.push_back(e.path().filename().string());
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

TEST_CASE("memmap and memmap_like over an existing directory fail on EFBIG naming the file and keep the old data",
          "[reliability][faults]") {
  TempDir dir;
  const std::string dest = dir / "td";
  memmap(reliability::payload(1), dest);
  MemmapOptions replace;
  replace.overwrite = true;
  {
    FileSizeLimit limit(kLimit);
    REQUIRE_THROWS_AS(memmap(reliability::payload(2), dest, replace), StorageError);
    REQUIRE_THROWS_WITH(memmap(reliability::payload(2), dest, replace),
                        Catch::Contains(dest + "/") && Catch::Contains(".memmap") && Catch::Contains("File too large"));
    // Zero-filled files: the size is set, not written.
    REQUIRE_THROWS_WITH(memmap_like(reliability::payload(2), dest, replace),
                        Catch::Contains(dest + "/") && Catch::Contains(".memmap") && Catch::Contains("File too large"));
  }
  CHECK(reliability::generation_of(load_memmap(dest)) == 1);
  CHECK(entries(dir.path()) == std::vector<std::string>{"td"});  // the staging directories are gone
}

TEST_CASE("memmap_ over an existing directory that fails halfway keeps the old data and the tensordict",
          "[reliability][faults]") {
  TempDir dir;
  const std::string dest = dir / "td";
  memmap(reliability::payload(1), dest);
  MemmapOptions replace;  // existsok (the default) and overwrite: Python's memmap_(existsok=True)
  replace.overwrite = true;
  SECTION("a full disk") {
    TensorDict td = reliability::payload(2);
    {
      FileSizeLimit limit(kLimit);
      REQUIRE_THROWS_WITH(memmap_(td, dest, replace), Catch::Contains("File too large"));
    }
    CHECK_FALSE(td.is_memmap());
    CHECK_FALSE(td.is_locked());
    CHECK(reliability::generation_of(td) == 2);
  }
  SECTION("a leaf that cannot be written, after others were") {
    // A leaf mapped from another file is refused without copy_existing; "obs" and "action" were
    // written (to the staging directory) before it.
    TensorDict td = reliability::payload(2);
    TensorDict other = memmap(TensorDict({{"obs", at::full({4096, 512}, 2.0)}}, {4096}), dir / "other");
    td.set({"next", "obs"}, other.get("obs"));
    REQUIRE_THROWS_WITH(memmap_(td, dest, replace), Catch::Contains("already has a file associated"));
    CHECK_FALSE(td.is_memmap());
  }
  CHECK(reliability::generation_of(load_memmap(dest)) == 1);
  CHECK(std::count_if(fs::directory_iterator(dir.path()), fs::directory_iterator(),
                      [](const auto& e) { return e.path().filename().string().find("tdstage") != std::string::npos; }) == 0);
}

TEST_CASE("consolidate to an existing file fails on EFBIG naming it and keeps the old file", "[reliability][faults]") {
  TempDir dir;
  const std::string dest = dir / "td.bin";
  ConsolidateOptions options;
  options.filename = dest;
  consolidate(reliability::payload(1), options);
  {
    FileSizeLimit limit(kLimit);
    REQUIRE_THROWS_AS(consolidate(reliability::payload(2), options), StorageError);
    REQUIRE_THROWS_WITH(consolidate(reliability::payload(2), options),
                        Catch::Contains(dest) && Catch::Contains("File too large"));
  }
  CHECK(reliability::generation_of(from_consolidated(dest)) == 1);
  CHECK(entries(dir.path()) == std::vector<std::string>{"td.bin"});
}

#ifdef TENSORDICT_TEST_HDF5
TEST_CASE("to_h5 over an existing file fails on EFBIG naming it and keeps the old file", "[reliability][faults]") {
  TempDir dir;
  const std::string dest = dir / "td.h5";
  PersistentTensorDict::to_h5(reliability::payload(1), dest).close();
  H5Options replace;
  replace.overwrite = true;
  {
    FileSizeLimit limit(kLimit);
    REQUIRE_THROWS_AS(PersistentTensorDict::to_h5(reliability::payload(2), dest, replace), StorageError);
    REQUIRE_THROWS_WITH(PersistentTensorDict::to_h5(reliability::payload(2), dest, replace),
                        Catch::Contains(dest) && !Catch::Contains("already exists"));
  }
  CHECK(reliability::generation_of(PersistentTensorDict::from_h5(dest, "r")) == 1);
  CHECK(entries(dir.path()) == std::vector<std::string>{"td.h5"});
}

TEST_CASE("tdtool convert fails on EFBIG with a message naming the file and leaves no destination",
          "[reliability][faults]") {
  TempDir dir;
  memmap(reliability::payload(1), dir / "source");
  PersistentTensorDict::to_h5(reliability::payload(1), dir / "source.h5").close();
  for (const auto& [source, dest] : std::vector<std::pair<std::string, std::string>>{
           {dir / "source", dir / "out.h5"}, {dir / "source.h5", dir / "out"}}) {
    FileSizeLimit limit(kLimit);  // inherited by the child, with SIGXFSZ ignored
    testing_support::ChildProcess tdtool({TDTOOL_PATH, "convert", source, dest}, /*merge_stderr=*/true);
    const std::string output = tdtool.read_all();
    const int status = tdtool.wait();
    INFO(output);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
    CHECK(output.find(dest) != std::string::npos);
    CHECK_FALSE(fs::exists(dest));
  }
  CHECK(entries(dir.path()) == std::vector<std::string>{"source", "source.h5"});
}
#endif
