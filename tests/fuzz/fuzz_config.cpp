// Fuzz target: config.json and generation_config.json parsing with range validation (the architectures' own
// parsers through model/registry, loader/model_config, loader/config_fields).
// fuzz-libs: rl_model
#include <cstdint>
#include <string>

#include "core/json.h"
#include "loader/model_config.h"
#include "model/model.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto j = rl::parse_json(text, "config.json");
  if (!j.is_ok()) return 0;
  auto c = rl::parse_model_config(*j);
  if (c.is_ok()) {
    // Accepted configs give finite, non-overflowing derived sizes.
    (void)c->num_params();
    (void)c->kv_bytes_per_token(4);
    (void)c->kv_bytes_at(int64_t{1} << 20, 4);
    (void)c->max_context_len();
  }
  (void)rl::parse_generation_config(*j);
  return 0;
}
