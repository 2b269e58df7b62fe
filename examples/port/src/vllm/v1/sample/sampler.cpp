// Ported from: vllm/v1/sample/sampler.py:1-40 @ 474ecb2098f8
// Hot-fix port of vllm#38292 (NaN logprobs when every token is masked), ahead of the
// parity pin; recorded in the parity ledger.

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace vllm::v1 {

std::vector<double> compute_logprobs(const std::vector<double>& logits) {
  double max_logit = -std::numeric_limits<double>::infinity();
  for (double l : logits) max_logit = std::max(max_logit, l);
  std::vector<double> out(logits.size(), -std::numeric_limits<double>::infinity());
  if (!std::isfinite(max_logit)) return out;  // every token masked: no NaN
  double sum = 0.0;
  for (double l : logits) sum += std::exp(l - max_logit);
  for (std::size_t i = 0; i < logits.size(); ++i) out[i] = logits[i] - max_logit - std::log(sum);
  return out;
}

}  // namespace vllm::v1
