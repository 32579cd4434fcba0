// Structured outputs in the engine step: each constrained row's allowed-token bitmask is filled on the host from
// its grammar matcher's cached masks and handed to the sampler (SamplerRow::allowed_mask), which applies it on the
// device inside the one sampling path; each matcher advances by its row's token when the step's results are
// applied (Engine::process). While constrained requests are live, Engine::step applies the step in flight before
// scheduling, so a matcher has always seen every earlier token when it masks the next one.
#include "runtime/engine.h"

namespace rl {

void Engine::fill_constraint_masks(const SchedulerOutput& out, const std::vector<int32_t>& sample_row) {
  if (constrained_.empty()) return;
  const int64_t words = (model_->config().vocab_size + 31) / 32;
  h_mask_.assign(rows_.size() * static_cast<size_t>(words), 0xffffffffu);
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    if (sample_row[i] < 0) continue;
    const Request& r = *out.scheduled[i].request;  // constraint is mutable scheduling state
    if (!r.params.constraint) continue;
    if (!r.constraint) r.constraint = r.params.constraint();
    uint32_t* mask = h_mask_.data() + static_cast<int64_t>(sample_row[i]) * words;
    r.constraint->fill_bitmask(mask, static_cast<int32_t>(words));
    rows_[static_cast<size_t>(sample_row[i])].allowed_mask = mask;
  }
}

void Engine::advance_constraints(const SchedulerOutput& out, const std::vector<int32_t>& sample_row,
                                 const std::vector<TokenId>& sampled) {
  if (constrained_.empty()) return;
  for (size_t i = 0; i < out.scheduled.size(); ++i) {
    if (sample_row[i] < 0 || sampled[i] < 0) continue;
    const Request* r = scheduler_->live(out.scheduled[i]);
    if (r != nullptr && r->constraint) r->constraint->accept(sampled[i]);
  }
}

}  // namespace rl
