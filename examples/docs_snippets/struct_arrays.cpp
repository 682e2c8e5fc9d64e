// The snippets of docs/typed-api.md#arrays-of-plain-structs. The class comes from the plain-data
// struct of schemas/rows.h (tdgen's C++ frontend; built only with TENSORDICT_WITH_CLANG).
#include <iostream>
#include <memory>
#include <vector>

#include <ATen/ATen.h>
#include <tensordict/tensordict.h>

#include "rows.td.h"

// docs/typed-api.md#arrays-of-plain-structs
int main() {
  std::vector<rows::schema::Pose> poses(100);            // rows::Pose::Row
  poses[7].pos[2] = 1.5f;
  rows::Pose p = rows::Pose::from_struct_array(poses);  // batch [100]: views of the members
  at::Tensor pos = p.pos();                              // [100, 3] float32, no copy
  p.object_id()[7].fill_(42);                            // writes reach poses[7].id,
  poses[3].t = 0.25;                                     // and p.t()[3] is 0.25
  std::vector<rows::Pose::Row> copy = p.to_struct_array();  // new rows, one per element

  auto shared = std::make_shared<std::vector<rows::schema::Pose>>(10);
  rows::Pose owned = rows::Pose::from_struct_array(shared);  // the fields keep the rows alive

  std::cout << pos.size(0) << " " << poses[7].id << " " << p.t()[3].item<double>() << " " << copy[7].pos[2] << " "
            << owned.batch_size() << "\n";
  return poses[7].id == 42 && copy[7].pos[2] == 1.5f ? 0 : 1;
}
