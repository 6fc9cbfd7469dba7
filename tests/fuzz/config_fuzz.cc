// fuzz: parse_model_config on arbitrary text. An accepted config must satisfy what the model code
// indexes by: one compress ratio per layer, positive dims, in-vocabulary special tokens.
#include <string_view>

#include "core/check.h"
#include "fuzz_targets.h"
#include "io/model_config.h"

namespace dsv4::fuzz {

int config_entry(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto r = parse_model_config(text, "fuzz/config.json");
  if (!r.is_ok()) {
    DSV4_CHECK(r.status().code() == StatusCode::kInvalidFile && !r.status().rule().empty(), r.status().to_string());
    return 0;
  }
  const ModelConfig& c = *r;
  DSV4_CHECK(static_cast<int64_t>(c.compress_ratios.size()) == c.n_total_layers());
  for (int64_t il = 0; il < c.n_total_layers(); ++il) (void)c.attention_kind(il);
  DSV4_CHECK(c.dim > 0 && c.dim % 128 == 0 && c.n_heads > 0 && c.n_heads % c.o_groups == 0);
  DSV4_CHECK(c.n_activated_experts <= c.n_routed_experts);
  DSV4_CHECK(c.eos_token_id >= 0 && c.eos_token_id < c.vocab_size);
  for (int64_t id : c.dspark_target_layer_ids) DSV4_CHECK(!c.has_dspark() || (id >= 0 && id < c.n_layers));
  return 0;
}

}  // namespace dsv4::fuzz
