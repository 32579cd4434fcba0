#include "kv/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack: no allocation per block
#include <xxhash.h>

#include "core/check.h"

namespace rl {

BlockHash hash_block(const BlockHash* parent, std::span<const TokenId> token_ids, std::string_view extra_keys) {
  XXH3_state_t state_storage;
  XXH3_state_t* state = &state_storage;
  RL_CHECK(XXH3_128bits_reset(state) == XXH_OK);
  // The first block gets a distinct marker so that "no parent" never equals a parent whose hash is zero.
  const uint8_t has_parent = parent != nullptr ? 1 : 0;
  XXH3_128bits_update(state, &has_parent, sizeof(has_parent));
  if (parent != nullptr) XXH3_128bits_update(state, parent, sizeof(*parent));
  const uint64_t num_tokens = token_ids.size();
  XXH3_128bits_update(state, &num_tokens, sizeof(num_tokens));
  XXH3_128bits_update(state, token_ids.data(), token_ids.size_bytes());
  const uint64_t num_extra = extra_keys.size();
  XXH3_128bits_update(state, &num_extra, sizeof(num_extra));
  XXH3_128bits_update(state, extra_keys.data(), extra_keys.size());
  const XXH128_hash_t h = XXH3_128bits_digest(state);
  return BlockHash{h.low64, h.high64};
}

}  // namespace rl
