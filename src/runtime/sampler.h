// CPU sampler over f32 logits rows. Per row, in this order:
//   1. logit_bias is added;
//   2. min_tokens: while fewer than min_tokens outputs exist, EOS (unless ignore_eos) and stop_token_ids get -inf;
//   3. penalties: repetition (HF: over prompt + output tokens, positive logits divided, negative multiplied),
//      then frequency and presence (OpenAI: logit -= frequency * count + presence * (count > 0), over outputs);
//   4. temperature 0: argmax (ties → lowest id); otherwise logits / temperature, then top-k (ties at the k-th
//      value are kept, as HF/vLLM), top-p (the smallest prefix by descending probability whose mass reaches
//      top_p; the crossing token is kept), min-p (probability >= min_p * max probability), renormalize, draw.
// The random draw for a row depends only on (seed, number of output tokens), via a counter-based generator, so
// a seeded request samples the same tokens whatever else is in the batch. Unseeded rows use the sampler's own
// randomly seeded generator.
//
// Logprobs (NOTE: vLLM's default, "raw logprobs"): the chosen token's logprob and the top-N are taken from the
// log-softmax of the RAW model logits, before bias, penalties, temperature and filters, so they describe the
// model, not the sampling distribution.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kv/kv_types.h"
#include "sched/sampling_params.h"

namespace rl {

struct SamplerRow {
  const SamplingParams* params = nullptr;
  std::span<const TokenId> prompt_token_ids;
  std::span<const TokenId> output_token_ids;  // generated so far; its size is the RNG counter
  std::span<const TokenId> eos_token_ids;
};

struct TokenLogprob {
  TokenId token = 0;
  float logprob = 0.0f;
};

struct SampleResult {
  TokenId token = 0;
  std::optional<float> logprob;             // set when params->logprobs is set
  std::vector<TokenLogprob> top_logprobs;   // [min(params->logprobs, vocab_size)], descending
  // Non-empty when the row cannot be sampled (NaN or +Inf logits from a numerically broken model, or nothing
  // left above -inf after the processors): the request fails with this message, token is meaningless.
  std::string error;
};

// A token of the filtered distribution and its renormalized probability.
struct TokenProb {
  TokenId token = 0;
  float prob = 0.0f;
};

class Sampler {
 public:
  Sampler();  // unseeded rows draw from a generator seeded by std::random_device

  // logits: [rows.size()][vocab_size], row-major; processed in place (the rows hold garbage afterwards).
  std::vector<SampleResult> sample(std::span<float> logits, int32_t vocab_size, std::span<const SamplerRow> rows);

  // Steps 1-3 above on one row.
  void apply_processors(std::span<float> logits, const SamplerRow& row);

  // Step 4's filters on temperature-scaled logits: the kept tokens with renormalized probabilities, in a
  // deterministic order (descending after top-k; id order, then the top-p boundary bin, otherwise).
  std::vector<TokenProb> filtered_distribution(std::span<const float> scaled_logits, int32_t top_k, float top_p,
                                               float min_p);

 private:
  // Inverse-CDF draw over the whole vocabulary (only min-p filtering), in id order, without materializing it.
  TokenId draw_unfiltered(std::span<const float> scaled_logits, float min_p, double u) const;
  // idx_ = the k best token ids by (logit desc, id asc), in that order.
  void select_top(std::span<const float> logits, int32_t k);

  std::mt19937_64 unseeded_rng_;
  std::vector<int32_t> counts_;   // [vocab_size] scratch: output token counts, zero between rows
  std::vector<uint8_t> seen_;     // [vocab_size] scratch: prompt+output membership, zero between rows
  std::vector<int32_t> idx_;      // [vocab_size] scratch: token ids for selection
  std::vector<float> raw_;        // [vocab_size] scratch: raw logits kept for logprobs
  std::vector<int32_t> boundary_; // scratch: tokens of the top-p crossing bin
  std::vector<double> bin_mass_;  // scratch: probability mass per top-p bin
};

// The counter-based uniform draw in [0, 1) used for a seeded row at a given step (exposed for tests).
double sampler_uniform(uint64_t seed, uint64_t step);

}  // namespace rl
