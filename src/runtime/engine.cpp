#include "runtime/engine.h"

#include <xxhash.h>

#include <algorithm>
#include <cstdio>
#include <random>

#include "core/file.h"
#include "core/log.h"
#include "core/random.h"
#include "runtime/backend_factory.h"
#include "runtime/draft_proposer.h"
#include "runtime/kv_sizing.h"
#include "runtime/tp_model.h"
#include "runtime/text_stream.h"

namespace rl {

struct Engine::Parent {
  std::string id;
  double submit_time = 0.0;  // a request's clock starts here (TTFT includes queueing in the inbox)
  std::vector<TokenId> prompt;
  SamplingParams params;
  std::shared_ptr<OutputChannel> channel;
  int32_t num_admitted = 0;
  int32_t num_finished = 0;
  std::vector<bool> finished;
  // Siblings (choices 1..n-1) are admitted once choice 0 has computed the prompt, so they hit its cached blocks.
  bool siblings_pending = false;
};

namespace {

std::string choice_id(const std::string& parent, int32_t n, int32_t index) {
  return n == 1 ? parent : parent + "/" + std::to_string(index);
}

FinishReason reason_of(RequestStatus s) {
  switch (s) {
    case RequestStatus::kFinishedStopped: return FinishReason::kStop;
    case RequestStatus::kFinishedLength: return FinishReason::kLength;
    case RequestStatus::kFinishedAborted: return FinishReason::kAbort;
    case RequestStatus::kFinishedError: return FinishReason::kError;
    default: return FinishReason::kNone;
  }
}

// XXH3-64 of the file's bytes (0 if unreadable).
uint64_t hash_file(const char* path) {
  std::unique_ptr<FILE, int (*)(FILE*)> f(std::fopen(path, "rb"), &std::fclose);
  if (!f) return 0;
  XXH3_state_t* st = XXH3_createState();
  XXH3_64bits_reset(st);
  std::vector<char> buf(1 << 20);
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), f.get())) > 0) XXH3_64bits_update(st, buf.data(), n);
  const uint64_t h = XXH3_64bits_digest(st);
  XXH3_freeState(st);
  return h;
}

std::string make_fingerprint(const EngineConfig& c, Backend& be, DType weights, DType kv) {
  static const uint64_t build = hash_file("/proc/self/exe");
  std::string key = std::to_string(build) + "|" + be.name() + "|" + (be.deterministic() ? "det" : "fast") + "|" +
                    std::to_string(static_cast<int>(weights)) + "|" + std::to_string(static_cast<int>(kv)) + "|" +
                    (c.dummy_weights ? "dummy" : "weights") + "|";
  if (c.tensor_parallel_size != 1) key += "tp" + std::to_string(c.tensor_parallel_size) + "|";
  Result<std::string> cfg = read_file(path_join(c.model_dir, "config.json"));
  if (cfg.is_ok()) key += *cfg;
  char hex[17];
  std::snprintf(hex, sizeof hex, "%016llx", static_cast<unsigned long long>(XXH3_64bits(key.data(), key.size())));
  return "fp_" + std::string(hex, 12);
}

// What serves each full-attention layer shape of the model on this backend when no fast kernel does (the distinct
// Backend::attention_slow_path lines): named at load rather than found out at the first request. Latent (MLA)
// layers have their own kernels, and sliding-window layers the window kernel.
std::vector<std::string> attention_slow_paths(const ModelConfig& mc, const Backend& backend, int64_t block_size) {
  std::vector<std::string> notes;
  for (const KvLayerSpec& spec : mc.kv_spec) {
    if (spec.kind != KvKind::kFull) continue;
    std::string note = backend.attention_slow_path(QkvLayout{mc.num_attention_heads, spec.num_kv_heads, spec.head_dim},
                                                   block_size);
    if (!note.empty() && std::find(notes.begin(), notes.end(), note) == notes.end()) notes.push_back(std::move(note));
  }
  return notes;
}

}  // namespace

int32_t auto_max_num_seqs(int64_t num_kv_tokens) {
  const int64_t n = num_kv_tokens / kAutoTokensPerSeq / 8 * 8;
  return static_cast<int32_t>(std::clamp<int64_t>(n, 8, kMaxAutoNumSeqs));
}

