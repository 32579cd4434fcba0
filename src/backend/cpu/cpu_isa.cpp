#include "backend/cpu/cpu_isa.h"

#include <cstdio>
#include <cstdlib>

namespace rl {

std::string_view cpu_isa_name(CpuIsa isa) {
  switch (isa) {
    case CpuIsa::kScalar:
      return "scalar";
    case CpuIsa::kAvx2:
      return "avx2";
    case CpuIsa::kAvx512:
      return "avx512";
    case CpuIsa::kAvx512Bf16:
      return "avx512_bf16";
    case CpuIsa::kAvx512Fp16:
      return "avx512_fp16";
  }
  return "?";
}

bool parse_cpu_isa(std::string_view name, CpuIsa* out) {
  for (int i = 0; i <= static_cast<int>(CpuIsa::kAvx512Fp16); ++i) {
    if (cpu_isa_name(static_cast<CpuIsa>(i)) == name) {
      *out = static_cast<CpuIsa>(i);
      return true;
    }
  }
  return false;
}

CpuIsa detect_cpu_isa() {
  __builtin_cpu_init();
  if (!(__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))) return CpuIsa::kScalar;
  if (!(__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq"))) {
    return CpuIsa::kAvx2;
  }
  if (!(__builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512vnni")))
    return CpuIsa::kAvx512;
  if (!__builtin_cpu_supports("avx512fp16")) return CpuIsa::kAvx512Bf16;
  return CpuIsa::kAvx512Fp16;
}

namespace {

struct Selection {
  CpuIsa isa;
  bool forced;
};

Selection select() {
  const CpuIsa detected = detect_cpu_isa();
  const char* env = std::getenv("RIDGELINE_CPU_ISA");
  if (!env || !*env) return {detected, false};
  CpuIsa want;
  if (!parse_cpu_isa(env, &want)) {
    std::fprintf(stderr,
                 "ridgeline: warning: RIDGELINE_CPU_ISA=%s is not one of scalar, avx2, avx512, "
                 "avx512_bf16, avx512_fp16; using %s\n",
                 env, std::string(cpu_isa_name(detected)).c_str());
    return {detected, false};
  }
  if (want > detected) {
    std::fprintf(
        stderr, "ridgeline: warning: RIDGELINE_CPU_ISA=%s is not supported by this CPU; using %s\n",
        env, std::string(cpu_isa_name(detected)).c_str());
    return {detected, false};
  }
  return {want, true};
}

const Selection& selection() {
  static const Selection s = select();
  return s;
}

}  // namespace

CpuIsa selected_cpu_isa() { return selection().isa; }

std::vector<CpuIsa> supported_cpu_isas() {
  std::vector<CpuIsa> out;
  for (int i = 0; i <= static_cast<int>(detect_cpu_isa()); ++i)
    out.push_back(static_cast<CpuIsa>(i));
  return out;
}

std::string cpu_isa_description() {
  std::string s(cpu_isa_name(selected_cpu_isa()));
  if (selection().forced) {
    s += " (forced by RIDGELINE_CPU_ISA; detected " + std::string(cpu_isa_name(detect_cpu_isa())) +
         ")";
  } else {
    s += " (detected from cpuid)";
  }
  return s;
}

}  // namespace rl
