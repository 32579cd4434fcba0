// The engine: owns the backend, the model, the KV cache, the scheduler and the sampler, and runs the step loop
// on its own thread (design.md §3). Other threads submit and abort through a queue; each request's tokens come
// back on its OutputChannel. The offline API generate() is built on the same loop.
//
// Invariants: only the engine thread touches the scheduler, the runner and the sampler; inbox_ is the only
// state shared with other threads (under mu_); a request's channel is closed exactly once, after all its
// choices finished.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "loader/model_config.h"
#include "model/model.h"
#include "runtime/kv_dtype.h"
#include "runtime/kv_storage.h"
#include "runtime/metrics.h"
#include "runtime/model_runner.h"
#include "runtime/output_channel.h"
#include "runtime/profiler.h"
#include "runtime/sampler.h"
#include "sched/scheduler.h"
#include "spec/adaptive.h"
#include "spec/proposer.h"
#include "spec/verify.h"
#include "tokenizer/tokenizer.h"

namespace rl {

class TpModel;

struct EngineConfig {
  std::string model_dir;
  std::string served_model_name;  // the metrics' model_name label (default: the folder's name)
  std::string device = "cpu";
  DType weight_dtype = DType::kBF16;
  bool dummy_weights = false;
  bool quantize_int8 = false;  // --quantization int8: 2-D weights as int8 with per-row scales (CPU only)
  // --kv-cache-dtype: auto (CPU: f32 with f32 weights, bf16 with bf16 or int8 weights; CUDA: bf16), f32 or bf16
  // (runtime/kv_dtype.h).
  KvCacheDtype kv_cache_dtype = KvCacheDtype::kAuto;
  int num_threads = 0;                  // CPU backend threads; 0 = all cores
  int32_t block_size = 16;
  int64_t num_kv_blocks = 0;            // 0: sized from memory
  int64_t kv_cache_memory_bytes = 0;    // 0: CPU min(2 GiB, free / 4); CUDA from gpu_memory_utilization
  double gpu_memory_utilization = 0.9;  // CUDA: fraction of device memory for weights + KV + workspace
  int32_t max_model_len = 0;            // 0: the model's context (capped by what the KV cache holds)
  int32_t max_num_seqs = 64;            // 0: sized from the KV cache (auto_max_num_seqs)
  int32_t max_num_batched_tokens = 2048;
  int32_t max_waiting = 1024;
  bool enable_prefix_caching = true;
  // Hybrid KV (a model mixing full and sliding-window layers, GPT-OSS): each kind of layer gets its own block
  // table per request, so the window layers hold only their window's blocks (loader/kv_groups.h). false: every
  // layer keeps every block (the reference the hybrid cache is tested against).
  bool hybrid_kv = true;
  bool load_tokenizer = true;           // load tokenizer.json when the folder has one
  bool enforce_eager = false;           // CUDA: never capture decode steps as CUDA graphs
  std::string profile_path;             // non-empty: write a Chrome-trace JSON of every step's spans there
  bool profile_kernels = false;         // with profile_path: every device kernel's span too (CUDA, CUPTI)
  // Who wakes a consumer blocked on its OutputChannel: "on", a ChannelWaker thread (the engine thread makes no
  // wake-up system call; the waker spins on a core while requests run); "off", the engine thread itself; "auto",
  // on with CUDA, where the host's cores do not run the model.
  std::string wake_thread = "auto";
  // Batch-invariant kernels (issue 13): a request's tokens do not depend on the rest of the batch.
  bool deterministic = false;
  // Speculative decoding (issue 18): "" (off), "ngram" (prompt lookup) or "draft" (draft_model_dir, a smaller
  // model with the same tokenizer, run on the same device with its own KV cache).
  std::string speculative;
  int32_t num_speculative_tokens = 4;  // k: drafts per decoding request and step
  int32_t ngram_min = 1, ngram_max = 4;
  std::string draft_model_dir;
  // Adaptive speculation (spec/adaptive.h): each step chooses k in 0..num_speculative_tokens per request from
  // measured step times and each request's acceptance; false: every decoding request proposes up to k drafts
  // every step. Off by default: on the H200 (2026-12-02, docs/benchmarks.md) it switched n-gram speculation off at
  // batch 1 where a fixed k gave 1.56-2.43x, and at batch 32 still ran 0.56-0.74x of plain decoding.
  bool speculative_adaptive = false;
  // A hard cap: above this many running requests no drafts are proposed; 0 = none (the cost model decides).
  int32_t speculative_max_running = 16;
  // Prompt logprobs: logits rows per step for prompt chunks that score every token (their chunks are capped to
  // it; each row costs vocab * 8 bytes of logits and sampler scratch). 0 turns prompt_logprobs off.
  int32_t max_prompt_logprob_rows = 64;
  // Tensor parallelism (docs/distributed.md): the model's weights and KV heads split over this many ranks, one
  // thread and backend each (CPU: the host group, each rank with num_threads / N threads; CUDA: devices 0..N-1
  // over NCCL). 1: the single-rank engine, no rank thread.
  int32_t tensor_parallel_size = 1;
};

struct Completion {
  std::vector<TokenId> token_ids;
  std::string text;  // empty when the model folder has no tokenizer
  FinishReason finish = FinishReason::kNone;
  std::string error;
  std::vector<TokenOutput> logprobs;  // per token, when requested
  std::vector<TokenOutput> prompt_logprobs;  // prompt positions 1.., when requested (choice 0 only)
};

// max_num_seqs for EngineConfig::max_num_seqs == 0: as many sequences as the KV cache holds at
// kAutoTokensPerSeq tokens each, a multiple of 8 in [8, kMaxAutoNumSeqs]. Beyond that, the cache, not the
// batch limit, bounds a step of average requests; the cap keeps CUDA-graph buckets and workspace bounded.
constexpr int32_t kAutoTokensPerSeq = 512;
constexpr int32_t kMaxAutoNumSeqs = 256;
int32_t auto_max_num_seqs(int64_t num_kv_tokens);

class Engine {
 public:
  static Result<std::unique_ptr<Engine>> create(const EngineConfig& config);
  ~Engine();
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;

