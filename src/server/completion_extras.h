// Completions parity fields beyond sampling: `echo` (the prompt text comes back before the completion, in the
// first chunk of each choice when streamed) and `suffix` (fill-in-the-middle: the prompt becomes
// <prefix-token> prompt <suffix-token> suffix <middle-token> when the vocabulary has a FIM token triple, else 400).
// `prompt_logprobs` (vLLM; also on chat): every prompt token after the first with its logprob, rank and top-N
// alternatives; `echo` with `logprobs` puts the prompt's tokens at the head of each choice's logprobs (OpenAI).
// Both are computed by the engine's teacher-forced rows (SamplingParams::prompt_logprobs).
#pragma once

#include "server/json_fields.h"

namespace rl::server {

struct GenerationRequest;
struct ModelContext;

// Before parse_prompts: replaces the prompt by its FIM form when `suffix` is given.
MaybeError apply_suffix(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* r);
// After parse_prompts: `echo` (fills r->echo_text; with `logprobs` the prompt's tokens get logprobs too) and
// `prompt_logprobs`.
MaybeError apply_echo(const OrderedJson& body, const ModelContext& ctx, GenerationRequest* r);
// `prompt_logprobs` (an integer in [0, 20]) into r->prompt_logprobs and r->params.prompt_logprobs.
MaybeError read_prompt_logprobs(const OrderedJson& body, GenerationRequest* r);

}  // namespace rl::server