Result<std::unique_ptr<Engine>> Engine::create(const EngineConfig& config) {
  std::unique_ptr<Engine> e(new Engine());
  e->config_ = config;
  RL_ASSIGN_OR_RETURN(ModelConfig mc, load_model_config(path_join(config.model_dir, "config.json")));
  RL_ASSIGN_OR_RETURN(e->generation_config_, load_generation_config(config.model_dir, mc));
  const int32_t tp_size = config.tensor_parallel_size;
  if (tp_size != 1) {
    // Checked before anything loads: the size divides the model, the architecture and options allow it.
    RL_RETURN_IF_ERROR(tp_plan_for(mc, tp_size, 0).status());
    if (config.quantize_int8) return Status::error("--tensor-parallel-size > 1 does not take --quantization int8 yet");
    if (config.speculative == "draft") {
      return Status::error("--tensor-parallel-size > 1 does not take a draft model yet (--speculative ngram does)");
    }
  }
  BackendOptions bo;
  bo.num_threads = config.num_threads;
  if (tp_size > 1) {  // CPU ranks share the cores
    const int cores = config.num_threads > 0 ? config.num_threads
                                             : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    bo.num_threads = std::max(1, cores / tp_size);
  }
  RL_ASSIGN_OR_RETURN(e->backend_, create_backend(config.device, bo));
  if (config.wake_thread != "auto" && config.wake_thread != "on" && config.wake_thread != "off") {
    return Status::error("wake_thread \"" + config.wake_thread + "\": expected auto, on or off");
  }
  if (config.wake_thread == "on" || (config.wake_thread == "auto" && e->backend_->device() == DeviceKind::kCuda)) {
    e->waker_ = std::make_unique<ChannelWaker>(kChannelWakerSpinSeconds);
  }
  e->backend_->set_deterministic(config.deterministic);
  if (config.profile_kernels) {
    if (config.profile_path.empty()) return Status::error("--profile-kernels needs --profile FILE (the trace it adds to)");
    RL_RETURN_IF_ERROR(e->backend_->start_kernel_trace());
  }
  LoadOptions lo;
  lo.weight_dtype = config.weight_dtype;
  lo.dummy_weights = config.dummy_weights;
  lo.quantize_int8 = config.quantize_int8;
  if (e->backend_->device() == DeviceKind::kCuda) lo.weight_dtype = DType::kBF16;
  // The KV cache's dtype (runtime/kv_dtype.h), before anything loads: one that the device cannot run fails here.
  RL_ASSIGN_OR_RETURN(const DType kv_dtype, select_kv_dtype(e->backend_->device(), lo.weight_dtype,
                                                            lo.quantize_int8, config.kv_cache_dtype));
  RL_RETURN_IF_ERROR(check_kv_dtype(e->backend_->device(), kv_dtype, mc, config.deterministic));
  e->kv_dtype_ = kv_dtype;
  if (tp_size > 1) {
    RL_ASSIGN_OR_RETURN(std::unique_ptr<TpModel> tp, TpModel::create(mc, config.model_dir, e->backend_.get(),
                                                                     config.device, bo, lo, tp_size));
    e->tp_ = tp.get();
    e->model_ = std::move(tp);
    mc.kv_spec = e->model_->kv_spec();  // each rank's cache holds its KV heads only
  } else {
    RL_ASSIGN_OR_RETURN(e->model_, build_model(mc, config.model_dir, e->backend_.get(), lo));
  }
  if (config.load_tokenizer && file_exists(path_join(config.model_dir, "tokenizer.json"))) {
    RL_ASSIGN_OR_RETURN(e->tokenizer_, Tokenizer::load(config.model_dir));
  }

  // Speculative decoding: the proposer's configuration, and a draft model loaded before the KV cache is sized so
  // that its weights and its KV (as many blocks as the target's) are accounted for.
  std::unique_ptr<Model> draft_model;
  if (!config.speculative.empty()) {
    if (config.num_speculative_tokens < 1 || config.num_speculative_tokens > 16) {
      return Status::error("--num-speculative-tokens must be in [1, 16], got " +
                           std::to_string(config.num_speculative_tokens));
    }
    if (config.speculative_max_running < 0) return Status::error("--speculative-max-running must be >= 0");
    if (config.speculative == "ngram") {
      spec::NgramConfig nc;
      nc.min_n = config.ngram_min;
      nc.max_n = config.ngram_max;
      nc.num_speculative_tokens = config.num_speculative_tokens;
      RL_RETURN_IF_ERROR(nc.validate());
      e->proposer_ = std::make_unique<spec::NgramProposer>(nc);
    } else if (config.speculative == "draft") {
      if (config.draft_model_dir.empty()) return Status::error("--speculative draft needs --draft-model DIR");
      RL_ASSIGN_OR_RETURN(ModelConfig dmc, load_model_config(path_join(config.draft_model_dir, "config.json")));
      RL_RETURN_IF_ERROR(check_draft_compatible(mc, config.model_dir, dmc, config.draft_model_dir));
      RL_RETURN_IF_ERROR(check_kv_dtype(e->backend_->device(), kv_dtype, dmc, config.deterministic));
      RL_ASSIGN_OR_RETURN(draft_model, build_model(dmc, config.draft_model_dir, e->backend_.get(), lo));
    } else {
      return Status::error("--speculative must be ngram or draft, got '" + config.speculative + "'");
    }
  }

  if (config.max_num_seqs < 0 || config.max_num_batched_tokens <= 0) {
    return Status::error("max_num_seqs must be >= 0 (0: sized from the KV cache) and max_num_batched_tokens > 0");
  }
  // The workspace and sampler estimates assume the largest automatic size when max_num_seqs is chosen below.
  const int32_t seqs_bound = config.max_num_seqs > 0 ? config.max_num_seqs : kMaxAutoNumSeqs;
  KvSizingInput ki;
  ki.block_size = config.block_size;
  ki.num_kv_blocks = config.num_kv_blocks;
  ki.kv_cache_memory_bytes = config.kv_cache_memory_bytes;
  ki.gpu_memory_utilization = config.gpu_memory_utilization;
  ki.num_host_ranks = tp_size;  // the CPU ranks share the budget; CUDA ranks ignore it
  const int32_t spec_k = config.speculative.empty() ? 0 : config.num_speculative_tokens;
  if (config.max_prompt_logprob_rows < 0) {
    return Status::error("max_prompt_logprob_rows must be >= 0, got " + std::to_string(config.max_prompt_logprob_rows));
  }
  // A step never has more rows than tokens.
  const int32_t prompt_rows = std::min(config.max_prompt_logprob_rows, config.max_num_batched_tokens);
  ki.workspace_bytes = static_cast<int64_t>(
      e->model_->workspace_bytes(config.max_num_batched_tokens, seqs_bound * (1 + spec_k) + prompt_rows));
  ki.sampler_bytes = sampler_device_bytes(seqs_bound * (1 + spec_k) + prompt_rows, mc.vocab_size);
  if (draft_model) {
    ki.workspace_bytes +=
        static_cast<int64_t>(draft_model->workspace_bytes(config.max_num_batched_tokens, seqs_bound)) +
        sampler_device_bytes(seqs_bound, mc.vocab_size);
    ki.extra_block_bytes = KvStorage::bytes_per_block(draft_model->config(), config.block_size, kv_dtype);
  }
  const KvGroupPlan plan = plan_kv_groups(mc.kv_spec, config.hybrid_kv, kMaxKvGroups);
  RL_ASSIGN_OR_RETURN(KvSizing sizing, size_kv_cache(ki, mc, *e->backend_, kv_dtype, &plan));
  const int64_t bs = config.block_size, num_blocks = sizing.num_blocks;
  e->kv_ = std::make_unique<KvStorage>(e->backend_.get(), mc, num_blocks, bs, kv_dtype, &plan);
  if (e->tp_) e->tp_->allocate_kv(num_blocks, bs, kv_dtype, plan);  // the same block ids on every rank
  e->fingerprint_ = make_fingerprint(config, *e->backend_, lo.weight_dtype, kv_dtype);
  e->attention_notes_ = attention_slow_paths(mc, *e->backend_, bs);
  for (const std::string& note : e->attention_notes_) log_warn("attention: " + note);

  int64_t max_len = config.max_model_len > 0 ? config.max_model_len : mc.max_context_len();
  if (max_len > mc.max_context_len()) {
    return Status::error("max_model_len " + std::to_string(max_len) + " exceeds the model's context " +
                         std::to_string(mc.max_context_len()));
  }
  const int64_t kv_tokens = (num_blocks - 1) * bs;
  if (draft_model && max_len > draft_model->config().max_context_len()) {
    log_warn("max_model_len lowered from " + std::to_string(max_len) + " to the draft model's context " +
             std::to_string(draft_model->config().max_context_len()));
    max_len = draft_model->config().max_context_len();
  }
  int32_t sched_window = 0;
  std::vector<int32_t> window_groups;
  if (plan.num_groups() > 1) {
    // Hybrid KV: group 0 (full layers) bounds a sequence by the blocks left once every window group holds its
    // largest share (KvCacheManager::max_blocks_held).
    int64_t window_blocks = 0;
    for (int32_t g = 1; g < plan.num_groups(); ++g) {
      const int64_t w = plan.windows[static_cast<size_t>(g)];
      if (w > INT32_MAX) return Status::error("sliding window " + std::to_string(w) + " is out of range");
      window_groups.push_back(static_cast<int32_t>(w));
      window_blocks += std::min((max_len + bs - 1) / bs, (w - 1 + config.max_num_batched_tokens + bs - 1) / bs + 1);
    }
    const int64_t full_tokens = (num_blocks - 1 - window_blocks) * bs;
    if (full_tokens < bs) {
      return Status::error("not enough KV blocks: " + std::to_string(num_blocks - 1) + " usable, the window layers (" +
                           plan.describe() + ") alone need " + std::to_string(window_blocks) + " per sequence");
    }
    if (max_len > full_tokens) {
      log_warn("max_model_len lowered from " + std::to_string(max_len) + " to " + std::to_string(full_tokens) +
               " tokens: the KV cache holds no more (KV groups " + plan.describe() + ")");
      max_len = full_tokens;
    }
  } else {
    // Every layer a sliding window: a sequence holds only the blocks of its widest window (the KV manager
    // releases the rest), so its length is not bounded by the cache. Not with a draft model: it shares the
    // block tables and reads every position.
    const int64_t window = plan.windows[0];
    const int64_t window_tokens = ((window - 1 + config.max_num_batched_tokens + bs - 1) / bs + 1) * bs;
    if (window > 0 && !draft_model && window_tokens <= kv_tokens && window <= INT32_MAX) {
      sched_window = static_cast<int32_t>(window);
    } else if (max_len > kv_tokens) {
      log_warn("max_model_len lowered from " + std::to_string(max_len) + " to " + std::to_string(kv_tokens) +
               " tokens: the KV cache holds no more");
      max_len = kv_tokens;
    }
  }
  const int32_t max_num_seqs = config.max_num_seqs > 0 ? config.max_num_seqs : auto_max_num_seqs(kv_tokens);
  e->config_.max_num_seqs = max_num_seqs;
  SchedulerConfig sc;
  sc.max_num_batched_tokens = config.max_num_batched_tokens;
  sc.max_num_seqs = max_num_seqs;
  sc.max_model_len = static_cast<int32_t>(max_len);
  sc.max_waiting = config.max_waiting;
  sc.kv.num_blocks = static_cast<int32_t>(num_blocks);
  sc.kv.block_size = static_cast<int32_t>(bs);
  sc.kv.enable_prefix_caching = config.enable_prefix_caching;
  sc.kv.sliding_window = sched_window;
  sc.kv.window_groups = window_groups;
  const int32_t k = spec_k;
  sc.num_speculative_tokens = k;
  sc.speculative_max_running = config.speculative_max_running;
  sc.max_prompt_logprob_rows = prompt_rows;
  RL_RETURN_IF_ERROR(sc.validate());
  e->sched_config_ = sc;
  e->scheduler_ = std::make_unique<Scheduler>(sc);
  if (config.speculative_adaptive && k > 0) {
    // Each step's drafts per request come from the engine's plan (plan_step, made before schedule()).
    Engine* self = e.get();
    e->scheduler_->set_draft_limit([self](const Request& r) {
      auto it = self->draft_plan_.find(r.arrival_seq);
      return it == self->draft_plan_.end() ? 0 : it->second;
    });
  }

  RunnerLimits lim;
  lim.max_num_tokens = config.max_num_batched_tokens;
  lim.max_num_seqs = max_num_seqs;
  lim.max_model_len = max_len;
  lim.enforce_eager = config.enforce_eager || tp_size > 1;  // a decode graph would span the ranks' streams
  // Speculative rows sample each of their 1 + k positions.
  const int64_t max_rows = k > 0 ? std::min<int64_t>(int64_t{max_num_seqs} * (1 + k),
                                                     int64_t{max_num_seqs} + config.max_num_batched_tokens)
                                 : max_num_seqs;
  lim.max_num_logits = max_rows + prompt_rows;  // prompt-logprob chunks add a row per token
  lim.max_num_seqs = max_rows;  // a speculative request runs as 1 + k decode rows
  e->runner_ = std::make_unique<ModelRunner>(e->model_.get(), e->kv_.get(), lim);
  e->sampler_ =
      std::make_unique<Sampler>(e->backend_.get(), max_rows + prompt_rows, mc.vocab_size, max_num_seqs);
  if (draft_model) {
    RunnerLimits dl = lim;
    dl.max_num_logits = 0;
    e->proposer_ = std::make_unique<DraftModelProposer>(std::move(draft_model), num_blocks, bs, kv_dtype, dl,
                                                        config.num_speculative_tokens);
  }
  for (int32_t i = max_num_seqs - 1; i >= 0; --i) e->free_slots_.push_back(i);
  e->seed_salt_ = std::random_device{}() * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(now_seconds() * 1e9);
  std::string name = config.served_model_name;
  if (name.empty()) {
    std::string dir = config.model_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    name = dir.substr(dir.find_last_of('/') + 1);
  }
  e->engine_metrics_ = std::make_unique<EngineMetrics>(e->registry_, name);
  if (!config.profile_path.empty()) e->profile_.open(config.profile_path);
  // The KV configuration as vLLM's info gauge (value 1, facts in labels): the Gateway API Inference Extension's
  // endpoint picker reads block_size and num_gpu_blocks from it (docs/deploy.md).
  e->registry_
      .gauge("vllm:cache_config_info", "Information of the KV cache configuration.",
             {{"block_size", std::to_string(sc.kv.block_size)},
              {"num_gpu_blocks", std::to_string(sc.kv.num_blocks)},
              {"enable_prefix_caching", "True"},
              {"cache_dtype", "auto"}})
      .set(1);
  e->engine_metrics_->update(e->scheduler_->stats());
  return e;
}

