// Ported from vllm/v1/core/kv_cache_manager.py @ b39632a508
// (blocks are freed in reverse order so the tail of a sequence is evicted first)

#include "vllm/v1/core/kv_cache_manager.h"

namespace vllm::v1 {

int KVCacheManager::allocate_slots(int num_tokens) {
  const int blocks = (num_tokens + pool_->block_size() - 1) / pool_->block_size();
  return pool_->take(blocks);
}

void KVCacheManager::free(int num_blocks) {
  for (int i = num_blocks - 1; i >= 0; --i) pool_->give_back(i);
}

}  // namespace vllm::v1
