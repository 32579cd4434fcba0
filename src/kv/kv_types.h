// Integer vocabulary shared by the KV bookkeeping (kv/) and the scheduler (sched/): no tensors here.
#pragma once

#include <cstdint>

namespace rl {

using TokenId = int32_t;
using BlockId = int32_t;

// Block 0 is never handed out: block tables are padded with it, so a padded slot points at harmless memory.
inline constexpr BlockId kNullBlock = 0;
inline constexpr int32_t kDefaultBlockSize = 16;

}  // namespace rl