  const ModelConfig& model_config() const { return model_->config(); }
  const GenerationConfig& generation_config() const { return generation_config_; }
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }  // null if the folder has none
  const Model& model() const { return *model_; }
  int32_t tensor_parallel_size() const { return config_.tensor_parallel_size; }
  // The ranks (null with one rank).
  const TpModel* tensor_parallel() const { return tp_; }
  Backend& backend() { return *backend_; }
  int32_t max_model_len() const { return sched_config_.max_model_len; }
  int64_t num_kv_blocks() const { return kv_->num_blocks(); }
  // Makes the KV blocks of num_seqs fresh sequences of tokens_per_seq tokens each resident (KvStorage::prefault;
  // the free queue hands out unused blocks in id order), before the first request only: it writes zeros. The
  // benchmarks call it, so that no page of the pool is first touched inside a measured step. Returns the bytes.
  size_t prefault_kv_cache(int64_t num_seqs, int64_t tokens_per_seq);
  DType kv_dtype() const { return kv_dtype_; }  // the KV cache's element type (select_kv_dtype)
  int32_t max_num_seqs() const { return sched_config_.max_num_seqs; }
  std::vector<TokenId> eos_token_ids() const;
  // Changes when anything that affects tokens changes (OpenAI's system_fingerprint): this build (a hash of the
  // executable), the backend and its device, the kernel family (deterministic or not), weight and KV dtypes,
  // the model's config and whether its weights are dummies. "fp_" + 12 hex digits.
  const std::string& system_fingerprint() const { return fingerprint_; }
  // The attention shapes of this model that the backend serves without a fast kernel, one line each
  // (Backend::attention_slow_path; also printed as a warning when the engine is created). Empty on the CPU.
  const std::vector<std::string>& attention_notes() const { return attention_notes_; }

  // Starts the engine loop thread (idempotent). submit() starts it on demand.
  void start();
  // Stops the loop; unfinished requests are aborted and their channels closed.
  void stop();
  bool alive() const { return running_.load(); }
  // Monotonic seconds of the last loop iteration (the loop ticks at least every 100 ms while alive).
  double last_heartbeat() const { return heartbeat_.load(); }

  // Thread-safe. The request's choices (params.n) stream on the returned channel. Admission errors come back as
  // a finishing message with finish == kError and add_error set. `id` must be unique among live requests.
  std::shared_ptr<OutputChannel> submit(const std::string& id, std::vector<TokenId> prompt, SamplingParams params);
  // Thread-safe. Finishes the request's choice `choice` (-1: every choice), freeing its KV within one step.
  // reason: kAbort (client went away) or kStop (a stop string matched on the consumer's side). n > 1 fans out
  // here only: consumers submit one request with n choices and stop choices one by one.
  void abort(const std::string& id, FinishReason reason = FinishReason::kAbort, int32_t choice = -1);

