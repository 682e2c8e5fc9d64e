#pragma once
// Umbrella header of the tensordict-cpp runtime.

#include <tensordict/backends/consolidated.h>
#include <tensordict/backends/lazy_stack.h>
#include <tensordict/backends/memmap.h>
#include <tensordict/backends/memory_mapped_tensor.h>
#include <tensordict/batch_index.h>
#include <tensordict/dict.h>
#include <tensordict/dtype.h>
#include <tensordict/entry.h>
#include <tensordict/errors.h>
#include <tensordict/json.h>
#include <tensordict/key.h>
#include <tensordict/map.h>
#include <tensordict/non_tensor.h>
#include <tensordict/op_options.h>
#include <tensordict/ops.h>
#include <tensordict/struct_array.h>
#include <tensordict/tensor_dict.h>
#include <tensordict/tensor_dict_base.h>
