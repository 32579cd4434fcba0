// Helpers shared by the KV cache manager and scheduler tests: block-id and token lists, and runs of token ids.
#pragma once

#include <cstdint>
#include <numeric>
#include <vector>

#include "kv/kv_types.h"

namespace rl::test {

using Ids = std::vector<BlockId>;
using Tokens = std::vector<TokenId>;

// n token ids counting up from start.
inline Tokens iota_tokens(int32_t n, TokenId start) {
  Tokens t(n);
  std::iota(t.begin(), t.end(), start);
  return t;
}

}  // namespace rl::test