Engine::~Engine() { stop(); }

std::vector<TokenId> Engine::eos_token_ids() const {
  std::vector<TokenId> ids;
  for (int64_t id : generation_config_.eos_token_ids) ids.push_back(static_cast<TokenId>(id));
  return ids;
}

void Engine::start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable()) return;
  stop_requested_ = false;
  running_ = true;
  ever_started_ = true;
  heartbeat_ = now_seconds();
  thread_ = std::thread([this] { loop(); });
}

void Engine::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!thread_.joinable()) return;
    stop_requested_ = true;
  }
  cv_.notify_all();
  thread_.join();
  std::lock_guard<std::mutex> lock(mu_);
  thread_ = std::thread();
}

std::shared_ptr<OutputChannel> Engine::submit(const std::string& id, std::vector<TokenId> prompt,
                                              SamplingParams params) {
  auto p = std::make_shared<Parent>();
  p->id = id;
  p->submit_time = now_seconds();
  p->params = std::move(params);
  if (p->params.n < 1) p->params.n = 1;
  p->channel = std::make_shared<OutputChannel>(p->params.n);
  p->channel->set_waker(waker_.get());
  p->finished.assign(static_cast<size_t>(p->params.n), false);
  auto ch = p->channel;
  start();
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.submits.emplace_back(std::move(p), std::move(prompt));
  }
  cv_.notify_all();
  return ch;
}

