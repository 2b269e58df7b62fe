// Ported from: vllm/v1/core/sched/scheduler.py @ 147b89ac
#pragma once

#include <deque>

#include "vllm/v1/core/kv_cache_manager.h"
#include "vllm/v1/core/sched/output.h"

namespace vllm::v1 {

class Scheduler {
 public:
  Scheduler(int max_num_seqs, int max_num_batched_tokens, KVCacheManager* kv_cache_manager);
  SchedulerOutput schedule();

 private:
  int max_num_seqs_;
  int max_num_batched_tokens_;
  KVCacheManager* kv_cache_manager_;
  std::deque<RequestId> waiting_;
  std::deque<RequestId> running_;
};

}  // namespace vllm::v1
