// The one sampling path (design.md §8): every row of every step, whatever its parameters, is sampled by
// Backend::sample (ops.h, SampleRowParams) on the backend that computed the logits, with one counter-based RNG
// keyed by (seed, output position). Only token ids (and logprobs when asked) come back to the host.
//
// The Sampler owns the device side: per-row parameters and sparse lists (bias, min_tokens suppression, the
// allowed-token mask), the penalty state (output-token counts and prompt bits per penalty slot, updated on the
// device as tokens are sampled, so the host need not know the last token to penalize it), and the outputs.
// Host staging is pinned and double-buffered by parity: stage n+1 while the device still copies step n.
//
// Invariants: prepare(parity) only touches the parity's host buffers, whose previous use (two steps ago) has
// passed its fence; sample() reads only device buffers at fixed addresses (graph-capturable); the penalty slot
// of a row is initialized (init_slot) the first step it is sampled with that slot.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "backend/backend.h"
#include "kv/kv_types.h"
#include "sched/sampling_params.h"

namespace rl {

// One row to sample, described on the host.
struct SamplerRow {
  const SamplingParams* params = nullptr;
  std::span<const TokenId> prompt_token_ids;
  std::span<const TokenId> output_token_ids;  // known outputs (only read to initialize a penalty slot)
  int64_t num_outputs = 0;                    // outputs so far, pending ones included: the RNG counter
  std::span<const TokenId> eos_token_ids;
  uint64_t seed = 0;                          // the request's seed (or its engine-chosen stream)
  int32_t penalty_slot = -1;                  // >= 0 when the params have penalties
  bool init_slot = false;                     // reset the slot from the known tokens first
  // Structured-output hook: allowed tokens as bits [ceil(vocab / 32)] in host memory; null = all allowed.
  const uint32_t* allowed_mask = nullptr;
  // Prompt logprobs: >= 0 makes this a teacher-forced row (ops.h, SampleRowParams::forced_token) scoring this
  // token with forced_num_logprobs top alternatives; params then only names the request (nothing is sampled).
  int32_t forced_token = -1;
  int32_t forced_num_logprobs = 0;
};

struct TokenLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  TokenId token = 0;                        // < 0 when error is set (ops.h, kSampleNonFinite / kSampleNothingLeft)
  std::optional<float> logprob;             // set when params->logprobs is set
  std::vector<TokenLogprob> top_logprobs;   // [min(params->logprobs, vocab_size)], descending
  int32_t rank = 0;                         // forced rows: 1 + the number of tokens ranked before the token
  // Non-empty when the row cannot be sampled (NaN or +Inf logits from a numerically broken model, or nothing
  // left above -inf after the processors): the request fails with this message, token is meaningless.
  std::string error;
};

bool needs_penalty_slot(const SamplingParams& p);

class Sampler {
 public:
  // max_rows: rows per step (graph buckets included); num_slots: penalty slots (one per running request).
  Sampler(Backend* backend, int64_t max_rows, int64_t vocab_size, int64_t num_slots);
  ~Sampler();
  Sampler(const Sampler&) = delete;
  Sampler& operator=(const Sampler&) = delete;

  // Stages rows (padded with greedy rows up to num_rows) into the parity's pinned buffers and enqueues their
  // uploads and the penalty slot resets. Before sample() of the same step. params_upload: the rows' parameters'
  // upload is not enqueued but returned there, for the caller to enqueue with its own before sample() (one copy
  // for a step's staging).
  void prepare(std::span<const SamplerRow> rows, int64_t num_rows, int parity,
               Backend::PinnedUpload* params_upload = nullptr);
  // Enqueues sampling of logits [num_rows, vocab] (graph-capturable; num_rows as prepared).
  void sample(const Tensor& logits, int64_t num_rows);
  // Enqueues the download of the first num_rows results into the parity's pinned buffers (the tokens need none:
  // sample() writes them there itself, SampleRowParams::host_token).
  void fetch(int64_t num_rows, int parity);
  // The results of the parity's last fetch, once a fence recorded after it has passed.
  SampleResult result(int parity, int64_t row) const;
  // Device i32 [max_rows]: the tokens of the last sample(), read by the next step's pending input ids.
  Tensor sampled_ids() const;

 private:
  struct Host;  // pinned staging of one parity
  Backend* backend_;
  int64_t max_rows_, vocab_, words_, num_slots_;
  int64_t bias_cap_, suppress_cap_;
  DeviceBuffer d_params_, d_bias_ids_, d_bias_values_, d_suppress_, d_mask_;
  DeviceBuffer d_counts_, d_prompt_bits_, d_raw_, d_tokens_, d_logprobs_, d_top_ids_, d_top_logprobs_, d_ranks_;
  DeviceBuffer d_init_ids_;  // slot-reset token ids, grown as needed (not used by captured graphs)
  std::vector<std::unique_ptr<Host>> host_;  // [2]
  SampleBatch batch_;
  std::vector<int32_t> num_logprobs_[2];     // per fetched row: -1 or N (host side)
  bool any_logprobs_[2] = {false, false};
  bool any_forced_[2] = {false, false};
  std::vector<uint8_t> forced_[2];           // per fetched row: a forced row (host side)
};

}  // namespace rl
