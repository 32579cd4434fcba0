#include "runtime/draft_proposer.h"

#include <algorithm>

#include "core/check.h"
#include "core/file.h"

namespace rl {

DraftModelProposer::DraftModelProposer(std::unique_ptr<Model> model, int64_t num_blocks, int64_t block_size,
                                       DType kv_dtype, const RunnerLimits& limits, int32_t num_speculative_tokens)
    : model_(std::move(model)), k_(num_speculative_tokens) {
  kv_ = std::make_unique<KvStorage>(&model_->backend(), model_->config(), num_blocks, block_size, kv_dtype);
  runner_ = std::make_unique<ModelRunner>(model_.get(), kv_.get(), limits);
  sampler_ = std::make_unique<Sampler>(&model_->backend(), limits.max_num_seqs, model_->config().vocab_size, 1);
  greedy_.temperature = 0.0f;
}

std::vector<TokenId> DraftModelProposer::run(const std::vector<SeqStep>& seqs) {
  std::vector<SamplerRow> rows;
  for (const SeqStep& s : seqs) {
    if (!s.want_logits) continue;
    SamplerRow row;
    row.params = &greedy_;
    rows.push_back(row);
  }
  Backend& be = model_->backend();
  const int64_t n = runner_->launch(seqs, rows, sampler_.get(), parity_);
  be.wait_fence(be.record_fence());
  std::vector<TokenId> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) out[static_cast<size_t>(i)] = sampler_->result(parity_, i).token;
  parity_ ^= 1;
  return out;
}

