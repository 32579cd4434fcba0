#include "model/rope.h"

#include <algorithm>
#include <cmath>

namespace rl {

namespace {

double yarn_get_mscale(double scale, double mscale) { return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0; }

// transformers' _compute_yarn_parameters: blend of interpolated and extrapolated frequencies over a linear
// ramp between the correction dims of beta_fast and beta_slow rotations.
void apply_yarn(const RopeScaling& rs, double base, int64_t dim, std::vector<float>& inv) {
  const double factor = rs.factor;
  const double orig = static_cast<double>(rs.original_max_position_embeddings);
  auto correction_dim = [&](double rot) {
    return (static_cast<double>(dim) * std::log(orig / (rot * 2 * M_PI))) / (2 * std::log(base));
  };
  double low = correction_dim(rs.beta_fast), high = correction_dim(rs.beta_slow);
  if (rs.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(dim - 1));
  float lo = static_cast<float>(low), hi = static_cast<float>(high);
  if (lo == hi) hi += 0.001f;
  for (size_t i = 0; i < inv.size(); ++i) {
    const float extrapolation = inv[i];
    const float interpolation = 1.0f / (static_cast<float>(factor) * (1.0f / inv[i]));
    const float ramp = std::clamp((static_cast<float>(i) - lo) / (hi - lo), 0.0f, 1.0f);
    const float extra_factor = 1.0f - ramp;
    inv[i] = interpolation * (1.0f - extra_factor) + extrapolation * extra_factor;
  }
}

}  // namespace

std::vector<float> rope_inv_freq(const ModelConfig& c, int64_t rotary_dim) {
  const int64_t d = rotary_dim > 0 ? rotary_dim : c.head_dim, half = d / 2;
  std::vector<float> inv(static_cast<size_t>(half));
  // transformers: 1 / base ** (arange(0, d, 2).float() / d), evaluated in f32.
  const float base = static_cast<float>(c.rope_theta);
  for (int64_t i = 0; i < half; ++i) {
    float expo = static_cast<float>(2 * i) / static_cast<float>(d);
    inv[static_cast<size_t>(i)] = 1.0f / std::pow(base, expo);
  }
  if (c.rope_scaling.type == RopeScalingType::kYarn) {
    apply_yarn(c.rope_scaling, c.rope_theta, d, inv);
  } else if (c.rope_scaling.type == RopeScalingType::kLlama3) {
    const auto& rs = c.rope_scaling;
    const float factor = static_cast<float>(rs.factor);
    const float low = static_cast<float>(rs.low_freq_factor), high = static_cast<float>(rs.high_freq_factor);
    const float old_ctx = static_cast<float>(rs.original_max_position_embeddings);
    const float low_wavelen = old_ctx / low, high_wavelen = old_ctx / high;
    const float pi = 3.141592653589793f;
    for (auto& f : inv) {
      float wavelen = 2.0f * pi / f;
      float scaled = wavelen > low_wavelen ? f / factor : f;
      if (!(wavelen < high_wavelen) && !(wavelen > low_wavelen)) {
        float smooth = (old_ctx / wavelen - low) / (high - low);
        scaled = (1.0f - smooth) * scaled / factor + smooth * scaled;
      }
      f = scaled;
    }
  }
  return inv;
}

float rope_attention_factor(const ModelConfig& c) {
  const RopeScaling& rs = c.rope_scaling;
  if (rs.type != RopeScalingType::kYarn) return 1.0f;
  if (rs.attention_factor > 0) return static_cast<float>(rs.attention_factor);
  if (rs.mscale > 0 && rs.mscale_all_dim > 0) {
    return static_cast<float>(yarn_get_mscale(rs.factor, rs.mscale) / yarn_get_mscale(rs.factor, rs.mscale_all_dim));
  }
  return static_cast<float>(yarn_get_mscale(rs.factor, 1.0));
}

}  // namespace rl
