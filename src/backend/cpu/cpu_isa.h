// Runtime CPU dispatch: which instruction-set tier the fast kernels use. The tier is read from
// cpuid once per process; RIDGELINE_CPU_ISA (scalar, avx2, avx512, avx512_bf16, avx512_fp16) forces
// a lower tier, e.g. so that tests can run every path the machine supports. The binary itself is
// built for x86-64-v3 (AVX2, FMA, F16C); the AVX-512 kernels carry their own target attributes, so
// one binary runs at full speed on any x86-64-v3+ CPU.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace rl {

// Ordered: each tier implies the ones before it.
enum class CpuIsa : int {
  kScalar = 0,  // the readable reference loops (and OpenBLAS for f32 GEMM)
  kAvx2 = 1,    // AVX2 + FMA + F16C: f32 FMA, bf16 widened by shifts, int8 by vpmaddubsw/vpmaddwd
  kAvx512 = 2,  // AVX-512 F/BW/VL/DQ: the same at 512 bits
  kAvx512Bf16 = 3,  // + AVX512_BF16 (vdpbf16ps) and AVX512_VNNI (vpdpbusd)
  kAvx512Fp16 =
      4,  // + AVX512_FP16: f16 conversions of the f16 rows (vcvtph2psx); otherwise as kAvx512Bf16
};

std::string_view cpu_isa_name(CpuIsa isa);
bool parse_cpu_isa(std::string_view name, CpuIsa* out);
// The best tier this CPU supports (cpuid + OS-enabled state through __builtin_cpu_supports).
CpuIsa detect_cpu_isa();
// The tier the backend uses: detect_cpu_isa(), lowered by RIDGELINE_CPU_ISA when set. A forced tier
// above what the CPU supports is clamped to the detected one (with a warning on stderr, once).
CpuIsa selected_cpu_isa();
// Every tier from kScalar up to detect_cpu_isa().
std::vector<CpuIsa> supported_cpu_isas();
// One line for `inspect` / `--help`: "avx512_bf16 (detected avx512_fp16, forced by
// RIDGELINE_CPU_ISA)".
std::string cpu_isa_description();

}  // namespace rl
