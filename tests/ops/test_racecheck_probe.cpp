// The dense stack's weight-ring hand-off alone (launch_ring_handoff_probe, lab_probes.cu): a producer's bulk copies
// into a stage after the consumers' ordinary reads of it, handed back through an mbarrier. Session 13's racecheck
// reported write-after-read hazards on that pattern in the stack and could not tell a tool limit from a real race
// (docs/benchmarks.md). Here each form must deliver every tile intact (exact sums of small integers); under
// compute-sanitizer racecheck (scripts/device/attention_levers.sh SANITIZE=1, one test per run) the two forms
// separate the cases: hazards on the per-thread hand-off too would mean the tool does not follow mbarriers.
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

void check_ring_handoff(bool every_thread) {
  const int rows = cuda::ring_handoff_probe_rows(), elems = cuda::ring_handoff_probe_row_elems(), tiles = 37;
  std::vector<float> w(static_cast<size_t>(tiles) * rows * elems);
  for (float& v : w) v = static_cast<float>(static_cast<int>(rng()() % 9) - 4);  // exact in bf16 and in any sum
  Owned dw = make_bf16(cuda(), w, {static_cast<int64_t>(tiles) * rows, elems});
  Owned out = make(cuda(), DType::kF32, {rows});
  poison(out.t);
  cuda::launch_ring_handoff_probe(static_cast<const uint16_t*>(dw.t.data), tiles, out.t.f32(), every_thread,
                                  cuda().stream());
  std::vector<float> want(rows, 0.0f);
  for (int t = 0; t < tiles; ++t) {
    for (int r = 0; r < rows; ++r) {
      for (int e = 0; e < elems; ++e) want[r] += w[(static_cast<size_t>(t) * rows + r) * elems + e];
    }
  }
  EXPECT_EQ(read_f32(cuda(), out.t), want) << (every_thread ? "every thread arrives" : "lane 0 arrives");
}

TEST(CudaRacecheckProbe, RingHandoffLaneZeroArrives) { check_ring_handoff(false); }

TEST(CudaRacecheckProbe, RingHandoffEveryThreadArrives) { check_ring_handoff(true); }

}  // namespace
}  // namespace rl::ops_test