void Engine::abort(const std::string& id, FinishReason reason, int32_t choice) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.aborts.push_back(Inbox::Abort{id, reason, choice});
  }
  cv_.notify_all();
}

Status Engine::check_integrity() const {
  if (scheduler_->has_unfinished()) return Status::error("requests are in flight");
  return scheduler_->check_integrity();
}

int64_t Engine::num_free_kv_blocks() const { return scheduler_->kv().num_free_blocks(); }

spec::SpecDecodeCounters Engine::spec_counters() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return spec_counters_;
}

SchedulerStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_requested_) break;
      if (!scheduler_->has_unfinished() && !inflight_ && inbox_.submits.empty() && inbox_.aborts.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(100));
        heartbeat_ = now_seconds();
        continue;
      }
    }
    drain_inbox();
    if (scheduler_->has_unfinished() || inflight_) {
      try {
        step();
      } catch (const std::exception& ex) {
        inflight_.reset();
        fail_all(std::string("engine step failed: ") + ex.what());
      }
    }
    heartbeat_ = now_seconds();
  }
  if (inflight_) {
    backend_->wait_fence(inflight_->fence);
    inflight_.reset();
  }
  fail_all("engine stopped");
  for (Backend::KernelSpan& k : backend_->take_kernel_spans()) profile_.kernel_span(k.name, k.start, k.seconds);
  if (Status st = profile_.write(); !st.is_ok()) log_warn(st.message());
  running_ = false;
}

void Engine::drain_inbox() {
  Inbox in;
  {
    std::lock_guard<std::mutex> lock(mu_);
    std::swap(in, inbox_);
  }
  for (auto& [parent, prompt] : in.submits) {
    if (parents_.count(parent->id)) {
      RequestOutput out;
      out.finish = FinishReason::kError;
      out.add_error = AddError::kRejected;
      out.error = "request id \"" + parent->id + "\" is already in use";
      for (int32_t i = 0; i < parent->params.n; ++i) {
        out.index = i;
        parent->channel->push(out);
      }
      parent->channel->close();
      continue;
    }
    parent->prompt = std::move(prompt);
    parents_[parent->id] = parent;
    // Token ids and vocabulary-dependent parameters are checked here, where the vocabulary is known.
    const int64_t vocab = model_->config().vocab_size;
    Status bad;
    for (size_t i = 0; i < parent->prompt.size() && bad.is_ok(); ++i) {
      TokenId t = parent->prompt[i];
      if (t < 0 || t >= vocab) {
        bad = Status::error("prompt token " + std::to_string(i) + " has id " + std::to_string(t) +
                            ", outside the vocabulary [0, " + std::to_string(vocab) + ")");
      }
    }
    if (bad.is_ok()) bad = parent->params.validate(static_cast<int32_t>(vocab));
    if (!bad.is_ok()) {
      reject(parent, AddError::kRejected, bad.message());
      continue;
    }
    admit_choice(parent, 0);
    if (parents_.count(parent->id) && parent->params.n > 1) {
      if (config_.enable_prefix_caching) {
        parent->siblings_pending = true;
      } else {
        for (int32_t i = 1; i < parent->params.n; ++i) admit_choice(parent, i);
      }
    }
  }
  for (auto& [id, reason, only] : in.aborts) {
    auto it = parents_.find(id);
    if (it == parents_.end()) continue;
    std::shared_ptr<Parent> p = it->second;
    RequestStatus status = reason == FinishReason::kStop ? RequestStatus::kFinishedStopped
                                                         : RequestStatus::kFinishedAborted;
    const int32_t n = p->params.n;
    for (int32_t i = 0; i < n && parents_.count(id); ++i) {
      if (p->finished[static_cast<size_t>(i)] || (only >= 0 && i != only)) continue;
      std::string cid = choice_id(id, n, i);
      if (i < p->num_admitted) {
        std::unique_ptr<Request> r = scheduler_->finish_request(cid, status);
        if (r) {
          engine_metrics_->observe_finished(*r);
          finish_choice(cid, *r, reason);
        }
      } else {
        Request dummy;
        dummy.num_prompt_tokens = static_cast<int32_t>(p->prompt.size());
        choices_[cid] = {p, i};
        finish_choice(cid, dummy, reason);
      }
    }
  }
  if (!in.aborts.empty()) publish_stats();
}

