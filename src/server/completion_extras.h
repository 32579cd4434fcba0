// Completions parity fields beyond sampling: `echo` (the prompt text comes back before the completion, in the
// first chunk of each choice when streamed) and `suffix` (fill-in-the-middle: the prompt becomes
// <prefix-token> prompt <suffix-token> suffix <middle-token> when the vocabulary has a FIM token triple, else 400).
// `prompt_logprobs` (and echo together with logprobs, which needs them) is a 400: the engine computes logits of
// the last prompt position only.
#pragma once

#include "server/json_fields.h"

namespace rl::server {

struct GenerationRequest;
struct ModelContext;

// Before parse_prompts: replaces the prompt by its FIM form when `suffix` is given.
MaybeError apply_suffix(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* r);
// After parse_prompts: `echo` (fills r->echo_text) and the prompt_logprobs check.
MaybeError apply_echo(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* r);

}  // namespace rl::server
