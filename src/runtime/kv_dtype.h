// The KV cache's element type, decided here for every cache built from one configuration: the engine's (and so
// each tensor-parallel rank's, a draft model's and KV sizing's, which take it from the engine) and `perplexity`'s.
// CPU, `auto`: the cache follows the weights. f32 weights are the correctness reference (float32 matching
// transformers' float64 to 1e-6) and keep an f32 cache; bf16 or int8 weights, which already round every product,
// get a bf16 cache: half the bytes attention reads per token (llama.cpp's CPU default is an f16 cache). Every CPU
// kernel that touches the cache (kv_write, paged attention with and without a window, MLA) reads both.
// fp8 (e4m3, as vLLM's --kv-cache-dtype fp8 with no scales: each element rounded to nearest even, saturated at
// ±448, widened exactly when read) halves a bf16 cache again; it is asked for, never chosen by auto.
// CUDA: bf16 (auto), or fp8 when asked; asking for f32 there is an error at load. An fp8 cache on CUDA is read by
// the decode kernels and the FA2 prefill kernel (converted as loaded), the sliding-window and naive kernels; not by
// the Hopper prefill (the FA2 one serves), the batch-1 dense stack (the layer kernels serve), the batch-invariant
// kernels of deterministic mode, nor MLA's latent cache: check_kv_dtype refuses the last two at load.
#pragma once

#include <string_view>

#include "backend/backend.h"
#include "core/dtype.h"
#include "core/status.h"
#include "loader/model_config.h"

namespace rl {

// --kv-cache-dtype auto|f32|bf16|fp8.
enum class KvCacheDtype { kAuto, kF32, kBF16, kFP8 };

bool parse_kv_cache_dtype(std::string_view name, KvCacheDtype* out);
std::string_view kv_cache_dtype_name(KvCacheDtype d);

// weight_dtype: the storage dtype the model loads with (LoadOptions::weight_dtype, after any device override);
// quantize_int8: --quantization int8 (2-D weights int8 whatever weight_dtype says).
Result<DType> select_kv_dtype(DeviceKind device, DType weight_dtype, bool quantize_int8, KvCacheDtype requested);

// Whether a cache of `kv` (select_kv_dtype's answer) serves this model and mode on the device: an error naming what
// does not, else ok.
Status check_kv_dtype(DeviceKind device, DType kv, const ModelConfig& mc, bool deterministic);

}  // namespace rl