void Engine::admit_choice(const std::shared_ptr<Parent>& p, int32_t index) {
  const int32_t n = p->params.n;
  SamplingParams params = p->params;
  params.n = 1;
  if (params.seed && index > 0) params.seed = *params.seed + static_cast<uint64_t>(index);
  if (index > 0) params.prompt_logprobs.reset();  // the prompt's logprobs come once, with choice 0
  std::string cid = choice_id(p->id, n, index);
  Request r(cid, p->prompt, params, eos_token_ids());
  r.arrival_time = p->submit_time;
  // Penalties and grammars carry state from one position to the next, which a row sampling k + 1 positions at
  // once would not see: such requests decode without drafts.
  r.speculate = proposer_ != nullptr && !needs_penalty_slot(params) && !params.constraint;
  AddResult res = scheduler_->add_request(std::move(r));
  p->num_admitted = std::max(p->num_admitted, index + 1);
  choices_[cid] = {p, index};
  if (!res.ok()) return reject(p, res.error, res.status.message());
  if (params.constraint) constrained_.insert(cid);
}

void Engine::admit_siblings(const std::shared_ptr<Parent>& p) {
  for (int32_t i = 1; i < p->params.n && parents_.count(p->id); ++i) {
    if (!p->finished[static_cast<size_t>(i)]) admit_choice(p, i);  // a choice stopped early stays finished
  }
}

void Engine::reject(const std::shared_ptr<Parent>& p, AddError error, const std::string& message) {
  // Every choice would fail the same way: fail them all.
  const int32_t n = p->params.n;
  for (int32_t i = 0; i < n; ++i) {
    if (p->finished[static_cast<size_t>(i)]) continue;
    choices_.erase(choice_id(p->id, n, i));
    RequestOutput out;
    out.index = i;
    out.finish = FinishReason::kError;
    out.add_error = error;
    out.error = message;
    out.num_prompt_tokens = static_cast<int32_t>(p->prompt.size());
    p->finished[static_cast<size_t>(i)] = true;
    p->num_finished++;
    p->channel->push(std::move(out));
  }
  p->num_admitted = n;
  p->siblings_pending = false;
  p->channel->close();
  parents_.erase(p->id);
}

void Engine::finish_choice(const std::string& cid, const Request& r, FinishReason reason,
                           const std::string& error) {
  auto it = choices_.find(cid);
  if (it == choices_.end()) return;
  release_slot(cid);
  constrained_.erase(cid);
  if (proposer_ && r.arrival_seq != 0) proposer_->forget(r.arrival_seq);
  std::shared_ptr<Parent> p = it->second.first;
  const int32_t index = it->second.second;
  choices_.erase(it);
  RequestOutput out;
  out.index = index;
  out.finish = reason;
  out.error = error;
  out.stop_token = r.stop_token;
  out.num_prompt_tokens = r.num_prompt_tokens;
  out.num_cached_tokens = r.num_cached_prompt_tokens;
  out.num_output_tokens = r.num_output_tokens();
  out.arrival_time = r.arrival_time;
  out.first_token_time = r.first_token_time.value_or(0.0);
  out.finish_time = r.finished_time.value_or(now_seconds());
  p->finished[static_cast<size_t>(index)] = true;
  p->num_finished++;
  p->channel->push(std::move(out));
  if (index == 0 && p->siblings_pending) {
    p->siblings_pending = false;
    admit_siblings(p);
  }
  if (p->num_finished == p->params.n) {
    p->channel->close();
    parents_.erase(p->id);
  }
}

int64_t Engine::decode_graph_kernels(int64_t num_seqs) const {
  return runner_ ? runner_->decode_graph_kernels(num_seqs) : 0;
}

size_t Engine::prefault_kv_cache(int64_t num_seqs, int64_t tokens_per_seq) {
  RL_CHECK_MSG(step_index_ == 0, "prefault_kv_cache: only before the first step");
  const int64_t bs = kv_->block_size();
  return kv_->prefault(1 + num_seqs * ((tokens_per_seq + bs - 1) / bs));  // block 0 is never handed out
}

Engine::StepTiming Engine::step_timing() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return timing_;
}

void Engine::release_slot(const std::string& cid) {
  auto it = slot_of_.find(cid);
  if (it == slot_of_.end()) return;
  free_slots_.push_back(it->second);
  slot_of_.erase(it);
}

void Engine::stage_rows(const SchedulerOutput& out, InFlight* f,
                        std::unordered_map<uint64_t, int32_t>* next_pending) {
  seq_steps_.clear();
  rows_.clear();
  f->sample_row.assign(out.scheduled.size(), -1);
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    const Request& r = *s.request;
    SeqStep st;
    st.token_ids = s.token_ids.data();
    st.num_new_tokens = s.num_scheduled_tokens;
    st.num_computed = s.num_computed_tokens;
    st.block_table = s.block_table.data();
    st.num_blocks = static_cast<int64_t>(s.block_table.size());
    for (size_t g = 0; g < s.window_tables.size(); ++g) st.window_tables[g] = s.window_tables[g].data();
    st.want_logits = s.samples;
    if (r.num_pending > 0) {
      auto pit = pending_row_.find(s.arrival_seq);
      RL_CHECK_MSG(pit != pending_row_.end(), "request '%s' has a pending token from no in-flight row",
                   r.id.c_str());
      st.pending_source = pit->second;
    }
    // Prompt logprobs: a logits row per token of the chunk; every row but a sampling last one is teacher-forced
    // with the prompt's next token (the scheduler capped the chunk to the step's rows).
    if (Scheduler::needs_prompt_rows(r) && s.num_draft_tokens == 0) {
      st.all_logits = true;
      const int32_t forced = s.num_scheduled_tokens - (s.samples ? 1 : 0);
      f->prompt_rows.push_back({i, static_cast<int32_t>(rows_.size()), forced, s.num_computed_tokens + 1});
      for (int32_t j = 0; j < forced; ++j) {
        SamplerRow row;
        row.params = &r.params;
        const TokenId next = r.token_ids[static_cast<size_t>(s.num_computed_tokens + j + 1)];
        row.forced_token = next >= 0 ? next : 0;
        row.forced_num_logprobs = *r.params.prompt_logprobs;
        rows_.push_back(row);
      }
    }
    if (s.num_draft_tokens == 0) {
      seq_steps_.push_back(st);
    } else {
      // Verification of 1 + k tokens as 1 + k single-token decode rows over the same block table: row j feeds
      // position num_computed + j and attends to keys 0..num_computed + j, whose KV (the earlier drafts
      // included) every row writes before any attention of the layer reads it. Each row is exactly the decode
      // step plain decoding would run at that position, and the step stays all-decode, so the runner replays
      // the CUDA graph of its bucket.
      for (int32_t j = 0; j <= s.num_draft_tokens; ++j) {
        SeqStep v = st;
        v.token_ids = s.token_ids.data() + j;
        v.num_new_tokens = 1;
        v.num_computed = s.num_computed_tokens + j;
        seq_steps_.push_back(v);
      }
    }
    if (s.samples) {
      SamplerRow row;
      row.params = &r.params;
      row.prompt_token_ids = r.prompt_token_ids();
      row.output_token_ids = std::span<const TokenId>(r.token_ids)
                                 .subspan(static_cast<size_t>(r.num_prompt_tokens),
                                          static_cast<size_t>(r.num_known_tokens() - r.num_prompt_tokens));
      row.num_outputs = r.num_output_tokens();
      row.eos_token_ids = r.eos_token_ids;
      // Unseeded requests get a stable per-request stream from the engine's random salt.
      row.seed = r.params.seed ? *r.params.seed : mix64(seed_salt_ ^ std::hash<std::string>{}(r.id));
      if (needs_penalty_slot(r.params)) {
        auto sit = slot_of_.find(r.id);
        if (sit == slot_of_.end()) {
          RL_CHECK(!free_slots_.empty());
          sit = slot_of_.emplace(r.id, free_slots_.back()).first;
          free_slots_.pop_back();
          row.init_slot = true;
        }
        row.penalty_slot = sit->second;
      }
      f->sample_row[i] = static_cast<int32_t>(rows_.size());
      (*next_pending)[s.arrival_seq] = static_cast<int32_t>(rows_.size());
      rows_.push_back(row);
      // Position j of a speculative row samples output number num_outputs + j, with that position's RNG counter
      // and min_tokens suppression (such rows have no penalties and no constraint: Request::speculate).
      for (int32_t j = 1; j <= s.num_draft_tokens; ++j) {
        row.num_outputs = r.num_output_tokens() + j;
        rows_.push_back(row);
      }
    }
  }
  f->num_sample_rows = static_cast<int32_t>(rows_.size());
}

