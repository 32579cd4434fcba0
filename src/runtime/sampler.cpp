#include "runtime/sampler.h"

#include <algorithm>
#include <cstring>

#include "core/check.h"

namespace rl {

// Pinned staging of one parity. Layout mirrors the device buffers.
struct Sampler::Host {
  Backend* backend = nullptr;
  SampleRowParams* params = nullptr;
  int32_t* bias_ids = nullptr;
  float* bias_values = nullptr;
  int32_t* suppress = nullptr;
  uint32_t* mask = nullptr;
  int32_t* tokens = nullptr;
  float* logprobs = nullptr;
  int32_t* top_ids = nullptr;
  float* top_logprobs = nullptr;
  int32_t* ranks = nullptr;
  int32_t* init_ids = nullptr;
  size_t init_cap = 0;  // int32 entries of init_ids
  std::vector<void*> owned;

  template <typename T>
  T* take(size_t n) {
    void* p = backend->alloc_pinned(n * sizeof(T));
    owned.push_back(p);
    return static_cast<T*>(p);
  }
  ~Host() {
    for (void* p : owned) backend->free_pinned(p);
  }
};

bool needs_penalty_slot(const SamplingParams& p) {
  return p.repetition_penalty != 1.0f || p.presence_penalty != 0.0f || p.frequency_penalty != 0.0f;
}

Sampler::Sampler(Backend* backend, int64_t max_rows, int64_t vocab, int64_t num_slots)
    : backend_(backend), max_rows_(max_rows), vocab_(vocab), words_((vocab + 31) / 32), num_slots_(num_slots) {
  RL_CHECK(max_rows > 0 && vocab > 0 && num_slots > 0);
  bias_cap_ = max_rows * kMaxLogitBias;
  suppress_cap_ = max_rows * (kMaxStopTokenIds + 64);
  const auto rows = static_cast<size_t>(max_rows);
  d_params_ = DeviceBuffer(backend, rows * sizeof(SampleRowParams));
  d_bias_ids_ = DeviceBuffer(backend, static_cast<size_t>(bias_cap_) * 4);
  d_bias_values_ = DeviceBuffer(backend, static_cast<size_t>(bias_cap_) * 4);
  d_suppress_ = DeviceBuffer(backend, static_cast<size_t>(suppress_cap_) * 4);
  d_mask_ = DeviceBuffer(backend, rows * static_cast<size_t>(words_) * 4);
  d_counts_ = DeviceBuffer(backend, static_cast<size_t>(num_slots * vocab) * 4);
  d_prompt_bits_ = DeviceBuffer(backend, static_cast<size_t>(num_slots * words_) * 4);
  d_raw_ = DeviceBuffer(backend, rows * static_cast<size_t>(vocab) * 4);
  d_tokens_ = DeviceBuffer(backend, rows * 4);
  d_logprobs_ = DeviceBuffer(backend, rows * 4);
  d_top_ids_ = DeviceBuffer(backend, rows * kMaxTopLogprobs * 4);
  d_top_logprobs_ = DeviceBuffer(backend, rows * kMaxTopLogprobs * 4);
  d_ranks_ = DeviceBuffer(backend, rows * 4);
  backend->fill_zero(d_tokens_.data(), d_tokens_.size());
  for (int i = 0; i < 2; ++i) {
    auto h = std::make_unique<Host>();
    h->backend = backend;
    h->params = h->take<SampleRowParams>(rows);
    h->bias_ids = h->take<int32_t>(static_cast<size_t>(bias_cap_));
    h->bias_values = h->take<float>(static_cast<size_t>(bias_cap_));
    h->suppress = h->take<int32_t>(static_cast<size_t>(suppress_cap_));
    h->mask = h->take<uint32_t>(rows * static_cast<size_t>(words_));
    h->tokens = h->take<int32_t>(rows);
    h->logprobs = h->take<float>(rows);
    h->top_ids = h->take<int32_t>(rows * kMaxTopLogprobs);
    h->top_logprobs = h->take<float>(rows * kMaxTopLogprobs);
    h->ranks = h->take<int32_t>(rows);
    host_.push_back(std::move(h));
    num_logprobs_[i].assign(rows, -1);
    forced_[i].assign(rows, 0);
  }
  batch_.params = static_cast<const SampleRowParams*>(d_params_.data());
  batch_.bias_ids = static_cast<const int32_t*>(d_bias_ids_.data());
  batch_.bias_values = static_cast<const float*>(d_bias_values_.data());
  batch_.suppress_ids = static_cast<const int32_t*>(d_suppress_.data());
  batch_.penalty_counts = static_cast<int32_t*>(d_counts_.data());
  batch_.prompt_bits = static_cast<uint32_t*>(d_prompt_bits_.data());
  batch_.allowed_mask = static_cast<const uint32_t*>(d_mask_.data());
  batch_.raw_scratch = static_cast<float*>(d_raw_.data());
  batch_.out_tokens = static_cast<int32_t*>(d_tokens_.data());
  batch_.out_logprobs = static_cast<float*>(d_logprobs_.data());
  batch_.out_top_ids = static_cast<int32_t*>(d_top_ids_.data());
  batch_.out_top_logprobs = static_cast<float*>(d_top_logprobs_.data());
  batch_.out_ranks = static_cast<int32_t*>(d_ranks_.data());
}

Sampler::~Sampler() = default;

void Sampler::prepare(std::span<const SamplerRow> rows, int64_t num_rows, int parity,
                      Backend::PinnedUpload* params_upload) {
  RL_CHECK(static_cast<int64_t>(rows.size()) <= num_rows && num_rows <= max_rows_);
  Host& h = *host_[static_cast<size_t>(parity)];
  int32_t nb = 0, ns = 0, nm = 0;
  size_t init_len = 0;
  for (const SamplerRow& row : rows) {
    if (row.init_slot) init_len += row.prompt_token_ids.size() + row.output_token_ids.size();
  }
  if (init_len > h.init_cap) {
    // Grows both parities' staging and the device buffer; rare (the longest penalized request so far).
    const size_t cap = std::max(init_len, h.init_cap * 2);
    backend_->synchronize();  // enqueued copies and resets may still read the old buffers
    for (auto& other : host_) {
      std::erase(other->owned, static_cast<void*>(other->init_ids));
      if (other->init_ids) backend_->free_pinned(other->init_ids);
      other->init_ids = other->take<int32_t>(cap);
      other->init_cap = cap;
    }
    d_init_ids_ = DeviceBuffer(backend_, cap * 4);
  }
  std::vector<PenaltySlotInit> inits;
  size_t init_pos = 0;
  for (size_t r = 0; r < rows.size(); ++r) {
    const SamplerRow& row = rows[r];
    const SamplingParams& p = *row.params;
    SampleRowParams& d = h.params[r];
    d = SampleRowParams{};
    d.temperature = p.temperature;
    d.top_k = p.top_k;
    d.top_p = p.top_p;
    d.min_p = p.min_p;
    d.seed = row.seed;
    d.step = static_cast<uint64_t>(row.num_outputs);
    d.num_logprobs = p.logprobs ? *p.logprobs : -1;
    d.host_token = h.tokens + r;
    forced_[parity][r] = row.forced_token >= 0 ? 1 : 0;
    if (row.forced_token >= 0) {  // teacher-forced: scored only, no processor or state is involved
      RL_CHECK(row.forced_token < vocab_ && row.forced_num_logprobs >= 0 &&
               row.forced_num_logprobs <= kMaxTopLogprobs);
      d.forced_token = row.forced_token;
      d.num_logprobs = row.forced_num_logprobs;
      num_logprobs_[parity][r] = d.num_logprobs;
      continue;
    }
    d.min_tokens = p.min_tokens;
    d.bias_begin = nb;
    for (const auto& [token, bias] : p.logit_bias) {
      RL_CHECK(nb < bias_cap_);
      h.bias_ids[nb] = token;
      h.bias_values[nb++] = bias;
    }
    d.bias_end = nb;
    d.suppress_begin = ns;
    if (row.num_outputs < p.min_tokens) {
      const auto add = [&](TokenId t) {
        RL_CHECK(ns < suppress_cap_);
        if (t >= 0 && t < vocab_) h.suppress[ns++] = t;
      };
      if (!p.ignore_eos) {
        for (TokenId t : row.eos_token_ids) add(t);
      }
      for (TokenId t : p.stop_token_ids) add(t);
    }
    d.suppress_end = ns;
    if (row.allowed_mask) {
      std::memcpy(h.mask + static_cast<int64_t>(nm) * words_, row.allowed_mask, static_cast<size_t>(words_) * 4);
      d.mask_row = nm++;
    }
    if (row.penalty_slot >= 0) {
      RL_CHECK(row.penalty_slot < num_slots_);
      d.penalty_slot = row.penalty_slot;
      d.repetition_penalty = p.repetition_penalty;
      d.presence_penalty = p.presence_penalty;
      d.frequency_penalty = p.frequency_penalty;
      if (row.init_slot) {
        PenaltySlotInit in;
        in.slot = row.penalty_slot;
        int32_t* dev = static_cast<int32_t*>(d_init_ids_.data());
        std::copy(row.prompt_token_ids.begin(), row.prompt_token_ids.end(), h.init_ids + init_pos);
        in.prompt_ids = dev + init_pos;
        in.num_prompt = static_cast<int64_t>(row.prompt_token_ids.size());
        init_pos += row.prompt_token_ids.size();
        std::copy(row.output_token_ids.begin(), row.output_token_ids.end(), h.init_ids + init_pos);
        in.output_ids = dev + init_pos;
        in.num_output = static_cast<int64_t>(row.output_token_ids.size());
        init_pos += row.output_token_ids.size();
        inits.push_back(in);
      }
    }
    num_logprobs_[parity][r] = d.num_logprobs;
  }
  for (int64_t r = static_cast<int64_t>(rows.size()); r < num_rows; ++r) {
    h.params[r] = SampleRowParams{};
    h.params[r].temperature = 0.0f;  // padding rows: plain argmax, no state touched
    num_logprobs_[parity][static_cast<size_t>(r)] = -1;
    forced_[parity][static_cast<size_t>(r)] = 0;
  }
  any_forced_[parity] = std::any_of(rows.begin(), rows.end(), [](const SamplerRow& r) {
    return r.forced_token >= 0;
  });
  any_logprobs_[parity] = any_forced_[parity] || std::any_of(rows.begin(), rows.end(), [](const SamplerRow& r) {
    return r.params->logprobs.has_value();
  });
  const Backend::PinnedUpload params{d_params_.data(), h.params,
                                     static_cast<size_t>(num_rows) * sizeof(SampleRowParams)};
  if (params_upload != nullptr) {
    *params_upload = params;
  } else {
    backend_->upload_async(params.dst, params.pinned_src, params.nbytes);
  }
  if (nb > 0) {
    backend_->upload_async(d_bias_ids_.data(), h.bias_ids, static_cast<size_t>(nb) * 4);
    backend_->upload_async(d_bias_values_.data(), h.bias_values, static_cast<size_t>(nb) * 4);
  }
  if (ns > 0) backend_->upload_async(d_suppress_.data(), h.suppress, static_cast<size_t>(ns) * 4);
  if (nm > 0) backend_->upload_async(d_mask_.data(), h.mask, static_cast<size_t>(nm * words_) * 4);
  if (!inits.empty()) {
    backend_->upload_async(d_init_ids_.data(), h.init_ids, init_pos * 4);
    backend_->init_penalty_slots(inits.data(), static_cast<int64_t>(inits.size()), batch_, vocab_);
  }
}

void Sampler::sample(const Tensor& logits, int64_t num_rows) {
  SampleBatch b = batch_;
  b.num_rows = num_rows;
  backend_->sample(logits, b);
}

void Sampler::fetch(int64_t num_rows, int parity) {
  Host& h = *host_[static_cast<size_t>(parity)];
  const auto n = static_cast<size_t>(num_rows);
  if (n == 0) return;
  if (any_logprobs_[parity]) {
    backend_->download_async(h.logprobs, d_logprobs_.data(), n * 4);
    backend_->download_async(h.top_ids, d_top_ids_.data(), n * kMaxTopLogprobs * 4);
    backend_->download_async(h.top_logprobs, d_top_logprobs_.data(), n * kMaxTopLogprobs * 4);
  }
  if (any_forced_[parity]) backend_->download_async(h.ranks, d_ranks_.data(), n * 4);
}

SampleResult Sampler::result(int parity, int64_t row) const {
  const Host& h = *host_[static_cast<size_t>(parity)];
  SampleResult res;
  res.token = h.tokens[row];
  if (res.token == kSampleNonFinite) {
    res.error = "the model produced non-finite logits (NaN or Inf) for this sequence";
  } else if (res.token < 0) {
    res.error = "no token can be sampled: every logit is -inf or non-finite after logit_bias, min_tokens, "
                "penalties and the allowed-token mask";
  }
  const int32_t n = num_logprobs_[parity][static_cast<size_t>(row)];
  if (n >= 0 && res.token >= 0) {
    res.logprob = h.logprobs[row];
    if (forced_[parity][static_cast<size_t>(row)]) res.rank = h.ranks[row];
    for (int32_t k = 0; k < std::min<int64_t>(n, vocab_); ++k) {
      res.top_logprobs.push_back(
          TokenLogprob{h.top_ids[row * kMaxTopLogprobs + k], h.top_logprobs[row * kMaxTopLogprobs + k]});
    }
  }
  return res;
}

Tensor Sampler::sampled_ids() const { return Tensor(d_tokens_.data(), DType::kI32, {max_rows_}); }

}  // namespace rl
