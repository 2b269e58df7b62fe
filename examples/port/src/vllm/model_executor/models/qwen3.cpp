// Ported from vllm/model_executor/models/qwen3.py and
// vllm/model_executor/models/qwen2.py (Qwen2MLP, Qwen2Attention).
// Upstream revision: 6328bdc

#include <string>

namespace vllm::models {

struct Qwen3Config {
  int hidden_size = 1024;
  int num_attention_heads = 16;
  int num_key_value_heads = 8;
  bool tie_word_embeddings = true;
};

std::string qwen3_architecture() { return "Qwen3ForCausalLM"; }

}  // namespace vllm::models
