// The free blocks in eviction order (vLLM's FreeKVCacheBlockQueue): an intrusive doubly linked list over block
// ids, so a cached free block that gets a prefix hit leaves the middle of the queue in O(1).
// Invariants: each block id is in the queue at most once; size() counts the ids linked between head and tail;
// the front is the least recently freed block (evicted first).
#pragma once

#include <cstdint>
#include <vector>

#include "kv/kv_types.h"

namespace rl {

class FreeBlockQueue {
 public:
  // Starts empty; ids in [0, num_blocks) may be pushed.
  explicit FreeBlockQueue(int32_t num_blocks);

  int32_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  bool contains(BlockId id) const;

  void push_back(BlockId id);
  BlockId pop_front();
  void remove(BlockId id);

  // Front-to-back order (tests and integrity checks).
  std::vector<BlockId> to_vector() const;

 private:
  static constexpr BlockId kNone = -1;
  // prev_/next_ hold kNone at the ends; in_queue_ tells a lone element apart from an absent one.
  std::vector<BlockId> prev_;
  std::vector<BlockId> next_;
  std::vector<uint8_t> in_queue_;
  BlockId head_ = kNone;
  BlockId tail_ = kNone;
  int32_t size_ = 0;
};

}  // namespace rl
