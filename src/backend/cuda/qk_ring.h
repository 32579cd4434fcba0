// The slots of Q and the K tiles in the Hopper prefill's lab form QR (prefill_attention_sm90.cu; with one Q buffer
// and 3 K stages): slot 0 is the Q buffer, slots 1-3 the K stages, and any of them holds either. During a work item
// its Q holds one slot and its K tiles cycle through the other three (tile t in the cycle's t % 3). The next item's Q
// takes the slot after the last K tile's in that cycle (the oldest K tile's, freed once that tile's S = Q Kᵀ is done,
// a few tiles before the item ends), and its K tiles cycle through the other three, the oldest first (the slot of the
// item before's Q, which frees at that item's end, last). The producer and every consumer warp walk the same items
// through the same state, so they agree on each use's slot and barrier phase. Host-callable for its unit test
// (tests/unit/test_qk_ring.cpp).
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define RL_QK_RING_FN __host__ __device__ __forceinline__
#else
#define RL_QK_RING_FN inline
#endif

namespace rl::cuda {

struct QkRing {
  // One register (the consumers have none to spare): bits 0-1 the item's Q slot, 2-3 / 4-5 / 6-7 its K cycle, 8-11
  // the parity of each slot's uses so far (the item's Q counted, its K tiles not), 12 the parity of the item's Q use.
  // The first item: Q in slot 0, K tiles in 1, 2, 3.
  uint32_t s = (1u << 2) | (2u << 4) | (3u << 6) | (1u << 8);

  RL_QK_RING_FN int q() const { return static_cast<int>(s & 3u); }
  // The parity of the item's Q use of its slot (its full barrier's phase; the empty barrier's is the other).
  RL_QK_RING_FN uint32_t qpar() const { return (s >> 12) & 1u; }
  RL_QK_RING_FN int cycle(int i) const { return static_cast<int>((s >> (2 + 2 * i)) & 3u); }
  // K tile t's slot, and the parity of its use of it.
  RL_QK_RING_FN int slot(int t) const { return cycle(t % 3); }
  RL_QK_RING_FN uint32_t parity(int t) const {
    return ((s >> (8 + slot(t))) & 1u) ^ (static_cast<uint32_t>(t / 3) & 1u);
  }
  // Past an item of n K tiles: the next item's Q slot and cycle.
  RL_QK_RING_FN void next(int n) {
    uint32_t par = (s >> 8) & 15u;
    par ^= ((static_cast<uint32_t>((n + 2) / 3) & 1u) << cycle(0)) |
           ((static_cast<uint32_t>((n + 1) / 3) & 1u) << cycle(1)) | ((static_cast<uint32_t>(n / 3) & 1u) << cycle(2));
    const int i = n % 3;
    const uint32_t nq = static_cast<uint32_t>(cycle(i)), a = static_cast<uint32_t>(cycle((i + 1) % 3));
    const uint32_t b = static_cast<uint32_t>(cycle((i + 2) % 3));
    const uint32_t qp = (par >> nq) & 1u;
    par ^= 1u << nq;
    s = nq | (a << 2) | (b << 4) | (static_cast<uint32_t>(q()) << 6) | (par << 8) | (qp << 12);
  }
};

}  // namespace rl::cuda

#undef RL_QK_RING_FN
