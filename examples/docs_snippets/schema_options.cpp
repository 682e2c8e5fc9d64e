// The snippets of docs/schema-format.md#beyond-pythons-schemas. Classes come from
// schemas/scan.h (or its YAML twin scan.yaml where tdgen is built without Clang).
#include <iostream>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>

#include "scan.td.h"

namespace td = tensordict;

// docs/schema-format.md#beyond-pythons-schemas
int main() {
  // `valid` and `source` are not given: the constructor stores their defaults.
  scan::Scan s({{"points", at::rand({2, 5, 3})}, {"index", at::arange(10).reshape({2, 5})}},
               /*batch_size=*/{2});
  at::Tensor valid = s.valid();          // [2, 5], all true: N taken from `points`
  std::string source = s.source();       // "lidar"
  at::Tensor index = s.point_index();    // stored under the key "index"
  bool stored = s.tensordict().contains("index");

  try {
    s.set_valid(at::ones({2, 4}, at::kBool));  // N is 5 in `points`
  } catch (const td::ShapeError& e) {
    std::cout << e.what() << "\n";  // Scan.valid: dim N is 4 here (shape [2, 4]) but 5 in Scan.points ...
  }

  scan::Calibration calib({{"matrix", at::eye(4, at::kDouble)}}, {});
  bool locked = calib.is_locked();            // frozen: locked after construction
  calib.set_matrix_(at::eye(4, at::kDouble));  // in place is allowed, as on any locked tensordict

  if (!valid.all().item<bool>() || source != "lidar" || index.size(1) != 5 || !stored || !locked) return 1;
  return 0;
}
