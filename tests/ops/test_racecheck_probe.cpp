// The dense stack's weight-ring hand-off alone (launch_ring_handoff_probe, lab_probes.cu): a producer's bulk copies
// into a stage after the consumers' ordinary reads of it, handed back through an mbarrier. Session 13's racecheck
// reported write-after-read hazards on that pattern in the stack and could not tell a tool limit from a real race
// (docs/benchmarks.md). Here each form must deliver every tile intact (exact sums of small integers); under
// compute-sanitizer racecheck (scripts/device/attention_levers.sh SANITIZE=1, one test per run) the two forms
// separate the cases: hazards on the per-thread hand-off too would mean the tool does not follow mbarriers.
// Session 20: racecheck stops at a hardware exception inside the stack itself, whatever part of it the lab bits
// leave out; the last three tests add the stack's launch traits to the per-thread form one at a time (full shared
// memory, the PDL attribute, 8 KB of kernel parameters), so a run of each under racecheck names the one it fails on.
#include "ops_test_util.h"

namespace rl::ops_test {
namespace {

void check_ring_handoff(const cuda::RingProbeOptions& o) {
  const int rows = cuda::ring_handoff_probe_rows(), elems = cuda::ring_handoff_probe_row_elems(), tiles = 37;
  std::vector<float> w(static_cast<size_t>(tiles) * rows * elems);
  for (float& v : w) v = static_cast<float>(static_cast<int>(rng()() % 9) - 4);  // exact in bf16 and in any sum
  Owned dw = make_bf16(cuda(), w, {static_cast<int64_t>(tiles) * rows, elems});
  Owned out = make(cuda(), DType::kF32, {rows});
  poison(out.t);
  cuda::launch_ring_handoff_probe(static_cast<const uint16_t*>(dw.t.data), tiles, out.t.f32(), o, cuda().stream());
  std::vector<float> want(rows, 0.0f);
  for (int t = 0; t < tiles; ++t) {
    for (int r = 0; r < rows; ++r) {
      for (int e = 0; e < elems; ++e) want[r] += w[(static_cast<size_t>(t) * rows + r) * elems + e];
    }
  }
  EXPECT_EQ(read_f32(cuda(), out.t), want) << (o.every_thread ? "every thread arrives" : "lane 0 arrives")
                                            << (o.full_shared_memory ? ", full shared memory" : "")
                                            << (o.pdl ? ", PDL" : "") << (o.large_params ? ", 8 KB of parameters" : "");
}

cuda::RingProbeOptions options(bool every_thread, bool full_shared_memory = false, bool pdl = false,
                               bool large_params = false) {
  cuda::RingProbeOptions o;
  o.every_thread = every_thread;
  o.full_shared_memory = full_shared_memory;
  o.pdl = pdl;
  o.large_params = large_params;
  return o;
}

TEST(CudaRacecheckProbe, RingHandoffLaneZeroArrives) { check_ring_handoff(options(false)); }

TEST(CudaRacecheckProbe, RingHandoffEveryThreadArrives) { check_ring_handoff(options(true)); }

TEST(CudaRacecheckProbe, RingHandoffFullSharedMemory) { check_ring_handoff(options(true, true)); }

TEST(CudaRacecheckProbe, RingHandoffPdlLaunch) { check_ring_handoff(options(true, false, true)); }

TEST(CudaRacecheckProbe, RingHandoffLargeKernelParameters) { check_ring_handoff(options(true, false, false, true)); }

}  // namespace
}  // namespace rl::ops_test
