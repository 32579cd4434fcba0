// ModelRunner: turns a host-side description of one step (which tokens of which sequences, their block tables)
// into a flattened ForwardBatch in backend memory, runs the model and returns the logits on the host.
// Staging buffers are sized once (max tokens, max sequences, max blocks per sequence); a step never allocates.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"
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
};

class ModelRunner {
 public:
  ModelRunner(Model* model, KvStorage* kv, const RunnerLimits& limits);

  // Runs one step. logits_out receives [num sequences with want_logits, vocab] f32 rows in order.
  void step(const std::vector<SeqStep>& seqs, std::vector<float>* logits_out);

  const RunnerLimits& limits() const { return limits_; }
  Model& model() { return *model_; }

 private:
  Model* model_;
  KvStorage* kv_;
  RunnerLimits limits_;
  // Host staging, then one upload per field.
  std::vector<int32_t> h_ids_, h_pos_, h_slots_, h_cu_, h_lens_, h_tables_, h_logit_idx_;
  DeviceBuffer d_ids_, d_pos_, d_slots_, d_cu_, d_lens_, d_tables_, d_logit_idx_;
};

}  // namespace rl
