#include "runtime/engine.h"

#include <algorithm>
#include <random>

#include "core/file.h"
#include "core/log.h"
#include "core/random.h"
#include "runtime/backend_factory.h"
#include "runtime/text_stream.h"

namespace rl {

struct Engine::Parent {
  std::string id;
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
  BackendOptions bo;
  bo.num_threads = config.num_threads;
  RL_ASSIGN_OR_RETURN(e->backend_, create_backend(config.device, bo));
  LoadOptions lo;
  lo.weight_dtype = config.weight_dtype;
  lo.dummy_weights = config.dummy_weights;
  if (e->backend_->device() == DeviceKind::kCuda) lo.weight_dtype = DType::kBF16;
  RL_ASSIGN_OR_RETURN(e->model_, build_model(mc, config.model_dir, e->backend_.get(), lo));
  if (config.load_tokenizer && file_exists(path_join(config.model_dir, "tokenizer.json"))) {
    RL_ASSIGN_OR_RETURN(e->tokenizer_, Tokenizer::load(config.model_dir));
  }

  // KV cache: f32 on the CPU (the reference), bf16 on GPUs.
  const bool cuda = e->backend_->device() == DeviceKind::kCuda;
  const DType kv_dtype = cuda ? DType::kBF16 : DType::kF32;
  const int64_t bs = config.block_size;
  if (bs <= 0 || bs > 1024) return Status::error("block size must be in [1, 1024]");
  if (config.max_num_seqs < 0 || config.max_num_batched_tokens <= 0) {
    return Status::error("max_num_seqs must be >= 0 (0: sized from the KV cache) and max_num_batched_tokens > 0");
  }
  // The workspace estimate assumes the largest automatic size when max_num_seqs is chosen below.
  const int32_t seqs_bound = config.max_num_seqs > 0 ? config.max_num_seqs : kMaxAutoNumSeqs;
  const int64_t block_bytes = KvStorage::bytes_per_block(mc, bs, kv_dtype);
  int64_t num_blocks = config.num_kv_blocks;
  if (num_blocks <= 0) {
    size_t free_b = 0, total_b = 0;
    e->backend_->memory_info(&free_b, &total_b);
    int64_t budget;
    if (cuda) {
      if (!(config.gpu_memory_utilization > 0 && config.gpu_memory_utilization <= 1)) {
        return Status::error("--gpu-memory-utilization must be in (0, 1]");
      }
      int64_t used = static_cast<int64_t>(total_b - free_b);
      budget = static_cast<int64_t>(config.gpu_memory_utilization * static_cast<double>(total_b)) - used -
               static_cast<int64_t>(e->model_->workspace_bytes(config.max_num_batched_tokens, seqs_bound)) -
               (256ll << 20);
    } else {
      budget = config.kv_cache_memory_bytes > 0 ? config.kv_cache_memory_bytes
                                                : std::min<int64_t>(2ll << 30, static_cast<int64_t>(free_b / 4));
    }
    num_blocks = budget / block_bytes;
  }
  if (num_blocks < 2) {
    return Status::error("not enough memory for the KV cache: " + std::to_string(num_blocks) +
                         " blocks of " + std::to_string(block_bytes) + " bytes");
  }
  num_blocks = std::min<int64_t>(num_blocks, INT32_MAX / 2);
  e->kv_ = std::make_unique<KvStorage>(e->backend_.get(), mc, num_blocks, bs, kv_dtype);

  int64_t max_len = config.max_model_len > 0 ? config.max_model_len : mc.max_context_len();
  if (max_len > mc.max_context_len()) {
    return Status::error("max_model_len " + std::to_string(max_len) + " exceeds the model's context " +
                         std::to_string(mc.max_context_len()));
  }
  const int64_t kv_tokens = (num_blocks - 1) * bs;
  if (max_len > kv_tokens) {
    log_warn("max_model_len lowered from " + std::to_string(max_len) + " to " + std::to_string(kv_tokens) +
             " tokens: the KV cache holds no more");
    max_len = kv_tokens;
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
  RL_RETURN_IF_ERROR(sc.validate());
  e->sched_config_ = sc;
  e->scheduler_ = std::make_unique<Scheduler>(sc);

  RunnerLimits lim;
  lim.max_num_tokens = config.max_num_batched_tokens;
  lim.max_num_seqs = max_num_seqs;
  lim.max_model_len = max_len;
  lim.enforce_eager = config.enforce_eager;
  e->d_argmax_ = DeviceBuffer(e->backend_.get(), static_cast<size_t>(max_num_seqs) * 4);
  e->runner_ = std::make_unique<ModelRunner>(e->model_.get(), e->kv_.get(), lim);
  e->sampler_ = std::make_unique<Sampler>();
  e->seed_salt_ = std::random_device{}() * 0x9e3779b97f4a7c15ull ^ static_cast<uint64_t>(now_seconds() * 1e9);
  std::string name = config.served_model_name;
  if (name.empty()) {
    std::string dir = config.model_dir;
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    name = dir.substr(dir.find_last_of('/') + 1);
  }
  e->engine_metrics_ = std::make_unique<EngineMetrics>(e->registry_, name);
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
  p->params = std::move(params);
  if (p->params.n < 1) p->params.n = 1;
  p->channel = std::make_shared<OutputChannel>(p->params.n);
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

void Engine::abort(const std::string& id, FinishReason reason) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    inbox_.aborts.emplace_back(id, reason);
  }
  cv_.notify_all();
}

Status Engine::check_integrity() const {
  if (scheduler_->has_unfinished()) return Status::error("requests are in flight");
  return scheduler_->check_integrity();
}

int64_t Engine::num_free_kv_blocks() const { return scheduler_->kv().num_free_blocks(); }

SchedulerStats Engine::stats() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return stats_;
}

