// Ported from:
//   - vllm/model_executor/layers/rotary_embedding.py (RotaryEmbedding)
//   - vllm/model_executor/layers/utils.py (apply_rotary)
// @ 147b89ac92

#include <cmath>
#include <vector>

namespace vllm::layers {

std::vector<double> rope_inv_freq(int rotary_dim, double base) {
  std::vector<double> inv(rotary_dim / 2);
  for (int i = 0; i < rotary_dim / 2; ++i) inv[i] = 1.0 / std::pow(base, 2.0 * i / rotary_dim);
  return inv;
}

}  // namespace vllm::layers
