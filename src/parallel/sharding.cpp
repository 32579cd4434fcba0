#include "parallel/sharding.h"

#include "core/check.h"

namespace rl::parallel {
namespace {

Status not_divisible(const std::string& what, int64_t value, int32_t n) {
  return Status::error("tensor parallel size " + std::to_string(n) + " does not divide " + what + " (" +
                       std::to_string(value) + ")");
}

}  // namespace

Result<TpPlan> make_tp_plan(const ShardDims& d, int32_t n, int32_t rank) {
  if (n < 1 || n > 1024) return Status::error("tensor parallel size must be in [1, 1024], got " + std::to_string(n));
  if (rank < 0 || rank >= n) {
    return Status::error("rank " + std::to_string(rank) + " is outside [0, " + std::to_string(n) + ")");
  }
  if (d.num_heads <= 0 || d.num_kv_heads <= 0 || d.head_dim <= 0 || d.intermediate_size <= 0 ||
      d.vocab_size <= 0 || d.hidden_size <= 0 || d.num_heads % d.num_kv_heads != 0) {
    return Status::error("tensor parallel: invalid model dimensions");
  }
  if (d.num_heads % n != 0) return not_divisible("num_attention_heads", d.num_heads, n);
  if (d.intermediate_size % n != 0) return not_divisible("intermediate_size", d.intermediate_size, n);
  TpPlan p;
  p.tp_size = n;
  p.rank = rank;
  p.head_dim = d.head_dim;
  p.num_heads = d.num_heads / n;
  p.head_begin = rank * p.num_heads;
  if (n <= d.num_kv_heads) {
    if (d.num_kv_heads % n != 0) return not_divisible("num_key_value_heads", d.num_kv_heads, n);
    p.num_kv_heads = d.num_kv_heads / n;
    p.kv_head_begin = rank * p.num_kv_heads;
  } else {
    if (n % d.num_kv_heads != 0) {
      return Status::error("tensor parallel size " + std::to_string(n) + " is larger than num_key_value_heads (" +
                           std::to_string(d.num_kv_heads) + ") and not a multiple of it");
    }
    p.kv_replicas = static_cast<int32_t>(n / d.num_kv_heads);
    p.num_kv_heads = 1;
    p.kv_head_begin = rank / p.kv_replicas;
  }
  p.intermediate = d.intermediate_size / n;
  p.intermediate_begin = rank * p.intermediate;
  p.padded_vocab = (d.vocab_size + n - 1) / n * n;
  p.vocab_per_rank = p.padded_vocab / n;
  p.vocab_begin = rank * p.vocab_per_rank;
  return p;
}

Slice shard_slice(const TpPlan& p, const ShardDims& d, WeightRole role, int64_t rows, int64_t cols) {
  Slice s{0, rows, 0, cols, rows};
  switch (role) {
    case WeightRole::kQProj:
    case WeightRole::kQBias:
      RL_CHECK(rows == d.num_heads * d.head_dim);
      s.row_begin = p.head_begin * d.head_dim;
      s.num_rows = s.valid_rows = p.num_heads * d.head_dim;
      break;
    case WeightRole::kKProj:
    case WeightRole::kVProj:
    case WeightRole::kKBias:
    case WeightRole::kVBias:
      RL_CHECK(rows == d.num_kv_heads * d.head_dim);
      s.row_begin = p.kv_head_begin * d.head_dim;
      s.num_rows = s.valid_rows = p.num_kv_heads * d.head_dim;
      break;
    case WeightRole::kOProj:
      RL_CHECK(cols == d.num_heads * d.head_dim);
      s.col_begin = p.head_begin * d.head_dim;
      s.num_cols = p.num_heads * d.head_dim;
      break;
    case WeightRole::kGateProj:
    case WeightRole::kUpProj:
      RL_CHECK(rows == d.intermediate_size);
      s.row_begin = p.intermediate_begin;
      s.num_rows = s.valid_rows = p.intermediate;
      break;
    case WeightRole::kDownProj:
      RL_CHECK(cols == d.intermediate_size);
      s.col_begin = p.intermediate_begin;
      s.num_cols = p.intermediate;
      break;
    case WeightRole::kEmbedding:
    case WeightRole::kLmHead: {
      RL_CHECK(rows == d.vocab_size);
      s.row_begin = p.vocab_begin;
      s.num_rows = p.vocab_per_rank;
      const int64_t left = d.vocab_size - p.vocab_begin;
      s.valid_rows = left <= 0 ? 0 : (left < p.vocab_per_rank ? left : p.vocab_per_rank);
      break;
    }
    case WeightRole::kReplicated:
      break;
  }
  return s;
}

bool needs_all_reduce(WeightRole role) { return role == WeightRole::kOProj || role == WeightRole::kDownProj; }

}  // namespace rl::parallel