// The step pipeline (design.md §8): schedule step n+1 and launch it while the device still runs step n, whose
// sampled ids stay on the device as the pending inputs of step n+1; then wait for step n and apply its tokens.
// The host learns a token one step after it was sampled; nothing inside a step waits on the host.
void Engine::step() {
  const double t0 = now_seconds();
  struct WallClock {  // every exit adds the step's wall time
    Engine* e;
    double t0;
    ~WallClock() {
      std::lock_guard<std::mutex> lock(e->stats_mu_);
      e->timing_.step_seconds += now_seconds() - t0;
    }
  } wall{this, t0};
  // Speculative steps are applied at once; above the speculation limit, or where the adaptive plan proposes
  // nothing, the pipelined step runs as without speculation.
  const bool speculate =
      proposer_ && scheduler_->speculating() && (!config_.speculative_adaptive || plan_step());
  last_launch_ = {};
  if (speculate) {
    spec_step();
  } else {
    plain_step();
  }
  if (proposer_ && config_.speculative_adaptive) observe_step_time(speculate, now_seconds() - t0);
}

void Engine::plain_step() {
  const double t0 = now_seconds();
  // A grammar needs the previous token before it can mask the next one: while constrained requests are live,
  // the step in flight is applied before scheduling (those steps run without the pipeline's overlap).
  if (inflight_ && !constrained_.empty()) {
    process(std::move(*inflight_), 0.0);
    inflight_.reset();
  }
  SchedulerOutput out = scheduler_->schedule();
  const double t_sched = now_seconds() - t0;
  profile_.span("schedule", t0, t_sched, 0, step_index_);
  // Penalty slots of preempted and finished requests are free again (their old counts are reset on reuse, in
  // stream order after any step still sampling with them).
  for (const std::string& id : out.preempted_request_ids) release_slot(id);
  for (const std::string& id : out.finished_request_ids) release_slot(id);
  if (out.scheduled.empty()) {
    if (inflight_) process(std::move(*inflight_), t_sched);
    inflight_.reset();
    return;
  }
  double t_launch = 0.0;
  InFlight f = launch_step(std::move(out), /*keep_pending=*/true, &t_launch);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    timing_.num_steps++;
    timing_.scheduler_seconds += t_sched;
    timing_.host_seconds += t_sched + t_launch;
    timing_.max_running = std::max<int64_t>(timing_.max_running, static_cast<int64_t>(f.out.scheduled.size()));
  }
  if (inflight_) process(std::move(*inflight_), 0.0);
  inflight_ = std::move(f);
}

// Stages a scheduled step into the parity's buffers, launches it (forward + sampling) and records its fence.
// keep_pending: the next step may read this step's sampled ids on the device (the pipelined loop); otherwise the
// step is processed before the next one is scheduled and nothing stays pending.
Engine::InFlight Engine::launch_step(SchedulerOutput out, bool keep_pending, double* seconds) {
  const double t0 = now_seconds();
  InFlight f;
  std::unordered_map<uint64_t, int32_t> next_pending;
  stage_rows(out, &f, &next_pending);
  fill_constraint_masks(out, f.sample_row);
  f.parity = parity_;
  f.step = step_index_++;
  if (profile_.enabled()) f.marker_begin = backend_->record_marker();
  runner_->launch(seq_steps_, rows_, sampler_.get(), parity_);
  if (profile_.enabled()) f.marker_end = backend_->record_marker();
  f.fence = backend_->record_fence();
  // The step's shape for the adaptive step-time model (only it reads it): all-decode when every row feeds one
  // known token plus its drafts.
  if (proposer_ && config_.speculative_adaptive) {
    last_launch_.batch = static_cast<int64_t>(out.scheduled.size());
    last_launch_.rows = static_cast<int64_t>(seq_steps_.size());
    last_launch_.all_decode = std::all_of(out.scheduled.begin(), out.scheduled.end(), [](const ScheduledRequest& s) {
      return s.samples && s.num_scheduled_tokens - s.num_draft_tokens == 1 &&
             s.num_computed_tokens >= s.request->num_prompt_tokens;
    });
  }
  scheduler_->advance(out);
  f.out = std::move(out);
  if (keep_pending) {
    pending_row_ = std::move(next_pending);
  } else {
    pending_row_.clear();
  }
  parity_ ^= 1;
  *seconds = now_seconds() - t0;
  profile_.span("stage+launch", t0, *seconds, 0, f.step);
  return f;
}

