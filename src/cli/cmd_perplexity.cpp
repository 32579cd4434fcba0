// `ridgeline perplexity --file F`: teacher-forced perplexity of a text under the model, as
// llama.cpp's perplexity tool computes it. The text is tokenised once (no special tokens added) and
// cut into chunks of
// --ctx tokens; each chunk is one fresh sequence run in a single step with logits for every
// position, and only the second half of each chunk is scored (every scored token then sees at least
// ctx/2 tokens of context): NLL = -log softmax(logits[i])[token[i + 1]] for i in [ctx/2, ctx - 1).
// PPL = exp(mean NLL), reported with the standard error of the mean NLL carried through exp. Used
// to measure what --quantization int8 and a bf16 KV cache (--kv-cache-dtype) cost.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/engine_options.h"
#include "core/file.h"
#include "core/log.h"
#include "model/model.h"
#include "runtime/backend_factory.h"
#include "runtime/kv_dtype.h"
#include "runtime/kv_storage.h"
#include "runtime/model_runner.h"
#include "tokenizer/tokenizer.h"

namespace rl::cli {

namespace {

struct PerplexityOptions {
  ModelOptions model;
  std::string file;
  std::string device = "cpu";
  std::string dtype = "bf16";
  std::string quantization = "none";
  std::string kv_cache_dtype = "auto";
  int threads = 0;
  int64_t ctx = 512;
  int64_t max_chunks = 0;  // 0: all
};

int run(const PerplexityOptions& o) {
  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "ridgeline: error: %s\n", m.c_str());
    return 1;
  };
  const std::string dir = resolve_model_dir(o.model);
  auto text = read_file(o.file);
  if (!text) return fail(text.message());
  auto tok = Tokenizer::load(dir);
  if (!tok) return fail(tok.message());
  BackendOptions bo;
  bo.num_threads = o.threads;
  auto backend = create_backend(o.device, bo);
  if (!backend) return fail(backend.message());
  LoadOptions lo;
  if (!parse_dtype(o.dtype, &lo.weight_dtype)) return fail("unknown --dtype " + o.dtype);
  lo.quantize_int8 = o.quantization == "int8";
  KvCacheDtype kv_request;
  if (!parse_kv_cache_dtype(o.kv_cache_dtype, &kv_request)) return fail("unknown --kv-cache-dtype " + o.kv_cache_dtype);
  const Result<DType> kv_dtype = select_kv_dtype((*backend)->device(), lo.weight_dtype, lo.quantize_int8, kv_request);
  if (!kv_dtype) return fail(kv_dtype.message());
  auto model = load_model(dir, backend->get(), lo);
  if (!model) return fail(model.message());
  const ModelConfig& c = (*model)->config();
  if (const Status st = check_kv_dtype((*backend)->device(), *kv_dtype, c, false); !st.is_ok()) {
    return fail(st.message());
  }
  if (o.ctx < 4 || o.ctx > c.max_context_len()) {
    return fail("--ctx must be in [4, " + std::to_string(c.max_context_len()) + "]");
  }

  const std::vector<int32_t> ids = (*tok)->encode(*text, false);
  const int64_t num_chunks_all = static_cast<int64_t>(ids.size()) / o.ctx;
  const int64_t num_chunks =
      o.max_chunks > 0 ? std::min(o.max_chunks, num_chunks_all) : num_chunks_all;
  if (num_chunks == 0) {
    return fail("the file has " + std::to_string(ids.size()) +
                " tokens, fewer than one chunk of --ctx " + std::to_string(o.ctx));
  }
  std::fprintf(stderr, "perplexity: %zu tokens, %lld chunks of %lld, backend %s, weights %s%s, KV cache %s\n",
               ids.size(), static_cast<long long>(num_chunks), static_cast<long long>(o.ctx),
               (*backend)->name().c_str(), o.dtype.c_str(), lo.quantize_int8 ? " (2-D weights int8)" : "",
               std::string(dtype_name(*kv_dtype)).c_str());

