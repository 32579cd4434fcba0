#include "kv/free_block_queue.h"

#include "core/check.h"

namespace rl {

FreeBlockQueue::FreeBlockQueue(int32_t num_blocks)
    : prev_(num_blocks, kNone), next_(num_blocks, kNone), in_queue_(num_blocks, 0) {}

bool FreeBlockQueue::contains(BlockId id) const {
  return id >= 0 && id < static_cast<BlockId>(in_queue_.size()) && in_queue_[id] != 0;
}

void FreeBlockQueue::push_back(BlockId id) {
  RL_CHECK(id >= 0 && id < static_cast<BlockId>(in_queue_.size()));
  RL_CHECK(!in_queue_[id]);
  prev_[id] = tail_;
  next_[id] = kNone;
  if (tail_ != kNone) {
    next_[tail_] = id;
  } else {
    head_ = id;
  }
  tail_ = id;
  in_queue_[id] = 1;
  ++size_;
}

BlockId FreeBlockQueue::pop_front() {
  RL_CHECK(head_ != kNone);
  const BlockId id = head_;
  remove(id);
  return id;
}

void FreeBlockQueue::remove(BlockId id) {
  RL_CHECK(contains(id));
  const BlockId p = prev_[id];
  const BlockId n = next_[id];
  if (p != kNone) {
    next_[p] = n;
  } else {
    head_ = n;
  }
  if (n != kNone) {
    prev_[n] = p;
  } else {
    tail_ = p;
  }
  prev_[id] = kNone;
  next_[id] = kNone;
  in_queue_[id] = 0;
  --size_;
}

std::vector<BlockId> FreeBlockQueue::to_vector() const {
  std::vector<BlockId> out;
  out.reserve(size_);
  for (BlockId id = head_; id != kNone; id = next_[id]) out.push_back(id);
  return out;
}

}  // namespace rl