// Waits for a launched step's sampled ids and applies them: tokens, stop conditions, outputs to the channels.
void Engine::process(InFlight f, double extra_host_seconds) {
  const double t0 = now_seconds();
  backend_->wait_fence(f.fence);
  const double t1 = now_seconds();
  profile_.span("wait", t0, t1 - t0, 0, f.step);
  if (profile_.enabled()) {
    const double g0 = backend_->marker_seconds(f.marker_begin), g1 = backend_->marker_seconds(f.marker_end);
    profile_.span("forward+sample", g0, g1 - g0, 1, f.step);
  }
  const SchedulerOutput& out = f.out;
  // Results by sampler row; a speculative row's positions are consecutive rows.
  std::vector<SampleResult> samples(static_cast<size_t>(f.num_sample_rows));
  for (int32_t row = 0; row < f.num_sample_rows; ++row) {
    samples[static_cast<size_t>(row)] = sampler_->result(f.parity, row);
  }
  std::vector<TokenId> sampled(out.scheduled.size(), 0);
  std::vector<int32_t> error_row(out.scheduled.size(), -1);
  std::vector<std::vector<TokenId>> accepted;  // speculative rows only: the verified drafts before sampled[i]
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const int32_t base = f.sample_row[i];
    if (base < 0) continue;
    const ScheduledRequest& s = out.scheduled[i];
    error_row[i] = base;
    if (s.num_draft_tokens == 0) {
      sampled[i] = samples[static_cast<size_t>(base)].token;
      continue;
    }
    // Verification (spec/verify.h, verify_by_target_draws): position j's token was drawn from the target's
    // distribution there with the RNG counter of output position n + j, as plain decoding would draw it given the
    // same prefix; draft j is accepted while it equals that draw (every proposer here proposes point masses).
    const auto drafts = s.token_ids.subspan(1);
    std::vector<TokenId> target(drafts.size() + 1);
    for (size_t j = 0; j < target.size(); ++j) target[j] = samples[static_cast<size_t>(base) + j].token;
    spec::VerifyResult v = spec::verify_by_target_draws(drafts, target);
    if (accepted.empty()) accepted.resize(out.scheduled.size());
    sampled[i] = v.tokens.back();
    error_row[i] = base + v.num_accepted;
    v.tokens.pop_back();
    accepted[i] = std::move(v.tokens);
    engine_metrics_->observe_spec(s.num_draft_tokens, v.num_accepted);
    std::lock_guard<std::mutex> lock(stats_mu_);
    spec_counters_.record(s.num_draft_tokens, v.num_accepted);
  }
  // A row that could not be sampled (NaN/Inf logits from a numerically broken model, or nothing left after the
  // processors) fails its own request with the sampler's message; the others in the batch go on.
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    if (f.sample_row[i] < 0 || sampled[i] >= 0) continue;
    Request* r = scheduler_->live(out.scheduled[i]);
    if (r == nullptr) continue;
    const std::string cid = r->id;
    std::unique_ptr<Request> done = scheduler_->finish_request(cid, RequestStatus::kFinishedError);
    engine_metrics_->observe_finished(*done);
    finish_choice(cid, *done, FinishReason::kError, samples[static_cast<size_t>(error_row[i])].error);
  }
  // Prompt logprobs, in position order; a position delivered before (a preempted request recomputes its prompt)
  // is not sent again. A row the model could not score fails its request.
  std::unordered_map<std::string, RequestOutput> msgs;
  for (const InFlight::PromptRows& pr : f.prompt_rows) {
    Request* r = scheduler_->live(out.scheduled[pr.scheduled]);
    if (r == nullptr) continue;
    auto it = choices_.find(r->id);
    if (it == choices_.end()) continue;
    for (int32_t c = 0; c < pr.count; ++c) {
      SampleResult& sr = samples[static_cast<size_t>(pr.first_row + c)];
      if (sr.token < 0) {
        const std::string cid = r->id;
        std::unique_ptr<Request> done = scheduler_->finish_request(cid, RequestStatus::kFinishedError);
        engine_metrics_->observe_finished(*done);
        finish_choice(cid, *done, FinishReason::kError, sr.error);
        msgs.erase(cid);
        break;
      }
      const int32_t pos = pr.first_pos + c;
      if (pos != r->next_prompt_logprob || pos >= r->num_prompt_tokens) continue;
      ++r->next_prompt_logprob;
      TokenOutput t;
      t.token = sr.token;
      t.logprob = sr.logprob;
      t.top_logprobs = std::move(sr.top_logprobs);
      t.rank = sr.rank;
      RequestOutput& m = msgs[r->id];
      m.index = it->second.second;
      m.prompt_logprobs.push_back(std::move(t));
    }
  }
  advance_constraints(out, f.sample_row, sampled);
  if (proposer_) observe_acceptance(out, f.sample_row, sampled, accepted);
  UpdateResult res = scheduler_->resolve(out, sampled, accepted.empty() ? nullptr : &accepted);
  engine_metrics_->observe_step(res);
  if (proposer_) {
    // Draft KV past the verified tokens is stale (the target's blocks for it were rolled back).
    for (const ScheduledRequest& s : out.scheduled) {
      if (s.num_draft_slots == 0) continue;
      if (const Request* r = scheduler_->live(s)) proposer_->verified(s.arrival_seq, r->num_computed_tokens);
    }
  }

  // One message per choice per step: its prompt logprobs and new token, and the finish if it ended.
  for (TokenUpdate& tu : res.tokens) {
    auto it = choices_.find(tu.request_id);
    if (it == choices_.end()) continue;
    RequestOutput& m = msgs[tu.request_id];
    m.index = it->second.second;
    TokenOutput t;
    t.token = tu.token;
    SampleResult& sr = samples[static_cast<size_t>(f.sample_row[static_cast<size_t>(tu.scheduled_index)] +
                                                   tu.position)];
    t.logprob = sr.logprob;
    t.top_logprobs = std::move(sr.top_logprobs);
    m.tokens.push_back(std::move(t));
  }
  std::unordered_map<std::string, std::unique_ptr<Request>> finished;
  for (auto& r : res.finished) finished[r->id] = std::move(r);
  for (auto& [cid, m] : msgs) {
    auto it = choices_.find(cid);
    if (it == choices_.end()) continue;
    std::shared_ptr<Parent> p = it->second.first;
    auto fin = finished.find(cid);
    if (fin == finished.end()) {
      p->channel->push(std::move(m));
      if (it->second.second == 0 && p->siblings_pending) {
        p->siblings_pending = false;
        admit_siblings(p);
      }
    } else {
      // The finishing message carries the last token too.
      RequestOutput carry;
      carry.index = it->second.second;
      carry.tokens = std::move(m.tokens);
      carry.prompt_logprobs = std::move(m.prompt_logprobs);
      p->channel->push(std::move(carry));
      finish_choice(cid, *fin->second, reason_of(fin->second->status));
      finished.erase(fin);
    }
  }
  for (auto& [cid, r] : finished) finish_choice(cid, *r, reason_of(r->status));
  publish_stats();
  const double t2 = now_seconds();
  profile_.span("process", t1, t2 - t1, 0, f.step);
  std::lock_guard<std::mutex> lock(stats_mu_);
  timing_.host_seconds += (t2 - t1) + extra_host_seconds;
  timing_.wait_seconds += t1 - t0;
}