  constexpr int64_t kBlock = 16;
  const int64_t blocks = (o.ctx + kBlock - 1) / kBlock;
  KvStorage kv(backend->get(), c, blocks + 1, kBlock, *kv_dtype);  // block 0 is never handed out
  RunnerLimits lim;
  lim.max_num_tokens = o.ctx;
  lim.max_num_seqs = 1;
  lim.max_model_len = o.ctx;
  lim.max_num_logits = o.ctx;
  lim.enforce_eager = true;
  ModelRunner runner(model->get(), &kv, lim);
  std::vector<int32_t> table(static_cast<size_t>(blocks));
  for (int64_t b = 0; b < blocks; ++b) table[static_cast<size_t>(b)] = static_cast<int32_t>(b + 1);

  const int64_t first = o.ctx / 2, vocab = c.vocab_size;
  double sum = 0, sum_sq = 0;
  int64_t count = 0;
  std::vector<float> logits;
  const double t0 = now_seconds();
  for (int64_t ch = 0; ch < num_chunks; ++ch) {
    const int32_t* chunk = ids.data() + ch * o.ctx;
    SeqStep s;
    s.token_ids = chunk;
    s.num_new_tokens = o.ctx;
    s.num_computed = 0;
    s.block_table = table.data();
    s.num_blocks = blocks;
    s.all_logits = true;
    runner.step({s}, &logits);
    for (int64_t i = first; i < o.ctx - 1; ++i) {
      const float* row = logits.data() + i * vocab;
      const float mx = *std::max_element(row, row + vocab);
      double z = 0;
      for (int64_t v = 0; v < vocab; ++v) z += std::exp(static_cast<double>(row[v] - mx));
      const double nll = std::log(z) - static_cast<double>(row[chunk[i + 1]] - mx);
      sum += nll;
      sum_sq += nll * nll;
      ++count;
    }
    std::fprintf(stderr, "[%lld]%.4f%s", static_cast<long long>(ch + 1), std::exp(sum / count),
                 ch + 1 == num_chunks ? "\n" : ",");
  }
  const double seconds = now_seconds() - t0;
  const double mean = sum / count;
  const double var = std::max(0.0, sum_sq / count - mean * mean);
  const double se = std::sqrt(var / static_cast<double>(std::max<int64_t>(1, count - 1)));
  const double ppl = std::exp(mean);
  std::printf(
      "PPL = %.4f +/- %.4f (mean NLL %.5f over %lld tokens, %lld chunks of %lld; %.1f tok/s)\n",
      ppl, ppl * se, mean, static_cast<long long>(count), static_cast<long long>(num_chunks),
      static_cast<long long>(o.ctx), static_cast<double>(num_chunks * o.ctx) / seconds);
  return 0;
}

}  // namespace

void add_perplexity_command(CLI::App& app, int* exit_code) {
  auto* cmd = app.add_subcommand(
      "perplexity",
      "Teacher-forced perplexity of a text file (chunked, second half of each chunk scored)");
  auto o = std::make_shared<PerplexityOptions>();
  add_model_dir_option(cmd, &o->model);
  cmd->add_option("--file", o->file, "Text file to score")->required();
  cmd->add_option("--ctx", o->ctx, "Tokens per chunk")->capture_default_str();
  cmd->add_option("--max-chunks", o->max_chunks, "Score at most this many chunks (0 = all)")
      ->capture_default_str();
  cmd->add_option("--device", o->device, "Backend: cpu or cuda")
      ->check(CLI::IsMember({"cpu", "cuda"}))
      ->capture_default_str();
  cmd->add_option("--dtype", o->dtype, "Weight storage on the CPU: f32 or bf16")
      ->check(CLI::IsMember({"f32", "bf16"}))
      ->capture_default_str();
  cmd->add_option("--quantization", o->quantization, "Weight quantisation: none or int8 (CPU only)")
      ->check(CLI::IsMember({"none", "int8"}))
      ->capture_default_str();
  add_kv_cache_dtype_option(cmd, &o->kv_cache_dtype);
  cmd->add_option("--threads", o->threads, "CPU threads (0 = all cores)")->capture_default_str();
  cmd->callback([o, exit_code] { *exit_code = run(*o); });
}

}  // namespace rl::cli
