// Ported from: vllm/model_executor/layers/layernorm.py + csrc/layernorm_kernels.cu @ 147b89ac926

#include <cmath>
#include <vector>

namespace vllm::layers {

void rms_norm(std::vector<float>& x, const std::vector<float>& weight, float eps) {
  double ss = 0.0;
  for (float v : x) ss += static_cast<double>(v) * v;
  const float scale = 1.0f / std::sqrt(static_cast<float>(ss / x.size()) + eps);
  for (std::size_t i = 0; i < x.size(); ++i) x[i] = x[i] * scale * weight[i];
}

}  // namespace vllm::layers
