// Structured outputs in the engine step: each constrained row's token bitmask is filled on the host (the grammar
// matcher's cached masks), uploaded once for the step and applied to the logits on the device
// (Backend::apply_token_bitmask), before greedy, device or host sampling alike; then each matcher advances by its
// sampled token.
#include "runtime/engine.h"

namespace rl {

void Engine::apply_constraints(const Tensor& logits, const SchedulerOutput& out) {
  bool any = false;
  for (const ScheduledRequest& s : out.scheduled) {
    if (!s.samples || !s.request->params.constraint) continue;
    if (!s.request->constraint) s.request->constraint = s.request->params.constraint();
    any = true;
  }
  if (!any) return;
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  const int64_t words = (vocab + 31) / 32;
  h_mask_.assign(static_cast<size_t>(rows * words), 0xffffffffu);
  int64_t row = 0;
  for (const ScheduledRequest& s : out.scheduled) {
    if (!s.samples) continue;
    if (s.request->constraint && row < rows)
      s.request->constraint->fill_bitmask(h_mask_.data() + row * words, static_cast<int32_t>(words));
    ++row;
  }
  const size_t bytes = h_mask_.size() * sizeof(uint32_t);
  if (d_mask_.size() < bytes) d_mask_ = DeviceBuffer(backend_.get(), bytes);
  backend_->upload(d_mask_.data(), h_mask_.data(), bytes);
  backend_->apply_token_bitmask(logits, Tensor(d_mask_.data(), DType::kI32, {rows, words}));
}

void Engine::advance_constraints(const SchedulerOutput& out, const std::vector<TokenId>& sampled) {
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    const ScheduledRequest& s = out.scheduled[i];
    if (s.samples && s.request->constraint) s.request->constraint->accept(sampled[i]);
  }
}

}  // namespace rl