void DraftModelProposer::propose(std::span<const spec::ProposalInput> inputs, std::vector<spec::Proposal>* out) {
  out->assign(inputs.size(), spec::Proposal{});
  struct Work {
    size_t index;
    std::vector<TokenId> ctx;  // prompt ++ output
    int32_t fed;               // positions whose draft KV is written
    int32_t k;
  };
  std::vector<Work> work;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const spec::ProposalInput& in = inputs[i];
    const int32_t k = std::min(in.max_draft_tokens, k_);
    if (k <= 0) continue;
    Work w{i, {}, 0, k};
    w.ctx.assign(in.prompt.begin(), in.prompt.end());
    w.ctx.insert(w.ctx.end(), in.output.begin(), in.output.end());
    auto it = state_.find(in.key);
    // Position L - 1 (the last known token) is always fed: its logits give the first draft.
    w.fed = std::min(it == state_.end() ? 0 : it->second, static_cast<int32_t>(w.ctx.size()) - 1);
    work.push_back(std::move(w));
  }
  const RunnerLimits& lim = runner_->limits();
  // Catch up on the verified tokens the draft has not seen (the whole prompt for a new request), in steps of at
  // most max_num_tokens tokens; a request whose catch-up ends in a step gets its first draft from it.
  // A short catch-up (the usual case: the 1 or 2 tokens verified since the last proposal) runs as single-token
  // decode rows, so the step stays all-decode and replays a CUDA graph; only its last row's token is used.
  constexpr int32_t kMaxDecodeCatchUp = 8;
  for (;;) {
    std::vector<SeqStep> seqs;
    std::vector<Work*> wanting;  // per want_logits row: whose first draft it gives, or null
    int64_t budget = lim.max_num_tokens;
    for (Work& w : work) {
      const int32_t len = static_cast<int32_t>(w.ctx.size());
      if (w.fed >= len || budget <= 0) continue;
      const spec::ProposalInput& in = inputs[w.index];
      SeqStep st;
      st.block_table = in.block_table.data();
      st.num_blocks = static_cast<int64_t>(in.block_table.size());
      const int32_t remaining = len - w.fed;
      if (remaining <= kMaxDecodeCatchUp && remaining <= budget &&
          static_cast<int64_t>(seqs.size()) + remaining <= lim.max_num_seqs) {
        for (int32_t j = 0; j < remaining; ++j) {
          st.token_ids = w.ctx.data() + w.fed + j;
          st.num_new_tokens = 1;
          st.num_computed = w.fed + j;
          st.want_logits = true;
          seqs.push_back(st);
          wanting.push_back(j + 1 == remaining ? &w : nullptr);
        }
        w.fed = len;
        budget -= remaining;
        continue;
      }
      if (static_cast<int64_t>(seqs.size()) >= lim.max_num_seqs) continue;
      const int32_t n = static_cast<int32_t>(std::min<int64_t>(remaining, budget));
      st.token_ids = w.ctx.data() + w.fed;
      st.num_new_tokens = n;
      st.num_computed = w.fed;
      st.want_logits = w.fed + n == len;
      seqs.push_back(st);
      if (st.want_logits) wanting.push_back(&w);
      w.fed += n;
      budget -= n;
    }
    if (seqs.empty()) break;
    const std::vector<TokenId> ids = run(seqs);
    for (size_t j = 0; j < wanting.size(); ++j) {
      if (wanting[j] != nullptr) (*out)[wanting[j]->index].tokens.push_back(ids[j]);
    }
  }
  // Then one single-token step per further draft: draft j - 1 is fed at position L - 1 + j.
  for (int32_t j = 1; j < k_; ++j) {
    std::vector<SeqStep> seqs;
    std::vector<Work*> active;
    for (Work& w : work) {
      std::vector<TokenId>& drafts = (*out)[w.index].tokens;
      if (static_cast<int32_t>(drafts.size()) != j || j >= w.k || drafts.back() < 0) continue;
      const spec::ProposalInput& in = inputs[w.index];
      SeqStep st;
      st.token_ids = &drafts.back();
      st.num_new_tokens = 1;
      st.num_computed = w.fed;
      st.block_table = in.block_table.data();
      st.num_blocks = static_cast<int64_t>(in.block_table.size());
      seqs.push_back(st);
      active.push_back(&w);
      ++w.fed;
    }
    if (seqs.empty()) break;
    const std::vector<TokenId> ids = run(seqs);
    for (size_t a = 0; a < active.size(); ++a) (*out)[active[a]->index].tokens.push_back(ids[a]);
  }
  for (Work& w : work) {
    std::vector<TokenId>& drafts = (*out)[w.index].tokens;
    // A draft model with broken logits proposes nothing (the target decodes on as usual).
    const auto bad = std::find_if(drafts.begin(), drafts.end(), [](TokenId t) { return t < 0; });
    drafts.erase(bad, drafts.end());
    state_[inputs[w.index].key] = w.fed;
  }
}

void DraftModelProposer::verified(uint64_t key, int32_t num_tokens) {
  auto it = state_.find(key);
  if (it != state_.end()) it->second = std::min(it->second, num_tokens);
}

Status check_draft_compatible(const ModelConfig& target, const std::string& target_dir, const ModelConfig& draft,
                              const std::string& draft_dir) {
  if (target.vocab_size != draft.vocab_size) {
    return Status::error("draft model " + draft_dir + " has vocab_size " + std::to_string(draft.vocab_size) +
                         ", the target " + target_dir + " has " + std::to_string(target.vocab_size) +
                         ": speculative decoding needs the same tokenizer");
  }
  const std::string tt = path_join(target_dir, "tokenizer.json"), dt = path_join(draft_dir, "tokenizer.json");
  if (file_exists(tt)) {
    if (!file_exists(dt)) {
      return Status::error("draft model " + draft_dir + " has no tokenizer.json; the target " + target_dir +
                           " has one: speculative decoding needs the same tokenizer");
    }
    RL_ASSIGN_OR_RETURN(std::string a, read_file(tt));
    RL_ASSIGN_OR_RETURN(std::string b, read_file(dt));
    if (a != b) {
      return Status::error("draft model " + draft_dir + " has a different tokenizer.json from the target " +
                           target_dir + ": speculative decoding needs the same tokenizer");
    }
  }
  return Status::ok();
}

}  // namespace rl
