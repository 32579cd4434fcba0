// The draft-model proposer (issue 18): a smaller model with the target's tokenizer, run by the engine on the same
// backend, proposes k tokens per decoding request by greedy decoding. Its KV lives in its own storage with as
// many blocks as the target's, addressed through the target's block tables: the target's scheduler allocates the
// slots for the drafts and rolls back the rejected ones, and the draft model never holds blocks of its own.
//
// Invariants: state_[key] = the number of leading positions of request `key` whose draft KV is written with the
// request's verified tokens; it starts at 0 for every admission or preemption (forget), so a prefix-cache hit in
// the target is recomputed by the draft model (a cached block's draft KV may be stale); verified() lowers it to
// the target's verified length after each verification.
//
// The proposal is greedy, so q is a point mass and the engine's verification is exact at every temperature.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "model/model.h"
#include "runtime/kv_storage.h"
#include "runtime/model_runner.h"
#include "runtime/sampler.h"
#include "spec/proposer.h"

namespace rl {

class DraftModelProposer final : public spec::Proposer {
 public:
  // model: the loaded draft model; num_blocks and block_size: the target's KV geometry.
  DraftModelProposer(std::unique_ptr<Model> model, int64_t num_blocks, int64_t block_size, DType kv_dtype,
                     const RunnerLimits& limits, int32_t num_speculative_tokens);
  std::string name() const override { return "draft"; }
  bool deterministic() const override { return true; }
  void propose(std::span<const spec::ProposalInput> inputs, std::vector<spec::Proposal>* out) override;
  void verified(uint64_t key, int32_t num_tokens) override;
  void forget(uint64_t key) override { state_.erase(key); }

  const Model& model() const { return *model_; }

 private:
  // A launched draft step: per sampled row, the proposal its greedy token is appended to (null: none).
  struct Owner {
    std::vector<TokenId>* drafts = nullptr;
  };
  struct Launched {
    int parity = 0;
    uint64_t fence = 0;
    int64_t rows = 0;
    std::vector<Owner> owners;
  };
  // Launches one draft step without waiting (after reading the results of the step two launches back, whose
  // parity it reuses); returns its index in steps_.
  int64_t enqueue(const std::vector<SeqStep>& seqs, std::vector<Owner> owners);
  // Waits for the launched steps up to index `upto` and appends their tokens to their owners, in launch order.
  void collect(int64_t upto);

  std::unique_ptr<Model> model_;
  std::unique_ptr<KvStorage> kv_;
  std::unique_ptr<ModelRunner> runner_;
  std::unique_ptr<Sampler> sampler_;
  int32_t k_;
  int parity_ = 0;
  std::vector<Launched> steps_;  // this proposal's launches
  int64_t collected_ = 0;        // steps_[0, collected_) have been read
  SamplingParams greedy_;
  std::unordered_map<uint64_t, int32_t> state_;
};

// Checks that a draft model can propose for the target: same vocabulary size and the same tokenizer.json bytes
// (when the target has one). The error names both folders.
Status check_draft_compatible(const ModelConfig& target, const std::string& target_dir, const ModelConfig& draft,
                              const std::string& draft_dir);

}  // namespace rl
