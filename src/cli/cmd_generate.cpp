// `ridgeline generate`: one prompt through the engine, text streamed to stdout as it is produced, speed on
// stderr.
#include <cstdio>
#include <sstream>

#include "cli/commands.h"
#include "cli/engine_options.h"
#include "core/file.h"
#include "core/log.h"
#include "runtime/text_stream.h"

namespace rl::cli {

namespace {

struct GenerateOptions {
  EngineOptions engine;
  SamplingOptions sampling;
  std::string prompt;
  std::string prompt_ids;
  bool output_ids = false;
  std::string dump_logits;
  bool no_special = false;
};

Result<std::vector<TokenId>> parse_ids(const std::string& text) {
  std::vector<TokenId> ids;
  std::istringstream in(text);
  std::string tok;
  while (in >> tok) {
    try {
      size_t used = 0;
      long long v = std::stoll(tok, &used);
      if (used != tok.size() || v < 0 || v > INT32_MAX) throw std::invalid_argument(tok);
      ids.push_back(static_cast<TokenId>(v));
    } catch (const std::exception&) {
      return Status::error("--prompt-ids: \"" + tok + "\" is not a token id");
    }
  }
  if (ids.empty()) return Status::error("--prompt-ids is empty");
  return ids;
}

int run(const GenerateOptions& o) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "ridgeline: error: %s\n", m.c_str());
    return 1;
  };
  if (o.prompt.empty() == o.prompt_ids.empty()) return fail("give exactly one of --prompt or --prompt-ids");
  auto engine_r = make_engine(o.engine);
  if (!engine_r) return fail(engine_r.message());
  Engine& engine = **engine_r;
  std::vector<TokenId> prompt;
  if (!o.prompt_ids.empty()) {
    auto ids = parse_ids(o.prompt_ids);
    if (!ids) return fail(ids.message());
    prompt = std::move(*ids);
  } else {
    if (!engine.tokenizer()) return fail("the model folder has no tokenizer.json: use --prompt-ids");
    prompt = engine.tokenizer()->encode(o.prompt, !o.no_special);
    if (prompt.empty()) return fail("the prompt encodes to no tokens");
  }
  if (!o.dump_logits.empty()) {
    auto logits = engine.prompt_logits(prompt);
    if (!logits) return fail(logits.message());
    std::string out = "[";
    char buf[32];
    for (size_t i = 0; i < logits->size(); ++i) {
      std::snprintf(buf, sizeof buf, "%s%.9g", i ? "," : "", (*logits)[i]);
      out += buf;
    }
    Status st = write_file(o.dump_logits, out + "]\n");
    if (!st) return fail(st.message());
  }
  SamplingParams params = make_sampling_params(o.sampling, engine.generation_config());
  if (Status st = params.validate(static_cast<int32_t>(engine.model_config().vocab_size)); !st) {
    return fail(st.message());
  }
  const bool stream_text = !o.output_ids && engine.tokenizer();
  std::unique_ptr<TextStream> text;
  if (engine.tokenizer()) text = std::make_unique<TextStream>(*engine.tokenizer(), params.stop);
  if (!params.stop.empty() && !engine.tokenizer()) return fail("--stop needs a tokenizer");

  auto channel = engine.submit("generate", prompt, params);
  std::vector<TokenId> out_ids;
  RequestOutput last;
  bool stopped = false;
  while (auto msg = channel->pop()) {
    for (const TokenOutput& t : msg->tokens) {
      if (stopped) break;
      out_ids.push_back(t.token);
      if (text) {
        TextStream::Piece p = text->push(t.token);
        if (stream_text) {
          std::fwrite(p.text.data(), 1, p.text.size(), stdout);
          std::fflush(stdout);
        }
        if (p.stopped) {
          stopped = true;
          engine.abort("generate", FinishReason::kStop);
        }
      }
    }
    if (msg->finish != FinishReason::kNone) last = *msg;
  }
  if (last.finish == FinishReason::kError) return fail(last.error);
  if (stream_text) {
    std::string rest = text->finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
  }
  if (o.output_ids) {
    for (size_t i = 0; i < out_ids.size(); ++i) std::printf("%s%d", i ? " " : "", out_ids[i]);
    std::printf("\n");
  }
  std::fflush(stdout);
  const double prefill = last.first_token_time - last.arrival_time;
  const double decode = last.finish_time - last.first_token_time;
  const int64_t n_out = static_cast<int64_t>(out_ids.size());
  std::fprintf(stderr, "prompt: %zu tokens in %.3f s (%.1f tok/s); generation: %lld tokens in %.3f s (%.1f tok/s); "
               "finish: %s\n",
               prompt.size(), prefill, prefill > 0 ? static_cast<double>(prompt.size()) / prefill : 0.0,
               static_cast<long long>(n_out), decode, decode > 0 && n_out > 1 ? (n_out - 1) / decode : 0.0,
               stopped ? "stop" : finish_reason_name(last.finish));
  if (engine.speculative()) {
    const spec::SpecDecodeCounters sc = engine.spec_counters();
    std::fprintf(stderr, "speculative %s: %lld verifications, %lld of %lld draft tokens accepted (%.3f), %.3f tokens "
                 "per verification\n", o.engine.speculative.c_str(), static_cast<long long>(sc.num_drafts),
                 static_cast<long long>(sc.num_accepted_tokens), static_cast<long long>(sc.num_draft_tokens),
                 sc.acceptance_rate(), sc.mean_accepted_length());
  }
  return 0;
}

}  // namespace

void add_generate_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand("generate", "Generate a continuation of a prompt, streaming text to stdout");
  auto o = std::make_shared<GenerateOptions>();
  cmd->add_option("-p,--prompt", o->prompt, "Prompt text (tokenized with the model's tokenizer)");
  cmd->add_option("--prompt-ids", o->prompt_ids, "Prompt as token ids, e.g. \"1 2 3\"");
  cmd->add_flag("--no-special", o->no_special, "Do not add the tokenizer's special tokens (e.g. BOS) to --prompt");
  cmd->add_flag("--output-ids", o->output_ids, "Print the generated token ids (space-separated, one line)");
  cmd->add_option("--dump-logits", o->dump_logits, "Write the logits of the last prompt position (JSON array)");
  add_engine_options(cmd, &o->engine);
  add_sampling_options(cmd, &o->sampling);
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace rl::cli
