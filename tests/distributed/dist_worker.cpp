// One rank of a distributed test: dist_worker SCENARIO RANK WORLD PORT.
//
// Builds a Gloo process group on loopback (rank 0 serves the TCPStore; with PORT 0 it prints
// the port it took), runs SCENARIO, prints "ok" and exits 0 when every check held; prints what
// failed and exits 1 otherwise. The checks run in this process: dist_test only reads the result.
#include <csignal>
#include <cstdlib>
#include <iostream>
#include <stdexcept>
#include <string>
#include <thread>

#include <ATen/ATen.h>

#include <tensordict/distributed.h>
#include <tensordict/tensordict.h>

#include "distributed/process_group.h"
#include "observation.td.h"

using namespace tensordict;
namespace dist = tensordict::distributed;

namespace {

void expect(bool ok, const std::string& what) {
  if (!ok) throw std::logic_error(what);
}

// Every leaf and non-tensor value of `a` equal to `b`'s, batch sizes included.
void expect_same(const TensorDict& a, const TensorDict& b, const std::string& what) {
  expect(a.batch_size() == b.batch_size(), what + ": batch sizes differ");
  const auto items = a.items(/*include_nested=*/true);
  expect(items.size() == b.items(true).size(), what + ": key counts differ");
  for (const auto& [key, entry] : items) {
    const Entry other = b.find(key);
    expect(other.kind() == entry.kind(), what + ": kinds differ at " + key.join("."));
    if (entry.is_tensor()) {
      expect(entry.tensor().scalar_type() == other.tensor().scalar_type(), what + ": dtype of " + key.join("."));
      expect(at::equal(entry.tensor(), other.tensor()), what + ": values of " + key.join("."));
    } else if (entry.is_tensordict()) {
      expect(entry.tensordict().batch_size() == other.tensordict().batch_size(), what + ": batch of " + key.join("."));
    } else if (entry.is_non_tensor()) {
      expect(entry.non_tensor() == other.non_tensor(), what + ": non-tensor value of " + key.join("."));
    }
  }
}

// Nested levels with their own batch sizes, several dtypes, a large leaf (sent alone), a
// uniform and a per-row non-tensor value. `seed` changes every value.
TensorDict sample(int seed) {
  const double s = seed;
  TensorDict td({{"obs", at::arange(4 * 6, at::kFloat).view({4, 6}) + s},
                 {"done", (at::arange(4) + seed).remainder(2).to(at::kBool)},
                 {"big", at::full({4, 1 << 17}, s, at::kDouble)}},  // 4 MiB
                {4});
  td.set({"next", "reward"}, at::arange(4, at::kDouble) * s);
  td.set({"next", "rotation"}, at::full({4, 1}, c10::complex<double>(s, -s)));  // 16-byte elements at an 8-byte offset
  td.set({"next", "deep", "count"}, at::full({4, 2, 3}, seed, at::kLong));
  td.set_non_tensor("label", json::Value("run " + std::to_string(seed)));
  const json::Value names(json::Array{json::Value("a" + std::to_string(seed)), json::Value("b"), json::Value("c"), json::Value("d")});
  td.set({"next", "names"}, NonTensorData::from_list(names, {4}));  // one value per row
  return td;
}

TensorDict sample_with_nested_batch(int seed) {
  TensorDict td = sample(seed);
  td.get_tensordict({"next", "deep"}).set_batch_size({4, 2});
  return td;
}

// consolidate() refuses per-row non-tensor values (Python could not read them back).
TensorDict consolidatable(int seed) {
  TensorDict td = sample_with_nested_batch(seed);
  td.erase({"next", "names"});
  return td;
}

void p2p(c10d::ProcessGroup& pg) {
  const int rank = pg.getRank();
  if (rank == 0) {
    dist::send(sample_with_nested_batch(1), pg, 1);
    dist::Work w = dist::isend(sample_with_nested_batch(2), pg, 1);
    w.wait();
    dist::init_remote(sample_with_nested_batch(3), pg, 1);
    dist::send(consolidate(consolidatable(4)), pg, 1);  // into a consolidated one: its storage, one message
    dist::send(consolidate(consolidatable(5)), pg, 1);  // into a plain one: leaf by leaf
    rl::Observation obs({{"pixels", at::full({2, 84, 84, 3}, 7, at::kByte)}, {"state", at::ones({2, 5})}, {"label", "seen"}}, {2});
    dist::init_remote(obs, pg, 1);
    dist::send(obs, pg, 1);
  } else {
    TensorDict into = sample_with_nested_batch(0);
    dist::recv(into, pg, 0);
    expect_same(into, sample_with_nested_batch(1), "recv");
    dist::Work w = dist::irecv(into, pg, 0);
    expect(w.wait(std::chrono::seconds(30)), "irecv did not finish");
    expect_same(into, sample_with_nested_batch(2), "irecv");
    TensorDict fresh = dist::from_remote_init(pg, 0);
    expect_same(fresh, sample_with_nested_batch(3), "from_remote_init");
    expect(fresh.get_tensordict({"next", "deep"}).batch_size() == c10::IntArrayRef({4, 2}), "nested batch lost");
    TensorDict packed = consolidate(consolidatable(0));
    const void* storage = consolidated_storage(packed).data_ptr();
    dist::recv(packed, pg, 0);
    expect_same(packed, consolidatable(4), "recv into a consolidated tensordict");
    expect(consolidated_storage(packed).data_ptr() == storage, "the consolidated storage was replaced");
    TensorDict plain = consolidatable(0);
    dist::recv(plain, pg, 0);
    expect_same(plain, consolidatable(5), "recv from a consolidated tensordict");
    rl::Observation obs = dist::from_remote_init_as<rl::Observation>(pg, 0);
    expect(at::equal(obs.pixels(), at::full({2, 84, 84, 3}, 7, at::kByte)) && obs.label() == "seen", "typed from_remote_init");
    rl::Observation again = rl::Observation::from_tensordict(obs.to_tensordict().zero_());
    dist::recv(again, pg, 0);
    expect(at::equal(again.state(), at::ones({2, 5})), "typed recv");
  }
}

// Every dtype through send/recv; the reductions for the dtypes Gloo reduces (others must be
// refused with a DistributedError, not crash).
void dtypes(c10d::ProcessGroup& pg) {
  const int rank = pg.getRank();
  const std::vector<at::ScalarType> all = {at::kBool,  at::kByte,     at::kChar,   at::kShort,       at::kInt,
                                           at::kLong,  at::kHalf,     at::kBFloat16, at::kFloat,     at::kDouble,
                                           at::kComplexFloat, at::kComplexDouble};
  for (at::ScalarType dtype : all) {
    const at::Tensor values = (at::arange(12).remainder(5) + 1).to(dtype).view({4, 3});
    TensorDict td({{"x", rank == 0 ? values : at::zeros({4, 3}, values.options())}}, {4});
    if (rank == 0) dist::send(td, pg, 1);
    else {
      dist::recv(td, pg, 0);
      expect(at::equal(td.get("x"), values), std::string("send/recv of ") + c10::toString(dtype));
    }
  }
  std::string reduced, refused;
  for (at::ScalarType dtype : all) {
    TensorDict td({{"x", at::ones({4, 3}, dtype)}}, {4});
    try {
      dist::all_reduce_(td, pg);
      expect(at::equal(td.get("x"), at::full({4, 3}, 2, dtype)), std::string("all_reduce_ of ") + c10::toString(dtype));
      reduced += std::string(" ") + c10::toString(dtype);
    } catch (const DistributedError&) {
      refused += std::string(" ") + c10::toString(dtype);
    }
  }
  std::cout << "all_reduce_:" << reduced << "; refused:" << refused << std::endl;
  for (const char* must : {"Float", "Double", "Int", "Long", "Byte", "Char"})
    expect(reduced.find(std::string(" ") + must) != std::string::npos, std::string("all_reduce_ refused ") + must);
}

void mismatch(c10d::ProcessGroup& pg) {
  const int rank = pg.getRank();
  TensorDict td({{"a", at::zeros({4})}}, {4});
  td.set({"b", "c"}, at::zeros({4}, rank == 0 ? at::kLong : at::kInt));
  try {
    if (rank == 0) dist::send(td, pg, 1);
    else dist::recv(td, pg, 0);
    throw std::logic_error("a mismatched transfer went through");
  } catch (const DistributedError& e) {
    std::cout << "rank " << rank << ": " << e.what() << std::endl;
    expect(std::string(e.what()).find("b.c") != std::string::npos, "the message does not name b.c");
  }
  // The group still works after a refused transfer.
  TensorDict same({{"a", at::ones({4})}}, {4});
  dist::all_reduce_(same, pg);
  expect(at::equal(same.get("a"), at::full({4}, 2.f)), "all_reduce_ after a mismatch");
  try {
    dist::all_reduce_(td, pg);
    throw std::logic_error("a mismatched all_reduce_ went through");
  } catch (const DistributedError& e) {
    std::cout << "rank " << rank << ": " << e.what() << std::endl;
    expect(std::string(e.what()).find("differ in structure: key 'b.c'") != std::string::npos, "collective mismatch message");
  }
}

void killed_peer(c10d::ProcessGroup& pg) {
  if (pg.getRank() == 1) std::raise(SIGKILL);
  TensorDict td({{"a", at::zeros({4})}}, {4});
  const auto start = std::chrono::steady_clock::now();
  try {
    dist::Options options;
    options.timeout = std::chrono::seconds(20);
    dist::recv(td, pg, 1, options);
    throw std::logic_error("recv from a killed peer returned");
  } catch (const DistributedError& e) {
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::cout << "after " << s << " s: " << e.what() << std::endl;
  }
}

void silent_peer(c10d::ProcessGroup& pg) {
  if (pg.getRank() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(4));
    return;
  }
  TensorDict td({{"a", at::zeros({4})}}, {4});
  dist::Options options;
  options.timeout = std::chrono::seconds(1);
  try {
    dist::recv(td, pg, 1, options);
    throw std::logic_error("recv from a silent peer returned");
  } catch (const DistributedError& e) {
    std::cout << e.what() << std::endl;
    expect(std::string(e.what()).find("imed out") != std::string::npos, "not reported as a timeout");
  }
}