  // Offline batch API: runs every prompt to completion (stop strings applied when a tokenizer exists).
  std::vector<std::vector<Completion>> generate(const std::vector<std::vector<TokenId>>& prompts,
                                                const SamplingParams& params);

  // The f32 logits of the prompt's last position, computed directly (no scheduling, no sampling). Only on a
  // fresh engine whose loop has never run, so no cached KV block can be overwritten.
  Result<std::vector<float>> prompt_logits(const std::vector<TokenId>& prompt);

  // KV and scheduler integrity (every block accounted for). Only while no request is in flight.
  Status check_integrity() const;
  int64_t num_free_kv_blocks() const;

  // Seconds spent in steps so far (wall), the host's own work in them (schedule, stage, launch, applying
  // tokens: everything but waiting for the device), the part of it in the scheduler, and the time blocked
  // waiting for the device. With the pipeline, host work overlaps the device's previous step.
  struct StepTiming {
    int64_t num_steps = 0;
    double step_seconds = 0;
    double host_seconds = 0;
    double scheduler_seconds = 0;
    double wait_seconds = 0;
    int64_t max_running = 0;
  };
  StepTiming step_timing() const;
  // Kernels one all-decode step of num_seqs sequences launches (its CUDA graph's kernel nodes); 0 without a
  // captured graph. Read it once the engine is idle (after the requests that captured it have finished).
  int64_t decode_graph_kernels(int64_t num_seqs) const;

  // The engine's metrics (vLLM names), updated every step; render() is thread-safe.
  const MetricsRegistry& metrics() const { return registry_; }

  // Thread-safe snapshot of the scheduler's counters (refreshed every step).
  SchedulerStats stats() const;
  // The consumer wake-ups handed to the wake thread without / with a system call to wake it (both zero without
  // one: EngineConfig::wake_thread).
  std::pair<int64_t, int64_t> waker_posts() const {
    return waker_ ? std::make_pair(waker_->posts_while_spinning(), waker_->posts_while_sleeping())
                  : std::make_pair(int64_t{0}, int64_t{0});
  }
  // Thread-safe snapshot of the speculative-decoding counters (all zero when speculation is off).
  spec::SpecDecodeCounters spec_counters() const;
  bool speculative() const { return proposer_ != nullptr; }

 private:
  Engine() = default;
  struct Parent;  // a submitted request with n choices
  struct Inbox {
    std::vector<std::pair<std::shared_ptr<Parent>, std::vector<TokenId>>> submits;
    struct Abort {
      std::string id;
      FinishReason reason;
      int32_t choice;  // -1: all
    };
    std::vector<Abort> aborts;
  };

  void loop();
  void drain_inbox();
  void admit_choice(const std::shared_ptr<Parent>& p, int32_t index);
  void admit_siblings(const std::shared_ptr<Parent>& p);
  void reject(const std::shared_ptr<Parent>& p, AddError error, const std::string& message);
  // A launched step whose sampled ids the host has not applied yet.
  struct InFlight {
    SchedulerOutput out;
    std::vector<int32_t> sample_row;  // per scheduled row: its (first) row of sampled ids, or -1
    int32_t num_sample_rows = 0;
    int parity = 0;
    uint64_t fence = 0;
    int64_t step = 0;
    uint64_t marker_begin = 0, marker_end = 0;  // device markers around the step (profiling only)
    // Teacher-forced rows of prompt-logprob chunks: scheduled row i's rows [first_row, first_row + count) score
    // prompt positions first_pos, first_pos + 1, ...
    struct PromptRows {
      size_t scheduled = 0;
      int32_t first_row = 0, count = 0, first_pos = 0;
    };
    std::vector<PromptRows> prompt_rows;
  };
  void step();
  // Builds seq_steps_ and rows_ for a scheduled step (a row with drafts samples each of its 1 + k positions).
  void stage_rows(const SchedulerOutput& out, InFlight* f, std::unordered_map<uint64_t, int32_t>* next_pending);
  // The step with speculation on (engine_spec.cpp): schedule, propose drafts, launch, then apply at once (the
  // proposer needs the verified tokens before the next step, so these steps are not pipelined).
  void spec_step();
  // The pipelined step without drafts.
  void plain_step();
  // Adaptive speculation (engine_spec.cpp): chooses this step's drafts per running request (draft_plan_) and
  // returns whether the step speculates; observe_step_time() feeds the step-time model after the step;
  // observe_acceptance() updates each request's acceptance from a processed step (before resolve()).
  bool plan_step();
  void observe_step_time(bool speculative, double seconds);
  void observe_acceptance(const SchedulerOutput& out, const std::vector<int32_t>& sample_row,
                          const std::vector<TokenId>& sampled, const std::vector<std::vector<TokenId>>& accepted);
  InFlight launch_step(SchedulerOutput out, bool keep_pending, double* seconds);
  void process(InFlight f, double extra_host_seconds);
  void release_slot(const std::string& choice_id);
  void finish_choice(const std::string& choice_id, const Request& r, FinishReason reason,
                     const std::string& error = "");
  void fail_all(const std::string& why);
  void publish_stats();