void Engine::loop() {
  while (true) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (stop_requested_) break;
      if (!scheduler_->has_unfinished() && inbox_.submits.empty() && inbox_.aborts.empty()) {
        cv_.wait_for(lock, std::chrono::milliseconds(100));
        heartbeat_ = now_seconds();
        continue;
      }
    }
    drain_inbox();
    if (scheduler_->has_unfinished()) {
      try {
        step();
      } catch (const std::exception& ex) {
        fail_all(std::string("engine step failed: ") + ex.what());
      }
    }
    heartbeat_ = now_seconds();
  }
  fail_all("engine stopped");
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
  for (auto& [id, reason] : in.aborts) {
    auto it = parents_.find(id);
    if (it == parents_.end()) continue;
    std::shared_ptr<Parent> p = it->second;
    RequestStatus status = reason == FinishReason::kStop ? RequestStatus::kFinishedStopped
                                                         : RequestStatus::kFinishedAborted;
    const int32_t n = p->params.n;
    for (int32_t i = 0; i < n && parents_.count(id); ++i) {
      if (p->finished[static_cast<size_t>(i)]) continue;
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
  std::string cid = choice_id(p->id, n, index);
  Request r(cid, p->prompt, params, eos_token_ids());
  AddResult res = scheduler_->add_request(std::move(r));
  p->num_admitted = std::max(p->num_admitted, index + 1);
  choices_[cid] = {p, index};
  if (!res.ok()) reject(p, res.error, res.status.message());
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

void Engine::finish_choice(const std::string& cid, const Request& r, FinishReason reason) {
  auto it = choices_.find(cid);
  if (it == choices_.end()) return;
  std::shared_ptr<Parent> p = it->second.first;
  const int32_t index = it->second.second;
  choices_.erase(it);
  RequestOutput out;
  out.index = index;
  out.finish = reason;
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
    for (int32_t i = 1; i < p->params.n; ++i) admit_choice(p, i);
  }
  if (p->num_finished == p->params.n) {
    p->channel->close();
    parents_.erase(p->id);
  }
}

Engine::StepTiming Engine::step_timing() const {
  std::lock_guard<std::mutex> lock(stats_mu_);
  return timing_;
}

void Engine::step() {
  const double t0 = now_seconds();
  SchedulerOutput out = scheduler_->schedule();
  const double t_sched = now_seconds() - t0;
  if (out.scheduled.empty()) return;
  seq_steps_.clear();
  rows_.clear();
  for (const ScheduledRequest& s : out.scheduled) {
    SeqStep st;
    st.token_ids = s.token_ids.data();
    st.num_new_tokens = s.num_scheduled_tokens;
    st.num_computed = s.num_computed_tokens;
    st.block_table = s.block_table.data();
    st.num_blocks = static_cast<int64_t>(s.block_table.size());
    st.want_logits = s.samples;
    seq_steps_.push_back(st);
    if (s.samples) {
      SamplerRow row;
      row.params = &s.request->params;
      row.prompt_token_ids = s.request->prompt_token_ids();
      row.output_token_ids = s.request->output_token_ids();
      row.eos_token_ids = s.request->eos_token_ids;
      rows_.push_back(row);
    }
  }
  // Rows with nothing that needs the whole processed distribution on the host (no penalties, bias, logprobs or
  // min_tokens suppression) are sampled on the device: greedy rows by argmax on every backend; temperature /
  // top-k / top-p / min-p rows by Backend::sample_rows on GPUs. Only token ids come back, not num_seqs x vocab
  // logits.
  bool device_greedy = true, device_sample = backend_->device() == DeviceKind::kCuda;
  for (const SamplerRow& row : rows_) {
    const SamplingParams& p = *row.params;
    const bool plain = !p.logprobs && p.logit_bias.empty() && p.repetition_penalty == 1.0f &&
                       p.presence_penalty == 0.0f && p.frequency_penalty == 0.0f &&
                       static_cast<int64_t>(row.output_token_ids.size()) >= p.min_tokens;
    device_greedy = device_greedy && plain && p.is_greedy();
    device_sample = device_sample && plain;
  }
  int64_t num_logits = 0;
  Tensor logits = runner_->step_device(seq_steps_, &num_logits);
  std::vector<SampleResult> samples;
  if (!rows_.empty() && (device_greedy || device_sample)) {
    Tensor ids(d_argmax_.data(), DType::kI32, {num_logits});
    if (device_greedy) {
      backend_->argmax_rows(logits, ids);
    } else {
      device_params_.clear();
      for (size_t i = 0, k = 0; i < out.scheduled.size(); ++i) {
        if (!out.scheduled[i].samples) continue;
        const SamplerRow& row = rows_[k++];
        const SamplingParams& p = *row.params;
        DeviceSampleParams d;
        d.temperature = p.temperature;
        d.top_k = p.top_k;
        d.top_p = p.top_p;
        d.min_p = p.min_p;
        // Unseeded requests get a stable per-request stream from the engine's random salt.
        d.seed = p.seed ? *p.seed : mix64(seed_salt_ ^ std::hash<std::string>{}(out.scheduled[i].request->id));
        d.step = row.output_token_ids.size();
        device_params_.push_back(d);
      }
      backend_->sample_rows(logits, device_params_.data(), ids);
    }
    h_argmax_.resize(static_cast<size_t>(num_logits));
    backend_->download(h_argmax_.data(), ids.data, h_argmax_.size() * 4);
    for (int32_t id : h_argmax_) samples.push_back(SampleResult{id, std::nullopt, {}});
  } else if (!rows_.empty()) {
    logits_.resize(static_cast<size_t>(num_logits * model_->config().vocab_size));
    backend_->download(logits_.data(), logits.data, logits_.size() * sizeof(float));
    samples = sampler_->sample(logits_, static_cast<int32_t>(model_->config().vocab_size), rows_);
  }
  std::vector<TokenId> sampled(out.scheduled.size(), 0);
  std::unordered_map<std::string, size_t> sample_of;
  for (size_t i = 0, k = 0; i < out.scheduled.size(); ++i) {
    if (!out.scheduled[i].samples) continue;
    sampled[i] = samples[k].token;
    sample_of[out.scheduled[i].request->id] = k++;
  }
  const double t1 = now_seconds();
  UpdateResult res = scheduler_->update_from_output(out, sampled);
  const double t_update = now_seconds() - t1;
  engine_metrics_->observe_step(res);
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    timing_.num_steps++;
    timing_.scheduler_seconds += t_sched + t_update;
    timing_.step_seconds += now_seconds() - t0;
    timing_.max_running = std::max<int64_t>(timing_.max_running, static_cast<int64_t>(out.scheduled.size()));
  }

  // One message per choice per step: its new token, and the finish if it ended.
  std::unordered_map<std::string, RequestOutput> msgs;
  for (const TokenUpdate& tu : res.tokens) {
    auto it = choices_.find(tu.request_id);
    if (it == choices_.end()) continue;
    RequestOutput& m = msgs[tu.request_id];
    m.index = it->second.second;
    TokenOutput t;
    t.token = tu.token;
    auto si = sample_of.find(tu.request_id);
    if (si != sample_of.end()) {
      t.logprob = samples[si->second].logprob;
      t.top_logprobs = std::move(samples[si->second].top_logprobs);
    }
    m.tokens.push_back(std::move(t));
  }
  std::unordered_map<std::string, std::unique_ptr<Request>> finished;
  for (auto& r : res.finished) finished[r->id] = std::move(r);
  for (auto& [cid, m] : msgs) {
    auto it = choices_.find(cid);
    if (it == choices_.end()) continue;
    std::shared_ptr<Parent> p = it->second.first;
    auto f = finished.find(cid);
    if (f == finished.end()) {
      p->channel->push(std::move(m));
      if (it->second.second == 0 && p->siblings_pending) {
        p->siblings_pending = false;
        for (int32_t i = 1; i < p->params.n; ++i) admit_choice(p, i);
      }
    } else {
      // The finishing message carries the last token too.
      std::vector<TokenOutput> toks = std::move(m.tokens);
      auto c = choices_.find(cid);
      std::shared_ptr<Parent> keep = c->second.first;
      RequestOutput carry;
      carry.index = c->second.second;
      carry.tokens = std::move(toks);
      keep->channel->push(std::move(carry));
      finish_choice(cid, *f->second, reason_of(f->second->status));
      finished.erase(f);
    }
  }
  for (auto& [cid, r] : finished) finish_choice(cid, *r, reason_of(r->status));
  publish_stats();
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
  std::vector<int32_t> table;
  for (int64_t b = 1; b <= (n + bs - 1) / bs; ++b) table.push_back(static_cast<int32_t>(b));
  SeqStep st;
  st.token_ids = prompt.data();
  st.num_new_tokens = n;
  st.block_table = table.data();
  st.num_blocks = static_cast<int64_t>(table.size());
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
      TextStream* ts = tokenizer_ ? streams[static_cast<size_t>(msg->index)].get() : nullptr;
      for (const TokenOutput& t : msg->tokens) {
        if (ts && ts->stopped()) break;
        comp.token_ids.push_back(t.token);
        if (params.logprobs) comp.logprobs.push_back(t);
        if (ts) {
          TextStream::Piece piece = ts->push(t.token);
          comp.text += piece.text;
          if (piece.stopped) {
            comp.finish = FinishReason::kStop;
            abort(ids[i], FinishReason::kStop);
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
