// Mirrors vllm/v1/core/sched/output.py (SchedulerOutput, NewRequestData) @ 147b89ac92
#pragma once

#include <cstdint>
#include <vector>

namespace vllm::v1 {

using RequestId = std::int64_t;

struct SchedulerOutput {
  std::vector<RequestId> scheduled_new_reqs;
  int num_scheduled_tokens = 0;
};

}  // namespace vllm::v1
