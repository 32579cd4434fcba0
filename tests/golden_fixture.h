// The golden fixtures (tests/data/golden/<name>/, made by tools/make_fixtures.py with transformers): a prompt,
// transformers' greedy continuation, and its teacher-forced logits over both, with each greedy step's logit margin
// and, for MoE fixtures, each position's routing margin. A missing or malformed fixture stops the test binary with
// the file named.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/check.h"
#include "core/dtype.h"
#include "core/json.h"
#include "kv/kv_types.h"
#include "loader/safetensors.h"

namespace rl::test {

struct GoldenFixture {
  std::vector<TokenId> prompt, greedy;
  std::vector<float> logits;  // [positions, vocab] over prompt + greedy
  int64_t vocab = 0;
  std::vector<double> margins;  // per greedy step: the top logit minus the runner-up's
  // MoE fixtures: per position, the smallest gap between the last chosen and the first unchosen expert score over
  // the MoE layers; empty for dense models (and for MoE fixtures made before margins were recorded).
  std::vector<double> routing_margins;

  // The teacher-forced sequence: the prompt, then the greedy continuation.
  std::vector<TokenId> sequence() const {
    std::vector<TokenId> s = prompt;
    s.insert(s.end(), greedy.begin(), greedy.end());
    return s;
  }
  // Row p of the logits.
  std::vector<float> row(int64_t p) const {
    return std::vector<float>(logits.begin() + p * vocab, logits.begin() + (p + 1) * vocab);
  }
};

inline GoldenFixture load_golden_fixture(const std::string& dir) {
  GoldenFixture g;
  auto j = load_json_file(dir + "/golden.json");
  RL_CHECK_MSG(j.is_ok(), "%s", j.message().c_str());
  for (const auto& v : (*j)["prompt_ids"]) g.prompt.push_back(v.get<TokenId>());
  for (const auto& v : (*j)["greedy_ids"]) g.greedy.push_back(v.get<TokenId>());
  if (j->contains("margins")) {
    for (const auto& v : (*j)["margins"]) g.margins.push_back(v.get<double>());
  }
  if (j->contains("routing_margins")) {
    for (const auto& v : (*j)["routing_margins"]) g.routing_margins.push_back(v.get<double>());
  }
  auto f = SafetensorsFile::open(dir + "/logits.safetensors");
  RL_CHECK_MSG(f.is_ok(), "%s", f.message().c_str());
  const TensorInfo& t = (*f)->tensors().at("logits");
  RL_CHECK_MSG(t.shape.size() == 2, "%s/logits.safetensors: logits is not [positions, vocab]", dir.c_str());
  g.vocab = t.shape[1];
  g.logits.resize(static_cast<size_t>(t.numel()));
  convert_to_f32(t.data, t.dtype, g.logits.data(), g.logits.size());
  return g;
}

}  // namespace rl::test
