#include "cli/engine_options.h"

namespace rl::cli {

void add_kv_cache_dtype_option(CLI::App* cmd, std::string* kv_cache_dtype) {
  cmd->add_option("--kv-cache-dtype", *kv_cache_dtype,
                  "KV cache element type: auto (CPU: f32 with f32 weights, bf16 with bf16 or int8 weights; "
                  "CUDA: bf16), f32 (CPU only), bf16, or fp8 (e4m3: half a bf16 cache's bytes)")
      ->check(CLI::IsMember({"auto", "f32", "bf16", "fp8", "fp8_e4m3"}))
      ->capture_default_str();
}

void add_engine_options(CLI::App* cmd, EngineOptions* o) {
  add_model_dir_option(cmd, &o->model);
  cmd->add_option("--device", o->device, "Backend: cpu or cuda")->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Weight storage on the CPU: f32 or bf16 (CUDA always bf16)")
      ->check(CLI::IsMember({"f32", "bf16"}))->capture_default_str();
  cmd->add_option("--quantization", o->quantization,
                  "Weight quantisation: none, or int8 (per-row scales at load, VNNI kernels; CPU only)")
      ->check(CLI::IsMember({"none", "int8"}))->capture_default_str();
  add_kv_cache_dtype_option(cmd, &o->kv_cache_dtype);
  cmd->add_flag("--dummy-weights", o->dummy_weights,
                "Random weights at the config's shapes instead of safetensors (for benchmarks)");
  cmd->add_option("--threads", o->threads, "CPU threads (0 = all cores)")->capture_default_str();
  cmd->add_option("--max-model-len", o->max_model_len, "Context length limit (0 = the model's)")
      ->capture_default_str();
  cmd->add_option("--max-num-seqs", o->max_num_seqs, "Sequences per step (serve: 0 = sized from the KV cache)")->capture_default_str();
  cmd->add_option("--max-num-batched-tokens", o->max_num_batched_tokens, "Tokens per step (chunked prefill)")
      ->capture_default_str();
  cmd->add_option("--block-size", o->block_size, "KV cache block size in tokens")->capture_default_str();
  cmd->add_option("--kv-cache-gb", o->kv_cache_gb, "KV cache size in GiB (0: CPU min(2, free/4); CUDA from --gpu-memory-utilization)")
      ->capture_default_str();
  cmd->add_option("--gpu-memory-utilization", o->gpu_memory_utilization,
                  "CUDA: fraction of GPU memory for weights, KV cache and activations")->capture_default_str();
  cmd->add_flag("--no-prefix-caching", o->no_prefix_caching, "Disable the prefix cache");
  cmd->add_flag("--no-hybrid-kv", o->no_hybrid_kv,
                "Models mixing full and sliding-window layers: every layer keeps every KV block (one block table)");
  cmd->add_flag("--enforce-eager", o->enforce_eager, "CUDA: run decode steps eagerly (no CUDA graphs)");
  cmd->add_flag("--deterministic,!--no-deterministic", o->deterministic,
                "Batch-invariant kernels: a request's tokens do not depend on the rest of the batch");
  cmd->add_option("--profile", o->profile, "Write a Chrome-trace JSON of every step's host and device spans");
  cmd->add_flag("--profile-kernels", o->profile_kernels,
                "With --profile: every device kernel's span too, CUDA graphs included (CUDA, through CUPTI)");
  cmd->add_option("--wake-thread", o->wake_thread,
                  "Who wakes the threads waiting for tokens: on (a helper thread that spins on a core while requests "
                  "run, so the engine loop makes no wake-up system call), off (the engine loop), auto (on with CUDA)")
      ->check(CLI::IsMember({"auto", "on", "off"}))->capture_default_str();
  cmd->add_option("--tensor-parallel-size", o->tensor_parallel_size,
                  "Split the model over N ranks (CPU: threads; CUDA: GPUs 0..N-1 over NCCL); N divides the heads "
                  "and the intermediate size")
      ->capture_default_str();
  cmd->add_option("--speculative", o->speculative,
                  "Speculative decoding: ngram (prompt lookup) or draft (a smaller model, --draft-model)")
      ->check(CLI::IsMember({"ngram", "draft"}));
  cmd->add_option("--num-speculative-tokens", o->num_speculative_tokens, "Draft tokens per step and request (k)")
      ->capture_default_str();
  cmd->add_option("--draft-model", o->draft_model, "Draft model folder (same tokenizer as the model)");
  cmd->add_option("--ngram-min", o->ngram_min, "Shortest suffix the n-gram proposer matches")->capture_default_str();
  cmd->add_option("--ngram-max", o->ngram_max, "Longest suffix the n-gram proposer matches")->capture_default_str();
  cmd->add_option("--speculative-adaptive", o->speculative_adaptive,
                  "on: each step chooses 0..K drafts per request from measured step times and the request's "
                  "acceptance (experimental: measured slower than a fixed K on the H200); off: K drafts every step")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  cmd->add_option("--speculative-max-running", o->speculative_max_running,
                  "No drafts while more requests than this run (0 = no cap)")
      ->capture_default_str();
}

Result<std::unique_ptr<Engine>> make_engine(const EngineOptions& o) {
  EngineConfig c;
  c.model_dir = resolve_model_dir(o.model);
  c.device = o.device;
  if (!parse_dtype(o.dtype, &c.weight_dtype)) return Status::error("unknown --dtype " + o.dtype);
  c.dummy_weights = o.dummy_weights;
  c.quantize_int8 = o.quantization == "int8";
  if (!parse_kv_cache_dtype(o.kv_cache_dtype, &c.kv_cache_dtype)) {
    return Status::error("unknown --kv-cache-dtype " + o.kv_cache_dtype);
  }
  c.num_threads = o.threads;
  c.max_model_len = o.max_model_len;
  c.max_num_seqs = o.max_num_seqs;
  c.max_num_batched_tokens = o.max_num_batched_tokens;
  c.block_size = o.block_size;
  c.kv_cache_memory_bytes = static_cast<int64_t>(o.kv_cache_gb * (1ll << 30));
  c.gpu_memory_utilization = o.gpu_memory_utilization;
  c.enable_prefix_caching = !o.no_prefix_caching;
  c.hybrid_kv = !o.no_hybrid_kv;
  c.enforce_eager = o.enforce_eager;
  c.deterministic = o.deterministic;
  c.profile_path = o.profile;
  c.profile_kernels = o.profile_kernels;
  c.wake_thread = o.wake_thread;
  c.speculative = o.speculative;
  c.num_speculative_tokens = o.num_speculative_tokens;
  c.draft_model_dir = o.draft_model;
  c.ngram_min = o.ngram_min;
  c.ngram_max = o.ngram_max;
  c.speculative_adaptive = o.speculative_adaptive == "on";
  c.speculative_max_running = o.speculative_max_running;
  c.tensor_parallel_size = o.tensor_parallel_size;
  return Engine::create(c);
}

void add_sampling_options(CLI::App* cmd, SamplingOptions* s) {
  cmd->add_option("--max-tokens", s->max_tokens, "Tokens to generate at most")->capture_default_str();
  cmd->add_option("--min-tokens", s->min_tokens, "Tokens to generate before EOS/stop ids may end it");
  cmd->add_option("--temperature", s->temperature,
                  "Sampling temperature; 0 = greedy (default: generation_config.json, else 1)");
  cmd->add_option("--top-k", s->top_k, "Keep the k most likely tokens (0 = off)");
  cmd->add_option("--top-p", s->top_p, "Nucleus sampling: smallest set with this much probability (1 = off)");
  cmd->add_option("--min-p", s->min_p, "Drop tokens below min-p x the top probability (0 = off)");
  cmd->add_option("--repetition-penalty", s->repetition_penalty, "HF repetition penalty (1 = off)");
  cmd->add_option("--presence-penalty", s->presence_penalty, "OpenAI presence penalty");
  cmd->add_option("--frequency-penalty", s->frequency_penalty, "OpenAI frequency penalty");
  cmd->add_option("--seed", s->seed, "Random seed: the same seed gives the same tokens");
  cmd->add_flag("--ignore-eos", s->ignore_eos, "Keep generating past EOS until --max-tokens");
  cmd->add_option("--stop", s->stop, "Stop string (repeatable); not included in the output");
}

SamplingParams make_sampling_params(const SamplingOptions& s, const GenerationConfig& g) {
  SamplingParams p;
  p.temperature = s.temperature.value_or(static_cast<float>(g.temperature));
  p.top_k = s.top_k.value_or(static_cast<int32_t>(g.top_k));
  p.top_p = s.top_p.value_or(static_cast<float>(g.top_p));
  p.min_p = s.min_p.value_or(static_cast<float>(g.min_p));
  p.repetition_penalty = s.repetition_penalty.value_or(static_cast<float>(g.repetition_penalty));
  p.presence_penalty = s.presence_penalty;
  p.frequency_penalty = s.frequency_penalty;
  p.seed = s.seed;
  p.max_tokens = s.max_tokens;
  p.min_tokens = s.min_tokens;
  p.ignore_eos = s.ignore_eos;
  p.stop = s.stop;
  return p;
}

}  // namespace rl::cli
