// Ported from: vllm/v1/core/block_pool.py::BlockPool @ b39632a508
// See src/vllm/v1/core/block_pool.h for the free-list layout. Upstream has not changed
// block_pool.py since that commit, so the pin is behind but safe to bump.

#include "vllm/v1/core/block_pool.h"

namespace vllm::v1 {

BlockPool::BlockPool(int num_gpu_blocks, int block_size) : block_size_(block_size) {
  for (int i = 0; i < num_gpu_blocks; ++i) free_block_queue_.push_back(i);
}

int BlockPool::take(int n) {
  int taken = 0;
  while (taken < n && !free_block_queue_.empty()) {
    free_block_queue_.pop_front();
    ++taken;
  }
  return taken;
}

void BlockPool::give_back(int block_id) { free_block_queue_.push_back(block_id); }

}  // namespace vllm::v1
