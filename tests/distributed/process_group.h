#pragma once
// A Gloo process group on loopback, rendezvous through a TCPStore: what each rank of the
// distributed tests (and the benchmark and example) builds.

#include <chrono>
#include <cstdint>
#include <iostream>
#include <string>

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace testing_support {

/// Rank 0 serves the store: with `port` 0 it takes a free one and prints "port N" on stdout,
/// for the parent to start the other ranks with.
inline c10::intrusive_ptr<c10d::ProcessGroupGloo> loopback_group(int rank, int world, uint16_t port,
                                                                std::chrono::milliseconds timeout = std::chrono::seconds(30),
                                                                const std::string& host = "127.0.0.1") {
  c10d::TCPStoreOptions store_options;
  store_options.port = port;
  store_options.isServer = rank == 0;
  store_options.numWorkers = static_cast<size_t>(world);
  store_options.waitWorkers = false;
  store_options.timeout = timeout;
  auto store = c10::make_intrusive<c10d::TCPStore>(host, store_options);
  if (rank == 0 && port == 0) std::cout << "port " << store->getPort() << std::endl;
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world, options);
}

}  // namespace testing_support
