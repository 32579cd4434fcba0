// ModelRunner: turns a host-side description of one step (which tokens of which sequences, their block tables)
// into a flattened ForwardBatch in backend memory, runs the model and returns the logits on the host.
// Staging is one host vector and one device buffer laid out alike at offsets fixed by the limits (ids, positions,
// slots, cu_seqlens_q, seq_lens_k, logits_indices, block tables), uploaded with one copy per step; a step never
// allocates. On CUDA, all-decode steps run as CUDA graphs per batch-size bucket (runtime/cuda_graphs.h) unless
// enforce_eager: the batch is padded to the bucket with rows that write no KV (slot -1), read block 0 with
// seq_len 1 and whose logits are never downloaded; rows never mix in any op, so padding cannot change real rows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/cuda_graphs.h"
#include "runtime/kv_storage.h"

namespace rl {

// One sequence's share of a step: tokens [num_computed, num_computed + token_ids.size()) of it.
struct SeqStep {
  const int32_t* token_ids = nullptr;  // the new tokens fed this step
  int64_t num_new_tokens = 0;
  int64_t num_computed = 0;            // tokens already in the KV cache before this step
  const int32_t* block_table = nullptr;
  int64_t num_blocks = 0;
  bool want_logits = true;             // compute logits for the last new token
  bool all_logits = false;             // compute logits for every new token (teacher-forced checks)
};

struct RunnerLimits {
  int64_t max_num_tokens = 2048;   // per step
  int64_t max_num_seqs = 64;
  int64_t max_blocks_per_seq = 0;  // 0: derived from max_model_len
  int64_t max_model_len = 4096;
  int64_t max_num_logits = 0;      // 0: max_num_seqs (one per sequence); more for all_logits steps
  bool enforce_eager = false;      // never use CUDA graphs
};

class ModelRunner {
 public:
  ModelRunner(Model* model, KvStorage* kv, const RunnerLimits& limits);

  // Runs one step. logits_out receives [num sequences with want_logits, vocab] f32 rows in order.
  void step(const std::vector<SeqStep>& seqs, std::vector<float>* logits_out);
  // The same step, leaving the f32 logits [*num_logits, vocab] in backend memory (valid until the next step),
  // so a device-side sampler can avoid downloading them.
  Tensor step_device(const std::vector<SeqStep>& seqs, int64_t* num_logits);

  const RunnerLimits& limits() const { return limits_; }
  Model& model() { return *model_; }
  // Steps that replayed a CUDA graph (for tests and statistics).
  int64_t num_graph_steps() const { return num_graph_steps_; }

 private:
  // Element offsets of the staging fields (the same on host and device).
  struct Offsets {
    int64_t ids, pos, slots, cu, lens, logit_idx, tables, total;
  };
  // Fills the host staging for seqs padded to num_rows sequences (num_rows == seqs.size() when not padding).
  // Returns the number of tokens; *num_logits, *max_q, *max_k and *all_decode describe the real rows.
  int64_t stage(const std::vector<SeqStep>& seqs, int64_t num_rows, int64_t* num_logits, int64_t* max_q,
                int64_t* max_k, bool* all_decode);
  ForwardBatch make_batch(int64_t num_tokens, int64_t num_seqs, int64_t num_logits, int64_t max_q,
                          int64_t max_k, bool all_decode) const;

  Model* model_;
  KvStorage* kv_;
  RunnerLimits limits_;
  Offsets off_{};
  std::vector<int32_t> h_staging_;
  DeviceBuffer d_staging_;
  std::unique_ptr<DecodeGraphs> graphs_;  // null on CPU or with enforce_eager
  void* graph_logits_ = nullptr;           // where every captured graph leaves its f32 logits
  int64_t num_graph_steps_ = 0;
};

}  // namespace rl
