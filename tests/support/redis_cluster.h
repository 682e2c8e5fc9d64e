#pragma once
// A real Redis Cluster for one test: `masters` redis-servers with `replicas` replicas each, on
// free loopback ports (each node's cluster bus is its port + 10000), joined by `redis-cli
// --cluster create`, and stopped with the object (RedisServer stops each node). A short
// cluster-node-timeout makes failovers take seconds.

#include <sys/socket.h>
#include <netinet/in.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <tensordict/backends/store_options.h>

#include <tensordict/errors.h>

#include "backends/redis/cluster_map.h"
#include "support/child_process.h"
#include "support/redis_server.h"

namespace testing_support {

namespace detail {

inline bool port_free(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return false;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace detail

/// redis-cli's output for `args` (its exit status checked: std::runtime_error with the output).
inline std::string redis_cli(const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/redis-cli"};
  argv.insert(argv.end(), args.begin(), args.end());
  ChildProcess cli(argv, true);
  std::string out = cli.read_all();
  const int status = cli.wait_or_kill(std::chrono::seconds(60));
  if (status != 0) throw std::runtime_error("redis-cli failed (status " + std::to_string(status) + "): " + out);
  return out;
}

class RedisCluster {
 public:
  RedisCluster(int masters, int replicas, std::vector<std::string> extra = {}) : replicas_(replicas) {
    std::mt19937 rng(static_cast<unsigned>(::getpid()) * 7919u +
                     static_cast<unsigned>(std::chrono::steady_clock::now().time_since_epoch().count()));
    const int count = masters * (1 + replicas);
    while (static_cast<int>(ports_.size()) < count) {
      const int port = 20000 + static_cast<int>(rng() % 20000);
      if (detail::port_free(port) && detail::port_free(port + 10000)) ports_.push_back(port);
    }
    for (int port : ports_) {
      std::vector<std::string> args = {"--port", std::to_string(port), "--bind", "127.0.0.1", "--cluster-enabled", "yes",
                                       "--cluster-config-file", "nodes.conf", "--cluster-node-timeout", "1000",
                                       // A replica that rejoins syncs at once (Redis waits 5 s for more by default).
                                       "--repl-diskless-sync-delay", "0"};
      args.insert(args.end(), extra.begin(), extra.end());
      nodes_.push_back(std::make_unique<RedisServer>(args));
    }
    std::vector<std::string> create = {"--cluster", "create"};
    for (int port : ports_) create.push_back("127.0.0.1:" + std::to_string(port));
    create.insert(create.end(), {"--cluster-replicas", std::to_string(replicas), "--cluster-yes"});
    redis_cli(create);
    wait_ok();
  }

  const std::vector<int>& ports() const { return ports_; }
  /// Every node as "127.0.0.1:port": StoreOptions::cluster_nodes.
  std::vector<std::string> addresses() const {
    std::vector<std::string> out;
    for (int port : ports_) out.push_back("127.0.0.1:" + std::to_string(port));
    return out;
  }
  tensordict::StoreOptions options() const {
    tensordict::StoreOptions options;
    options.cluster_nodes = addresses();
    return options;
  }
  RedisServer& node(int port) {
    for (size_t i = 0; i < ports_.size(); ++i)
      if (ports_[i] == port) return *nodes_[i];
    throw std::runtime_error("no cluster node on port " + std::to_string(port));
  }
  /// redis-cli against the node on `port`.
  std::string cli(int port, std::vector<std::string> args) const {
    args.insert(args.begin(), {"-h", "127.0.0.1", "-p", std::to_string(port)});
    return redis_cli(args);
  }
  /// The port of the master of `slot`, as the node on `asked` sees it (CLUSTER SLOTS); -1 when
  /// it names none or does not answer.
  int master_of(int slot, int asked) const {
    try {
      tensordict::StoreOptions options;
      const tensordict::redis::NodeAddress node{"127.0.0.1", asked, ""};
      tensordict::redis::Connection connection(options, node);
      const tensordict::redis::Replies replies = connection.pipeline({{"CLUSTER", "SLOTS"}});
      const tensordict::redis::SlotMap map = tensordict::redis::SlotMap::parse(replies[0], node);
      const tensordict::redis::NodeAddress* master = map.master(slot);
      return master == nullptr ? -1 : master->port;
    } catch (const tensordict::StorageError&) {
      return -1;
    }
  }
  /// Waits until every running node reports cluster_state:ok.
  void wait_ok(std::chrono::seconds timeout = std::chrono::seconds(60)) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    for (;;) {
      bool ok = true;
      for (size_t i = 0; i < ports_.size() && ok; ++i)
        if (nodes_[i]->running()) ok = cli(ports_[i], {"CLUSTER", "INFO"}).find("cluster_state:ok") != std::string::npos;
      // A replica counts once its master lists it online (WAIT needs it).
      for (size_t i = 0; i < ports_.size() && ok; ++i) {
        if (!nodes_[i]->running()) continue;
        const std::string info = cli(ports_[i], {"INFO", "replication"});
        if (info.find("role:master") == std::string::npos) continue;
        ok = count_online(info) >= replicas_;
      }
      if (ok) return;
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("the cluster is not ok after its timeout");
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  }

 private:
  static int count_online(const std::string& info) {
    int n = 0;
    for (size_t at = info.find(",state=online"); at != std::string::npos; at = info.find(",state=online", at + 1)) ++n;
    return n;
  }

  int replicas_;
  std::vector<int> ports_;
  std::vector<std::unique_ptr<RedisServer>> nodes_;
};

}  // namespace testing_support
