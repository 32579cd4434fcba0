// A per-sequence constraint on the next token (structured outputs: a grammar matcher). The scheduler only carries
// it; the engine applies its mask to the sequence's logits row before sampling and advances it with the sampled
// token. Defined here, as an interface, so that sched and runtime need not know the grammar module.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "kv/kv_types.h"

namespace rl {

class TokenConstraint {
 public:
  virtual ~TokenConstraint() = default;
  // words[num_words]: bit t (bit t % 32 of word t / 32) set = token t allowed. Ids beyond the constraint's own
  // vocabulary are not allowed.
  virtual void fill_bitmask(uint32_t* words, int32_t num_words) = 0;
  // Advances by the sampled token; false (state unchanged) when the token was not allowed.
  virtual bool accept(TokenId token) = 0;
};

// Makes the state of one sequence (n > 1 choices each get their own).
using TokenConstraintFactory = std::function<std::unique_ptr<TokenConstraint>()>;

}  // namespace rl
