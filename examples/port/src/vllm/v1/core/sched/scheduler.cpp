/* SPDX-License-Identifier: Apache-2.0
 * Copyright 2025-2026 The nanoserve Authors */

// Ported from: vllm/v1/core/sched/scheduler.py @ 147b89ac926dabf0d3a3ac630941428c07798a7c

#include "vllm/v1/core/sched/scheduler.h"

namespace vllm::v1 {

Scheduler::Scheduler(int max_num_seqs, int max_num_batched_tokens,
                     KVCacheManager* kv_cache_manager)
    : max_num_seqs_(max_num_seqs),
      max_num_batched_tokens_(max_num_batched_tokens),
      kv_cache_manager_(kv_cache_manager) {}

SchedulerOutput Scheduler::schedule() {
  SchedulerOutput out;
  int budget = max_num_batched_tokens_;
  while (!waiting_.empty() && static_cast<int>(running_.size()) < max_num_seqs_ && budget > 0) {
    running_.push_back(waiting_.front());
    waiting_.pop_front();
    --budget;
  }
  out.num_scheduled_tokens = max_num_batched_tokens_ - budget;
  return out;
}

}  // namespace vllm::v1