void Engine::publish_stats() {
  SchedulerStats st = scheduler_->stats();
  engine_metrics_->update(st);
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_ = st;
}

void Engine::fail_all(const std::string& why) {
  std::vector<std::string> ids;
  for (const auto& [cid, v] : choices_) ids.push_back(cid);
  for (const std::string& cid : ids) {
    std::unique_ptr<Request> r = scheduler_->finish_request(cid, RequestStatus::kFinishedError);
    Request dummy;
    RequestOutput err;
    auto it = choices_.find(cid);
    if (it == choices_.end()) continue;
    err.index = it->second.second;
    err.error = why;
    err.finish = FinishReason::kError;
    it->second.first->channel->push(err);
    finish_choice(cid, r ? *r : dummy, FinishReason::kError);
  }
  // Pending submissions that never reached the scheduler.
  std::lock_guard<std::mutex> lock(mu_);
  for (auto& [p, prompt] : inbox_.submits) {
    RequestOutput err;
    err.finish = FinishReason::kError;
    err.error = why;
    p->channel->push(err);
    p->channel->close();
  }
  inbox_.submits.clear();
}

Result<std::vector<float>> Engine::prompt_logits(const std::vector<TokenId>& prompt) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (ever_started_) return Status::error("prompt_logits needs a fresh engine");
  }
  const int64_t bs = kv_->block_size(), n = static_cast<int64_t>(prompt.size());
  if (n == 0) return Status::error("empty prompt");
  if (n > sched_config_.max_model_len || n > runner_->limits().max_num_tokens) {
    return Status::error("prompt of " + std::to_string(n) + " tokens is longer than one step allows (" +
                         std::to_string(std::min<int64_t>(sched_config_.max_model_len,
                                                          runner_->limits().max_num_tokens)) + ")");
  }
  for (TokenId t : prompt) {
    if (t < 0 || t >= model_->config().vocab_size) {
      return Status::error("token id " + std::to_string(t) + " is outside the vocabulary");
    }
  }
  // Blocks 1.. in group 0, the next ones in each further KV group.
  const int64_t nb = (n + bs - 1) / bs, num_groups = kv_->num_groups();
  if (num_groups * nb >= kv_->num_blocks()) return Status::error("prompt of " + std::to_string(n) +
                                                                 " tokens does not fit the KV cache");
  std::vector<std::vector<int32_t>> tables(static_cast<size_t>(num_groups));
  for (int64_t g = 0; g < num_groups; ++g)
    for (int64_t b = 0; b < nb; ++b) tables[static_cast<size_t>(g)].push_back(static_cast<int32_t>(1 + g * nb + b));
  SeqStep st;
  st.token_ids = prompt.data();
  st.num_new_tokens = n;
  st.block_table = tables[0].data();
  st.num_blocks = nb;
  for (int64_t g = 1; g < num_groups; ++g) st.window_tables[g - 1] = tables[static_cast<size_t>(g)].data();
  std::vector<float> logits;
  runner_->step({st}, &logits);
  return logits;
}

std::vector<std::vector<Completion>> Engine::generate(const std::vector<std::vector<TokenId>>& prompts,
                                                      const SamplingParams& params) {
  const int32_t n = std::max(1, params.n);
  std::vector<std::shared_ptr<OutputChannel>> channels;
  std::vector<std::string> ids;
  static std::atomic<uint64_t> counter{0};
  uint64_t batch = counter++;
  for (size_t i = 0; i < prompts.size(); ++i) {
    ids.push_back("generate-" + std::to_string(batch) + "-" + std::to_string(i));
    channels.push_back(submit(ids.back(), prompts[i], params));
  }
  std::vector<std::vector<Completion>> results(prompts.size(), std::vector<Completion>(static_cast<size_t>(n)));
  for (size_t i = 0; i < prompts.size(); ++i) {
    std::vector<std::unique_ptr<TextStream>> streams;
    if (tokenizer_) {
      for (int32_t c = 0; c < n; ++c) streams.push_back(std::make_unique<TextStream>(*tokenizer_, params.stop));
    }
    while (auto msg = channels[i]->pop()) {
      Completion& comp = results[i][static_cast<size_t>(msg->index)];
      for (TokenOutput& t : msg->prompt_logprobs) comp.prompt_logprobs.push_back(std::move(t));
      TextStream* ts = tokenizer_ ? streams[static_cast<size_t>(msg->index)].get() : nullptr;
      for (const TokenOutput& t : msg->tokens) {
        if (ts && ts->stopped()) break;
        comp.token_ids.push_back(t.token);
        if (params.logprobs) comp.logprobs.push_back(t);
        if (ts) {
          const double td = profile_.enabled() ? now_seconds() : 0.0;
          TextStream::Piece piece = ts->push(t.token);
          if (profile_.enabled()) profile_.span("detokenize", td, now_seconds() - td, 2);
          comp.text += piece.text;
          if (piece.stopped) {
            comp.finish = FinishReason::kStop;
            abort(ids[i], FinishReason::kStop, msg->index);
          }
        }
      }
      if (msg->finish != FinishReason::kNone) {
        if (comp.finish == FinishReason::kNone) comp.finish = msg->finish;
        if (!msg->error.empty()) comp.error = msg->error;
        if (ts) comp.text += ts->finish();
      }
    }
  }
  return results;
}

}  // namespace rl