void collectives(c10d::ProcessGroup& pg) {
  const int rank = pg.getRank(), world = pg.getSize();
  auto mine = [&] {
    TensorDict td({{"x", at::full({3, 2}, rank + 1.0)}}, {3});
    td.set({"y", "z"}, at::full({3}, rank, at::kLong));
    td.set_non_tensor("tag", json::Value("rank " + std::to_string(rank)));
    return td;
  };
  const double sum_x = world * (world + 1) / 2.0;
  const int64_t sum_z = world * (world - 1) / 2;
  TensorDict td = mine();
  dist::all_reduce_(td, pg);
  expect(at::equal(td.get("x"), at::full({3, 2}, sum_x)) && at::equal(td.get({"y", "z"}), at::full({3}, sum_z, at::kLong)),
         "all_reduce_ sum");
  td = mine();
  dist::all_reduce_(td, pg, dist::ReduceOp::Max);
  expect(at::equal(td.get("x"), at::full({3, 2}, static_cast<double>(world))), "all_reduce_ max");
  td = mine();
  dist::reduce_(td, pg, 0);
  if (rank == 0) expect(at::equal(td.get("x"), at::full({3, 2}, sum_x)), "reduce_ to rank 0");
  td = mine();
  dist::broadcast_(td, pg, 1);
  expect(at::equal(td.get("x"), at::full({3, 2}, 2.0)) && td.get_non_tensor("tag").value() == json::Value("rank 1"),
         "broadcast_ from rank 1");
  const TensorDict gathered = dist::all_gather(mine(), pg);
  expect(gathered.batch_size() == c10::IntArrayRef({world, 3}), "all_gather batch");
  for (int r = 0; r < world; ++r)
    expect(at::equal(gathered.get("x")[r], at::full({3, 2}, r + 1.0)) && at::equal(gathered.get({"y", "z"})[r], at::full({3}, r, at::kLong)),
           "all_gather rank " + std::to_string(r));
  // gather_and_stack: the last rank receives the others' rows, in rank order, in place.
  const int dst = world - 1;
  if (rank == dst) {
    TensorDict stacked = stack(std::vector<TensorDict>(static_cast<size_t>(world - 1), mine()), 0).apply(
        [](const at::Tensor& t) { return at::full_like(t, -1); });
    dist::gather_and_stack(stacked, pg, dst);
    for (int r = 0; r < world - 1; ++r)
      expect(at::equal(stacked.get("x")[r], at::full({3, 2}, r + 1.0)) && at::equal(stacked.get({"y", "z"})[r], at::full({3}, r, at::kLong)),
             "gather_and_stack row " + std::to_string(r));
  } else {
    TensorDict own = mine();
    dist::gather_and_stack(own, pg, dst);
  }
  rl::Observation obs({{"pixels", at::full({2, 84, 84, 3}, rank, at::kByte)}, {"state", at::ones({2, 5})}}, {2});
  dist::all_reduce_(obs, pg);
  expect(at::equal(obs.state(), at::full({2, 5}, static_cast<float>(world))), "typed all_reduce_");
  const rl::Observation all = dist::all_gather(obs, pg);
  expect(all.batch_size() == c10::IntArrayRef({world, 2}), "typed all_gather");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::cerr << "usage: dist_worker p2p|dtypes|mismatch|killed|silent|collectives RANK WORLD PORT\n";
    return 2;
  }
  const std::string scenario = argv[1];
  const int rank = std::atoi(argv[2]), world = std::atoi(argv[3]);
  try {
    auto pg = testing_support::loopback_group(rank, world, static_cast<uint16_t>(std::atoi(argv[4])));
    if (scenario == "p2p") p2p(*pg);
    else if (scenario == "dtypes") dtypes(*pg);
    else if (scenario == "mismatch") mismatch(*pg);
    else if (scenario == "killed") killed_peer(*pg);
    else if (scenario == "silent") silent_peer(*pg);
    else if (scenario == "collectives") collectives(*pg);
    else {
      std::cerr << "unknown scenario " << scenario << "\n";
      return 2;
    }
  } catch (const std::exception& e) {
    std::cout << "rank " << rank << " failed: " << e.what() << std::endl;
    return 1;
  }
  std::cout << "ok" << std::endl;
  return 0;
}
