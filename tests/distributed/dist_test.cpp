// Tensordicts between real processes: dist_worker ranks on loopback (TCPStore + Gloo), 2 and 4
// of them. Each rank checks what it received; this test starts them, bounds their run time
// (a hang fails, it does not block the suite) and reads their results.
#include "support/catch_torch.h"

#include <sys/wait.h>

#include <memory>
#include <string>
#include <vector>

#include "support/child_process.h"

using testing_support::ChildProcess;

namespace {

struct RankResult {
  int status = 0;  // wait status; -1: still running at the deadline (killed)
  std::string output;
};

// Starts `world` ranks of `scenario`: rank 0 first (it picks the port), then the others.
std::vector<RankResult> run_ranks(const std::string& scenario, int world,
                                  std::chrono::seconds deadline = std::chrono::seconds(90)) {
  auto start = [&](int rank, const std::string& port) {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{DIST_WORKER_PATH, scenario, std::to_string(rank), std::to_string(world), port},
        /*merge_stderr=*/true);
  };
  std::vector<std::unique_ptr<ChildProcess>> ranks;
  ranks.push_back(start(0, "0"));
  std::string port_line;
  REQUIRE(ranks[0]->wait_for_prefix("port ", port_line, std::chrono::seconds(30)));
  for (int r = 1; r < world; ++r) ranks.push_back(start(r, port_line.substr(5)));
  std::vector<RankResult> out;
  for (auto& rank : ranks) {
    RankResult result;
    result.status = rank->wait_or_kill(deadline);
    result.output = rank->read_all();
    out.push_back(std::move(result));
  }
  return out;
}

bool succeeded(const RankResult& r) { return r.status >= 0 && WIFEXITED(r.status) && WEXITSTATUS(r.status) == 0; }

void require_all_succeeded(const std::vector<RankResult>& results) {
  for (size_t r = 0; r < results.size(); ++r) {
    INFO("rank " << r << (results[r].status < 0 ? " hung and was killed" : "") << ":\n" << results[r].output);
    CHECK(succeeded(results[r]));
  }
}

}  // namespace

TEST_CASE("send, recv, isend, irecv and init_remote move nested, non-tensor and typed data between two processes",
          "[distributed][processes]") {
  require_all_succeeded(run_ranks("p2p", 2));
}

TEST_CASE("every dtype goes through send and recv, and the ones Gloo reduces through all_reduce_",
          "[distributed][processes]") {
  const auto results = run_ranks("dtypes", 2);
  require_all_succeeded(results);
  WARN(results[0].output);  // which dtypes Gloo reduced
}

TEST_CASE("mismatched structures are a typed error on both sides naming the first differing key",
          "[distributed][processes][errors]") {
  const auto results = run_ranks("mismatch", 2);
  require_all_succeeded(results);
  CHECK(results[0].output.find("b.c") != std::string::npos);
  CHECK(results[1].output.find("b.c") != std::string::npos);
}

TEST_CASE("a peer killed mid-transfer is a typed error, not a hang", "[distributed][processes][errors]") {
  const auto results = run_ranks("killed", 2, std::chrono::seconds(60));
  INFO(results[0].output);
  CHECK(succeeded(results[0]));
  CHECK(results[0].output.find("after") != std::string::npos);
  REQUIRE(results[1].status >= 0);
  CHECK(WIFSIGNALED(results[1].status));
}

TEST_CASE("a peer that never sends is a typed timeout", "[distributed][processes][errors]") {
  require_all_succeeded(run_ranks("silent", 2));
}

TEST_CASE("collectives over the leaves with 2 ranks", "[distributed][processes]") {
  require_all_succeeded(run_ranks("collectives", 2));
}

TEST_CASE("collectives over the leaves with 4 ranks", "[distributed][processes]") {
  require_all_succeeded(run_ranks("collectives", 4));
}
