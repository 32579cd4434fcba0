// The decoder every architecture composes: token embedding (+ learned positions), blocks of
// norm → attention → norm → feed-forward (dense MLP or MoE) around one residual stream, final norm, lm_head.
// Arch files (src/model/arch) parse their hyper-parameters, fill the blocks by their checkpoints' names and
// hand the result over as a Model. The workspace is sized from the blocks (workspace_bytes) and the KV spec is
// the blocks' attention specs.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "model/layers/attention.h"
#include "model/layers/mla.h"
#include "model/layers/mlp.h"
#include "model/layers/moe.h"
#include "model/layers/norm.h"
#include "model/model.h"
#include "model/weights.h"

namespace rl {

struct DecoderBlock {
  Norm attn_norm, ffn_norm;
  Attention attn;
  std::unique_ptr<MlaAttention> mla;  // set: the block attends through MLA instead of attn
  std::unique_ptr<Mlp> mlp;  // exactly one of mlp and moe
  std::unique_ptr<Moe> moe;
};

class Decoder final : public Model {
 public:
  Decoder(const ModelConfig& c, Backend* b) : config_(c), backend_(b) {}

  // Filled by the architecture before finish_load().
  Tensor embed, pos_embed, lm_head;  // pos_embed: [max_positions, hidden] or empty (RoPE)
  Norm final_norm;
  std::vector<DecoderBlock> blocks;
  // Multi-token-prediction modules (DeepSeek-V3's num_nextn_predict_layers): the next token's embedding and the
  // previous depth's hidden state, each normed, projected from 2h to h, through one more block, then the model's
  // lm_head after head_norm. Loaded with the checkpoint, never run by forward(): a speculative-decoding Proposer
  // (spec/proposer.h) is their consumer once it exists.
  struct MtpModule {
    Norm enorm, hnorm, head_norm;
    Tensor eh_proj;  // [h, 2h]
    DecoderBlock block;
  };
  std::vector<MtpModule> mtp;

  // Tensor parallelism (docs/distributed.md): this decoder is one rank's shard (embed and lm_head hold its
  // vocabulary rows); forward() all-reduces the embedding, the attention and the feed-forward outputs and
  // all-gathers the logits through tp->comm. Null or one rank: the whole model, no collective.
  void set_tensor_parallel(const TensorParallel* tp);
  // Records the loaded weights and uploads RoPE frequencies (none when no block uses RoPE).
  void finish_load(WeightLoader& w, const std::vector<float>& inv_freq);

  const ModelConfig& config() const override { return config_; }
  Backend& backend() const override { return *backend_; }
  uint64_t weight_bytes() const override { return weight_bytes_; }
  std::vector<KvLayerSpec> kv_spec() const override;
  uint64_t workspace_bytes(int64_t max_num_tokens, int64_t max_num_logits) const override;
  void reserve(int64_t max_num_tokens, int64_t max_num_logits) override;
  Tensor forward(const ForwardBatch& batch, std::span<const KvLayer> kv) override;
  // Why batch-1 decode steps do not run the backend's dense stack (Backend::dense_stack_decode, one kernel for all
  // layers); empty when they do (outside deterministic mode). Decided once, in finish_load.
  const std::string& dense_stack_note() const { return stack_note_; }
  int64_t short_decode_context() const override { return stack_ ? stack_max_context_ : 0; }

 private:
  struct Plan;  // offsets of every buffer in the workspace
  Plan plan(int64_t max_tokens, int64_t max_logits) const;

  // The group's collective; aborts with the collective's message if it fails (every rank runs the same layers,
  // so a failure is a broken group, not bad input).
  void all_reduce(const Tensor& x) const;

  ModelConfig config_;
  Backend* backend_;
  std::optional<TensorParallel> tp_;  // set: one rank of a group of > 1
  uint64_t weight_bytes_ = 0;
  std::vector<DeviceBuffer> weight_buffers_;
  DeviceBuffer inv_freq_;
  int64_t max_tokens_ = 0, max_logits_ = 0;
  DeviceBuffer workspace_;
  // The layers as a dense stack, when the architecture and the backend allow it (prepare_dense_stack).
  void prepare_dense_stack();
  std::optional<DenseStack> stack_;
  DeviceBuffer stack_scratch_;
  std::string stack_note_;
  int64_t stack_max_context_ = 0;
  bool stack_fp8_ = false;  // the backend's stack also runs over an FP8 KV cache for this model
};

}  // namespace rl
