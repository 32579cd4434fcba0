#include "perf/tp_cost.h"

#include "core/check.h"

namespace rl::perf {

double AllReduceLink::all_reduce_s(double bytes, int32_t n) const {
  if (n <= 1) return 0;
  return latency_s + 2.0 * (n - 1) / n * bytes / bus_bytes_per_s;
}

double AllReduceLink::all_gather_s(double bytes, int32_t n) const {
  if (n <= 1) return 0;
  return latency_s + static_cast<double>(n - 1) / n * bytes / bus_bytes_per_s;
}

ModelCost tp_rank_cost(const ModelCost& whole, const ModelConfig& c, int32_t n) {
  RL_CHECK(n >= 1 && c.num_attention_heads % n == 0);
  if (n == 1) return whole;
  ModelCost r = whole;
  // Norms (2 per layer + the final one) stay whole on every rank; everything else splits.
  const int64_t replicated = (2 * c.num_hidden_layers + 1) * c.hidden_size * 2;
  r.weight_bytes = (whole.weight_bytes - replicated) / n + replicated;
  r.expert_bytes = whole.expert_bytes / n;
  r.matmul_params = whole.matmul_params / n;
  r.logits_params = whole.logits_params / n;  // the vocab-parallel lm_head
  r.last_rows_params = whole.last_rows_params / n;
  r.attention_flops_per_key = whole.attention_flops_per_key / n;
  r.layer_attention_flops_per_key = whole.layer_attention_flops_per_key / n;
  // KV: the rank's heads of each layer.
  const int64_t kv = c.num_kv_heads > 0 ? c.num_kv_heads : 1;
  const int64_t rank_heads = n <= kv ? kv / n : 1;
  auto share = [&](int64_t bytes) { return bytes * rank_heads / kv; };
  r.kv_bytes_per_token = share(whole.kv_bytes_per_token);
  r.kv_cache_bytes_per_token = share(whole.kv_cache_bytes_per_token);
  for (int64_t& b : r.layer_kv_bytes) b = share(b);
  for (auto& g : r.kv_groups) g.bytes_per_token = share(g.bytes_per_token);
  return r;
}

TpStepCost tp_decode_step(const ModelCost& rank_cost, const ModelConfig& c, const Roof& roof, int32_t n,
                          const AllReduceLink& link, int64_t batch, int64_t context) {
  TpStepCost s;
  s.rank = decode_step(rank_cost, roof, batch, context);
  s.num_all_reduces = 2 * c.num_hidden_layers + 1;  // attention and MLP per layer, the embedding once
  s.all_reduce_bytes = static_cast<double>(batch) * static_cast<double>(c.hidden_size) * 2;
  s.collective_s = static_cast<double>(s.num_all_reduces) * link.all_reduce_s(s.all_reduce_bytes, n) +
                   link.all_gather_s(static_cast<double>(batch) * static_cast<double>(c.vocab_size) * 2, n);
  s.time_s = s.rank.time_s + s.collective_s;
  s.tokens_per_s = static_cast<double>(batch) / s.time_s;
  return s;
}

}  // namespace rl::perf