  EngineConfig config_;
  GenerationConfig generation_config_;
  SchedulerConfig sched_config_;
  std::unique_ptr<Backend> backend_;
  std::unique_ptr<Model> model_;
  TpModel* tp_ = nullptr;  // model_ when it runs over several ranks
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<Sampler> sampler_;
  std::unique_ptr<Tokenizer> tokenizer_;
  std::unique_ptr<spec::Proposer> proposer_;  // null: speculation off
  spec::SpecDecodeCounters spec_counters_;    // under stats_mu_
  // Adaptive speculation state (engine thread). spec_state_: per running request (arrival_seq), its acceptance
  // and the last step it proposed; entries of requests no longer running are dropped at each plan.
  // draft_plan_: this step's drafts per request, read by the scheduler's draft limit. last_launch_: the shape of
  // the step just launched (all-decode steps feed step_times_ when the previous step ran in the same mode).
  struct SpecRequestState {
    spec::AcceptanceStats stats;
    int64_t last_draft_step = 0;
  };
  std::unordered_map<uint64_t, SpecRequestState> spec_state_;
  std::unordered_map<uint64_t, int32_t> draft_plan_;
  spec::StepTimeModel step_times_;
  struct LaunchShape {
    bool all_decode = false;
    int64_t batch = 0, rows = 0;
  };
  LaunchShape last_launch_;
  int prev_step_mode_ = -1;  // -1: none yet (or not all-decode), 0: plain, 1: speculative
  MetricsRegistry registry_;
  std::unique_ptr<EngineMetrics> engine_metrics_;

  // Engine-thread state: parents by id, and choice id → (parent, index).
  std::unordered_map<std::string, std::shared_ptr<Parent>> parents_;
  std::unordered_map<std::string, std::pair<std::shared_ptr<Parent>, int32_t>> choices_;
  std::vector<SeqStep> seq_steps_;
  uint64_t seed_salt_ = 0;
  std::vector<SamplerRow> rows_;
  std::optional<InFlight> inflight_;
  int parity_ = 0;
  // arrival_seq → row of the in-flight step's sampled ids holding that request's pending token.
  std::unordered_map<uint64_t, int32_t> pending_row_;
  std::unordered_map<std::string, int32_t> slot_of_;  // choice id → penalty slot
  std::vector<int32_t> free_slots_;
  StepProfiler profile_;
  std::string fingerprint_;
  std::vector<std::string> attention_notes_;
  DType kv_dtype_ = DType::kF32;
  int64_t step_index_ = 0;
  // Structured outputs (engine_constraints.cpp): each constrained row's allowed-token bitmask, filled on the host
  // from its grammar matcher and applied by the sampler on the device; the matcher advances when the row's token is
  // applied. h_mask_: u32 [sampling rows][ceil(vocab / 32)]. constrained_: live choice ids with a constraint.
  void fill_constraint_masks(const SchedulerOutput& out, const std::vector<int32_t>& sample_row);
  void advance_constraints(const SchedulerOutput& out, const std::vector<int32_t>& sample_row,
                           const std::vector<TokenId>& sampled);
  std::vector<uint32_t> h_mask_;
  std::unordered_set<std::string> constrained_;

  std::unique_ptr<ChannelWaker> waker_;  // null: the engine thread wakes consumers itself
  mutable std::mutex mu_;
  std::condition_variable cv_;
  Inbox inbox_;
  bool stop_requested_ = false;
  std::thread thread_;
  std::atomic<bool> running_{false};
  bool ever_started_ = false;
  std::atomic<double> heartbeat_{0.0};
  mutable std::mutex stats_mu_;
  SchedulerStats stats_;
  StepTiming timing_;
};

}  // namespace rl
