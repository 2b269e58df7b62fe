// Ported from: vllm/sampling_params.py:12 @147b89a
#pragma once

#include <optional>

namespace vllm {

struct SamplingParams {
  int n = 1;
  double temperature = 1.0;
  double top_p = 1.0;
  int top_k = 0;
  double min_p = 0.0;
  std::optional<int> max_tokens = 16;
};

}  // namespace vllm
