// Ported from: vllm/v1/core/kv_cache_manager.py @ b39632a508
#pragma once

#include "vllm/v1/core/block_pool.h"

namespace vllm::v1 {

class KVCacheManager {
 public:
  KVCacheManager(BlockPool* pool, bool enable_caching) : pool_(pool), enable_caching_(enable_caching) {}
  int allocate_slots(int num_tokens);
  void free(int num_blocks);

 private:
  BlockPool* pool_;
  bool enable_caching_;
};

}  // namespace vllm::v1
