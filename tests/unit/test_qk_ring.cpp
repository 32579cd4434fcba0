// The Hopper prefill's Q-in-the-K-ring bookkeeping (src/backend/cuda/qk_ring.h) against a model that counts every
// slot's uses: each use's slot and barrier parity, a K tile never in its item's Q slot (the producer would wait for
// a release that comes only at the item's end: a deadlock), and the next item's Q in the slot of the item's oldest
// K tile, its K tiles in the others oldest first.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <random>
#include <vector>

#include "backend/cuda/qk_ring.h"

namespace rl::cuda {
namespace {

// Walks items of the given K tile counts, checking the ring against per-slot use counts.
void walk(const std::vector<int>& tiles) {
  QkRing ring;
  std::array<int, 4> uses{};  // uses of each slot so far
  for (size_t k = 0; k < tiles.size(); ++k) {
    const int n = tiles[k], q = ring.q();
    ASSERT_GE(q, 0);
    ASSERT_LT(q, 4);
    // The item's Q use: its parity is that of the slot's earlier uses.
    EXPECT_EQ(ring.qpar(), static_cast<uint32_t>(uses[q] & 1)) << "item " << k;
    ++uses[q];
    std::array<bool, 4> in_cycle{};
    for (int i = 0; i < 3; ++i) in_cycle[ring.cycle(i)] = true;
    EXPECT_FALSE(in_cycle[q]) << "item " << k << ": its Q slot is in its K cycle";
    int cycle_slots = 0;
    for (bool b : in_cycle) cycle_slots += b;
    EXPECT_EQ(cycle_slots, 3) << "item " << k << ": the K cycle repeats a slot";
    std::vector<int> k_slots;
    for (int t = 0; t < n; ++t) {
      const int s = ring.slot(t);
      EXPECT_NE(s, q) << "item " << k << " tile " << t;
      EXPECT_EQ(ring.parity(t), static_cast<uint32_t>(uses[s] & 1)) << "item " << k << " tile " << t;
      if (t >= 3) {
        EXPECT_EQ(s, k_slots[t - 3]) << "item " << k << " tile " << t;
      }
      k_slots.push_back(s);
      ++uses[s];
    }
    ring.next(n);
    if (n >= 3) {
      EXPECT_EQ(ring.q(), k_slots[n - 3]) << "item " << k << ": the next Q is not in the oldest K tile's slot";
      // The next item's K tiles take the other slots oldest first.
      EXPECT_EQ(ring.cycle(0), k_slots[n - 2]) << "item " << k;
      EXPECT_EQ(ring.cycle(1), k_slots[n - 1]) << "item " << k;
    }
    // The next item's last-in-cycle slot is this item's Q slot (it frees last, at this item's end).
    EXPECT_EQ(ring.cycle(2), q) << "item " << k;
  }
}

TEST(QkRing, SlotsAndParitiesFollowEveryUse) {
  walk({1, 1, 1, 1, 1, 1, 1});
  walk({2, 2, 2, 2, 2});
  walk({3, 3, 3, 3});
  walk({4, 5, 6, 7, 8, 1, 2, 3});
  walk({256, 1, 255, 2, 254, 3});
}

TEST(QkRing, RandomItemLengths) {
  std::mt19937 rng(37);
  std::uniform_int_distribution<int> len(1, 12);
  for (int run = 0; run < 200; ++run) {
    std::vector<int> tiles(40);
    for (int& t : tiles) t = len(rng);
    walk(tiles);
    if (HasFatalFailure() || HasNonfatalFailure()) return;
  }
}

}  // namespace
}  // namespace rl::cuda
