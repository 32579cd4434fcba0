#include "runtime/model_runner.h"

#include <algorithm>
#include <cmath>

namespace rl {

ModelRunner::ModelRunner(Model* model, KvStorage* kv, const RunnerLimits& limits)
    : model_(model), kv_(kv), limits_(limits) {
  const int64_t bs = kv->block_size();
  if (limits_.max_blocks_per_seq <= 0) limits_.max_blocks_per_seq = (limits_.max_model_len + bs - 1) / bs;
  Backend& be = model->backend();
  const size_t t = static_cast<size_t>(limits_.max_num_tokens), s = static_cast<size_t>(limits_.max_num_seqs);
  d_ids_ = DeviceBuffer(&be, t * 4);
  d_pos_ = DeviceBuffer(&be, t * 4);
  d_slots_ = DeviceBuffer(&be, t * 4);
  d_cu_ = DeviceBuffer(&be, (s + 1) * 4);
  d_lens_ = DeviceBuffer(&be, s * 4);
  d_tables_ = DeviceBuffer(&be, s * static_cast<size_t>(limits_.max_blocks_per_seq) * 4);
  if (limits_.max_num_logits <= 0) limits_.max_num_logits = limits_.max_num_seqs;
  d_logit_idx_ = DeviceBuffer(&be, static_cast<size_t>(limits_.max_num_logits) * 4);
  model->reserve(limits_.max_num_tokens, limits_.max_num_logits);
}

void ModelRunner::step(const std::vector<SeqStep>& seqs, std::vector<float>* logits_out) {
  const int64_t bs = kv_->block_size(), mb = limits_.max_blocks_per_seq;
  const int64_t num_seqs = static_cast<int64_t>(seqs.size());
  RL_CHECK(num_seqs > 0 && num_seqs <= limits_.max_num_seqs);
  h_ids_.clear();
  h_pos_.clear();
  h_slots_.clear();
  h_cu_.assign(1, 0);
  h_lens_.clear();
  h_tables_.assign(static_cast<size_t>(num_seqs * mb), 0);
  h_logit_idx_.clear();
  int64_t max_q = 0, max_k = 0;
  bool all_decode = true;
  for (int64_t i = 0; i < num_seqs; ++i) {
    const SeqStep& s = seqs[static_cast<size_t>(i)];
    RL_CHECK(s.num_new_tokens > 0 && s.num_blocks <= mb);
    const int64_t len = s.num_computed + s.num_new_tokens;
    RL_CHECK_MSG((len + bs - 1) / bs <= s.num_blocks, "sequence needs %lld blocks, has %lld",
                 static_cast<long long>((len + bs - 1) / bs), static_cast<long long>(s.num_blocks));
    for (int64_t j = 0; j < s.num_new_tokens; ++j) {
      int64_t p = s.num_computed + j;
      if (s.all_logits) h_logit_idx_.push_back(static_cast<int32_t>(h_ids_.size()));
      h_ids_.push_back(s.token_ids[j]);
      h_pos_.push_back(static_cast<int32_t>(p));
      h_slots_.push_back(static_cast<int32_t>(s.block_table[p / bs] * bs + p % bs));
    }
    h_cu_.push_back(static_cast<int32_t>(h_ids_.size()));
    h_lens_.push_back(static_cast<int32_t>(len));
    std::copy(s.block_table, s.block_table + s.num_blocks, h_tables_.begin() + i * mb);
    if (s.want_logits && !s.all_logits) h_logit_idx_.push_back(static_cast<int32_t>(h_ids_.size() - 1));
    max_q = std::max(max_q, s.num_new_tokens);
    max_k = std::max(max_k, len);
    all_decode = all_decode && s.num_new_tokens == 1;
  }
  const int64_t t = static_cast<int64_t>(h_ids_.size()), n = static_cast<int64_t>(h_logit_idx_.size());
  RL_CHECK(n <= limits_.max_num_logits);
  RL_CHECK_MSG(t <= limits_.max_num_tokens, "step has %lld tokens, limit %lld", static_cast<long long>(t),
               static_cast<long long>(limits_.max_num_tokens));
  Backend& be = model_->backend();
  auto up = [&](const DeviceBuffer& d, const std::vector<int32_t>& h) {
    if (!h.empty()) be.upload(d.data(), h.data(), h.size() * 4);
  };
  up(d_ids_, h_ids_);
  up(d_pos_, h_pos_);
  up(d_slots_, h_slots_);
  up(d_cu_, h_cu_);
  up(d_lens_, h_lens_);
  up(d_tables_, h_tables_);
  up(d_logit_idx_, h_logit_idx_);

  ForwardBatch b;
  b.num_tokens = t;
  b.num_logits = n;
  b.input_ids = Tensor(d_ids_.data(), DType::kI32, {t});
  b.positions = Tensor(d_pos_.data(), DType::kI32, {t});
  b.slot_mapping = Tensor(d_slots_.data(), DType::kI32, {t});
  b.logits_indices = Tensor(d_logit_idx_.data(), DType::kI32, {n});
  const ModelConfig& c = model_->config();
  b.attn.cu_seqlens_q = Tensor(d_cu_.data(), DType::kI32, {num_seqs + 1});
  b.attn.seq_lens_k = Tensor(d_lens_.data(), DType::kI32, {num_seqs});
  b.attn.block_tables = Tensor(d_tables_.data(), DType::kI32, {num_seqs, mb});
  b.attn.num_seqs = num_seqs;
  b.attn.max_seqlen_q = max_q;
  b.attn.max_seqlen_k = max_k;
  b.attn.all_decode = all_decode;
  b.attn.scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  b.attn.layout = {c.num_attention_heads, c.num_kv_heads, c.head_dim};

  Tensor logits = model_->forward(b, kv_->layers());
  logits_out->resize(static_cast<size_t>(n * c.vocab_size));
  if (n > 0) be.download(logits_out->data(), logits.data, logits_out->size() * sizeof(float));
}

}  // namespace rl
