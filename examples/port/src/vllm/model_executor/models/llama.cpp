// Ported from: vllm/model_executor/models/llama.py 147b89ac

namespace vllm::models {

struct LlamaConfig {
  int head_dim = 128;
  double rope_theta = 500000.0;
};

}  // namespace vllm::models
