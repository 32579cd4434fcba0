// The batch-1 decode step's dense layers as one persistent kernel (decode_stack.cu): every Llama-style layer's
// RMSNorm, qkv projection, q/k norm + RoPE + KV write, attention, o_proj, RMSNorm, gate_up + SwiGLU and down_proj,
// layer after layer, with the weights streaming through a ring of shared-memory stages that never waits for the
// activations. Host-side view: the parameters (by value, ~7 KB), the support check and the launch.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace rl::cuda {

constexpr int kStackMaxLayers = 64;
// The stack serves decode steps of at most this many keys. Measured on the H200 (docs/benchmarks.md, session 12):
// it beats the layer kernels at 128-384 keys (Qwen3-0.6B, Llama-3.1-8B) and loses at 3,800 (its attention phase
// is one split per block, latency-bound past a few hundred keys per split). Session 42 (H100, the polled split merge,
// scripts/device/stack_context.sh, two rounds, tok/s, every step through the stack against the layer kernels past
// this bound; RIDGELINE_CUDA_STACK_MAX_CONTEXT moves it for such an A/B): after a 600-token prompt Qwen3-0.6B
// 1,028.5 / 1,027.2 against 1,019.2 / 1,017.0 but Llama-3.1-8B 178.3 / 178.1 against 180.6 / 180.7; after 1,000 tokens
// 971.4 / 971.5 against 995.0 / 996.7 and 175.5 / 175.5 against 180.3 / 180.3; after 2,000 and 3,800 the stack loses
// 5-16 %. Past ~512 keys a split's keys beyond its first batch load after the wait, one round trip a batch.
constexpr int64_t kStackMaxContext = 512;

// One layer's device pointers. Linear weights are bf16 [out, in] row-major; norm weights and biases are bf16 or
// f32 (StackParams::norm_f32 / bias_f32); null biases and q/k norms are absent.
struct StackLayer {
  const void* attn_norm = nullptr;
  const uint16_t* qkv = nullptr;  // [(H + 2 KVH) D, hidden]
  const void* qkv_bias = nullptr;
  const void* q_norm = nullptr;  // [D]
  const void* k_norm = nullptr;
  const uint16_t* o = nullptr;  // [hidden, H D]
  const void* o_bias = nullptr;
  const void* ffn_norm = nullptr;
  const uint16_t* gate_up = nullptr;  // [2 I, hidden]: gate rows, then up rows
  const uint16_t* down = nullptr;     // [hidden, I]
  uint16_t* k_cache = nullptr;        // bf16 [num_slots, KVH D], or FP8 e4m3 bytes (StackParams::kv_fp8), the same
  uint16_t* v_cache = nullptr;        // element offsets
  float attn_eps = 1e-6f, ffn_eps = 1e-6f;
};

struct StackParams {
  StackLayer layers[kStackMaxLayers];
  int num_layers = 0, hidden = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, inter = 0;
  bool norm_f32 = false, bias_f32 = false, qk_norm_f32 = false;
  bool kv_fp8 = false;  // the caches hold FP8 e4m3 codes (written rounded as kv_write_kernel<uint8_t> rounds them)
  float qk_eps = 1e-6f;
  float scale_log2 = 0;  // softmax scale · log2(e)
  const float* inv_freq = nullptr;  // [head_dim / 2]
  // The residual stream, bf16 [hidden]: in, the embedding; out, after the last layer. Between phases the
  // activations live in the scratch as tagged words (decode_stack.cu).
  uint16_t* residual = nullptr;
  void* scratch = nullptr;  // stack_scratch_bytes(): counters, the tagged activations and the tagged split-KV
                            // partials (zero at first use; every launch leaves its partials' words at zero)
  // The step's one sequence: position, KV slot, context length (position + 1) and block-table row.
  const int32_t* positions = nullptr;
  const int32_t* slots = nullptr;
  const int32_t* seq_lens = nullptr;
  const int32_t* block_table = nullptr;
  int64_t num_slots = 0;
  int block_size = 0;
  int max_blocks = 0;  // entries of the block-table row
  int max_splits = 0;  // set by launch_decode_stack
  int poll_backoff_ns = 0;  // set by launch_decode_stack (kStackPollBackoffNs, or the lab's)
  // Lab only (RIDGELINE_CUDA_STACK_LAB, read at backend creation; 0 in production): ablations that break the
  // results, to time the kernel's parts. Bits: kStackLab*.
  int lab = 0;
};

constexpr int kStackLabNoAttention = 1;   // the attention phase does nothing
constexpr int kStackLabNoGemvMath = 2;    // the GEMV phases wait for and release their tiles without the math
constexpr int kStackLabNoWait = 4;        // inputs read without waiting for their tags (other blocks' outputs)
constexpr int kStackLabNoPrologue = 8;    // no input vector loads (and no norms) at the start of a phase
constexpr int kStackLabBackoffShift = 8;  // bits 8-15, if not 0: the poll backoff's cap in 16 ns units
// Bits 16-23, if not 0: the grid's blocks (at least the KV heads, at most the SMs; one block per SM otherwise). For
// compute-sanitizer's racecheck, which does not keep a whole grid of this kernel resident (a block then waits for
// one that never runs, and traps after 20 s). The key splits follow the grid, so the bits do too.
constexpr int kStackLabGridShift = 16;
// Bit 24: one bulk copy per tile row always (the form before session 21), where a tile's rows lie back to back in
// memory (a phase of one chunk: k = 1024) and production copies each run of rows at once. Measured (H200, session
// 21, Qwen3-0.6B batch 1, 128 / 256, three alternating rounds): 1,198.7 / 1,196.6 / 1,196.2 tok/s with the runs
// against 1,186.9 / 1,182.6 / 1,184.1 per row; the weight stream alone (lab bits 1-8) 2,965.7 against 2,819.8.
// Llama-3.1-8B (k = 4096: four chunks a row) is unchanged.
constexpr int kStackLabRowCopies = 1 << 24;

// A block polling for another block's output sleeps between polls, 32 ns first, doubling up to this cap
// (decode_stack.cu, wait_words). Measured on the H200 (docs/benchmarks.md, session 14): polling back to back slowed
// Qwen3-0.6B by 2 % against the grid barriers it replaced; of the caps 128, 256, 512 and 1,024 ns, 256 was best
// for it and within 0.1 % of the best for Llama-3.1-8B.
constexpr int kStackPollBackoffNs = 256;

struct StackShape {
  int64_t num_layers = 0, hidden = 0, num_heads = 0, num_kv_heads = 0, head_dim = 0, inter = 0;
  bool kv_fp8 = false;  // over an FP8 e4m3 cache (head_dim 64 and 128)
};

// Whether the current device and this shape can run the kernel; if not, *why says what is missing.
bool stack_supported(const StackShape& s, std::string* why);
// Bytes of StackParams::scratch for this shape on the current device.
size_t stack_scratch_bytes(const StackShape& s);
void launch_decode_stack(StackParams p, cudaStream_t stream);

}  // namespace rl::cuda
