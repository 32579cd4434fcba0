#include "runtime/draft_proposer.h"

#include <algorithm>

#include "core/check.h"
#include "core/file.h"
#include "sched/request.h"

namespace rl {

DraftModelProposer::DraftModelProposer(std::unique_ptr<Model> model, int64_t num_blocks, int64_t block_size,
                                       DType kv_dtype, const RunnerLimits& limits, int32_t num_speculative_tokens)
    : model_(std::move(model)), k_(num_speculative_tokens) {
  kv_ = std::make_unique<KvStorage>(&model_->backend(), model_->config(), num_blocks, block_size, kv_dtype);
  runner_ = std::make_unique<ModelRunner>(model_.get(), kv_.get(), limits);
  sampler_ = std::make_unique<Sampler>(&model_->backend(), limits.max_num_seqs, model_->config().vocab_size, 1);
  greedy_.temperature = 0.0f;
}

int64_t DraftModelProposer::enqueue(const std::vector<SeqStep>& seqs, std::vector<Owner> owners) {
  const int64_t index = static_cast<int64_t>(steps_.size());
  // The parity's staging and result buffers are reused from two launches ago: that step must be read first.
  if (index >= 2) collect(index - 2);
  std::vector<SamplerRow> rows;
  for (const SeqStep& s : seqs) {
    if (!s.want_logits) continue;
    SamplerRow row;
    row.params = &greedy_;
    rows.push_back(row);
  }
  RL_CHECK(rows.size() == owners.size());
  Backend& be = model_->backend();
  Launched l;
  l.parity = parity_;
  l.rows = runner_->launch(seqs, rows, sampler_.get(), parity_);
  l.fence = be.record_fence();
  l.owners = std::move(owners);
  parity_ ^= 1;
  steps_.push_back(std::move(l));
  return index;
}

void DraftModelProposer::collect(int64_t upto) {
  Backend& be = model_->backend();
  for (; collected_ <= upto; ++collected_) {
    Launched& l = steps_[static_cast<size_t>(collected_)];
    be.wait_fence(l.fence);
    for (int64_t i = 0; i < l.rows; ++i) {
      const Owner& o = l.owners[static_cast<size_t>(i)];
      if (o.drafts != nullptr) o.drafts->push_back(sampler_->result(l.parity, i).token);
    }
  }
}

void DraftModelProposer::propose(std::span<const spec::ProposalInput> inputs, std::vector<spec::Proposal>* out) {
  out->assign(inputs.size(), spec::Proposal{});
  struct Work {
    size_t index;
    std::vector<TokenId> ctx;  // prompt ++ output
    int32_t fed;               // positions whose draft KV is written (or enqueued)
    int32_t k;
    int32_t planned = 0;       // drafts enqueued (the launched steps that will give them)
    int64_t last_step = -1;    // the launch and sample row that give the latest planned draft
    int32_t last_row = -1;
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
  steps_.clear();
  collected_ = 0;
  const RunnerLimits& lim = runner_->limits();
  // Every step is enqueued without waiting for its results (design.md §8's pipelining, within one proposal): a
  // draft step reads its input token from the previous step's sampled ids on the device, and the host reads a
  // step's results only when its parity's buffers are needed again, two launches later, or at the end. The GPU
  // runs the k draft steps back to back while the host stages the next.
  // Catch up on the verified tokens the draft has not seen (the whole prompt for a new request), in steps of at
  // most max_num_tokens tokens; a request whose catch-up ends in a step gets its first draft from it.
  // A short catch-up (the usual case: the 1 or 2 tokens verified since the last proposal) runs as single-token
  // decode rows, so the step stays all-decode and replays a CUDA graph; only its last row's token is used.
  constexpr int32_t kMaxDecodeCatchUp = 8;
  for (;;) {
    std::vector<SeqStep> seqs;
    std::vector<Owner> owners;  // per want_logits row: whose draft it gives, or none
    std::vector<Work*> last_of;  // per want_logits row: the work whose first draft it gives, or null
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
          const bool last = j + 1 == remaining;
          owners.push_back(Owner{last ? &(*out)[w.index].tokens : nullptr});
          last_of.push_back(last ? &w : nullptr);
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
      if (st.want_logits) {
        owners.push_back(Owner{&(*out)[w.index].tokens});
        last_of.push_back(&w);
      }
      w.fed += n;
      budget -= n;
    }
    if (seqs.empty()) break;
    const int64_t step = enqueue(seqs, std::move(owners));
    for (size_t r = 0; r < last_of.size(); ++r) {
      if (last_of[r] == nullptr) continue;
      last_of[r]->planned = 1;
      last_of[r]->last_step = step;
      last_of[r]->last_row = static_cast<int32_t>(r);
    }
  }
  // Then one single-token step per further draft: draft j - 1 is fed at position L - 1 + j, read on the device
  // from the step that drew it when that is the previous launch, else from the host (a catch-up that took
  // several steps).
  static const int32_t kPending = kPendingToken;
  for (int32_t j = 1; j < k_; ++j) {
    std::vector<SeqStep> seqs;
    std::vector<Owner> owners;
    std::vector<Work*> active;
    const int64_t prev = static_cast<int64_t>(steps_.size()) - 1;
    for (Work& w : work) {
      if (w.planned != j || j >= w.k) continue;
      const spec::ProposalInput& in = inputs[w.index];
      std::vector<TokenId>& drafts = (*out)[w.index].tokens;
      SeqStep st;
      if (w.last_step == prev) {
        st.token_ids = &kPending;
        st.pending_source = w.last_row;
      } else {
        collect(w.last_step);
        if (static_cast<int32_t>(drafts.size()) != j || drafts.back() < 0) continue;
        st.token_ids = &drafts.back();
      }
      st.num_new_tokens = 1;
      st.num_computed = w.fed;
      st.block_table = in.block_table.data();
      st.num_blocks = static_cast<int64_t>(in.block_table.size());
      seqs.push_back(st);
      owners.push_back(Owner{&drafts});
      active.push_back(&w);
    }
    if (seqs.empty()) break;
    const int64_t step = enqueue(seqs, std::move(owners));
    for (size_t a = 0; a < active.size(); ++a) {
      ++active[a]->fed;
      ++active[a]->planned;
      active[a]->last_step = step;
      active[a]->last_row = static_cast<int32_t>(a);
    }
  }
  collect(static_cast<int64_t>(steps_.size()) - 1);
  steps_.clear();
  for (Work& w : work) {
    std::vector<TokenId>& drafts = (*out)[w.index].tokens;
    // A draft model with broken logits proposes nothing from its first broken draft on (a failed row's pending
    // input became token 0 on the device: the drafts after it are dropped with it, and the target decodes on).
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
