// ModelRunner: turns a host-side description of one step (which tokens of which sequences, their block tables)
// into a flattened ForwardBatch in backend memory, runs the model and samples (launch), or returns the logits
// on the host (step). Staging is a pinned host buffer per parity and one device buffer laid out alike at
// offsets fixed by the limits (ids, positions, slots, cu_seqlens_q, seq_lens_k, logits_indices, block tables),
// uploaded with one asynchronous copy per step; a step never allocates. Hybrid KV: every KV group has its slot
// mapping ([group][token]) and its block table (rows [seq][group][max_blocks_per_seq]). On CUDA, all-decode
// steps run as CUDA graphs per batch-size bucket (runtime/cuda_graphs.h) unless
// enforce_eager: the batch is padded to the bucket with rows that write no KV (slot -1), read block 0 with
// seq_len 1 and whose logits are never downloaded; rows never mix in any op, so padding cannot change real rows.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "model/model.h"
#include "runtime/cuda_graphs.h"
#include "runtime/kv_storage.h"
#include "runtime/sampler.h"

namespace rl {

// One sequence's share of a step: tokens [num_computed, num_computed + token_ids.size()) of it.
struct SeqStep {
  const int32_t* token_ids = nullptr;  // the new tokens fed this step
  int64_t num_new_tokens = 0;
  int64_t num_computed = 0;            // tokens already in the KV cache before this step
  const int32_t* block_table = nullptr;
  int64_t num_blocks = 0;
  // Hybrid KV (KvStorage::num_groups() > 1): the block tables of KV groups 1.., num_blocks entries each.
  const int32_t* window_tables[kMaxKvGroups - 1] = {};
  bool want_logits = true;             // compute logits for the last new token
  bool all_logits = false;             // compute logits for every new token (teacher-forced checks)
  // A token id < 0 (kPendingToken) was sampled by the previous step and is read on the device from that
  // step's sampled ids, row pending_source.
  int32_t pending_source = -1;
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
  ~ModelRunner();
  ModelRunner(const ModelRunner&) = delete;
  ModelRunner& operator=(const ModelRunner&) = delete;

  // Runs one step. logits_out receives [num sequences with want_logits, vocab] f32 rows in order.
  void step(const std::vector<SeqStep>& seqs, std::vector<float>* logits_out);

  // The pipelined step (design.md §8): enqueues the staging and the sampling parameters as one upload (pinned,
  // parity's buffers; it resolves the pending input ids from the previous step's sampled ids), the forward pass,
  // the sampling of every want_logits row (rows[i] for the i-th such sequence), which writes the sampled ids into
  // the sampler's parity buffers, and the download of any logprobs, then returns without waiting. An all-decode
  // step runs as one CUDA graph per batch bucket, sampling included. The parity's host buffers must be free
  // (the step that last used them has passed its fence). Returns the number of sampled rows.
  int64_t launch(const std::vector<SeqStep>& seqs, std::span<const SamplerRow> rows, Sampler* sampler, int parity);

  const RunnerLimits& limits() const { return limits_; }
  Model& model() { return *model_; }
  // Steps that replayed a CUDA graph (for tests and statistics).
  int64_t num_graph_steps() const { return num_graph_steps_; }
  // Kernels in the decode graph of the bucket that holds num_seqs sequences (one sequence: its short-context graph
  // when that one was captured); 0 when none was captured.
  int64_t decode_graph_kernels(int64_t num_seqs) const {
    if (num_seqs == 1 && short_graphs_ && short_graphs_->captured(1)) return short_graphs_->num_kernels(1);
    return graphs_ ? graphs_->num_kernels(graphs_->bucket_for(num_seqs)) : 0;
  }

 private:
  // Element offsets of the staging fields (the same on host and device).
  struct Offsets {
    int64_t ids, pos, slots, cu, lens, logit_idx, logit_cu, tables, total;
    int64_t token_stride;  // elements between the slot mappings of consecutive groups
  };
  // Fills the host staging for seqs padded to num_rows sequences (num_rows == seqs.size() when not padding).
  // Returns the number of tokens; *num_logits, *max_q, *max_k and *all_decode describe the real rows.
  int64_t stage(int32_t* h, const std::vector<SeqStep>& seqs, int64_t num_rows, int64_t* num_logits,
                int64_t* max_q, int64_t* max_k, bool* all_decode, bool* any_pending);
  size_t upload_bytes(int64_t num_rows) const;
  ForwardBatch make_batch(int64_t num_tokens, int64_t num_seqs, int64_t num_logits, int64_t max_q,
                          int64_t max_k, bool all_decode) const;

  Model* model_;
  KvStorage* kv_;
  RunnerLimits limits_;
  Offsets off_{};
  int32_t* h_staging_[2] = {nullptr, nullptr};  // pinned, by parity
  DeviceBuffer d_staging_;
  std::unique_ptr<DecodeGraphs> graphs_;  // null on CPU or with enforce_eager
  // Single-sequence steps of at most short_context_ keys (Model::short_decode_context) replay these instead.
  std::unique_ptr<DecodeGraphs> short_graphs_;
  int64_t short_context_ = 0;
  int64_t num_graph_steps_ = 0;
};

}  // namespace rl
