// Ported from: vllm/v1/core/block_pool.py::BlockPool @ 147b89ac9
#pragma once

#include <deque>

namespace vllm::v1 {

class BlockPool {
 public:
  explicit BlockPool(int num_gpu_blocks, int block_size = 16);
  int block_size() const { return block_size_; }
  int take(int n);
  void give_back(int block_id);

 private:
  int block_size_;
  std::deque<int> free_block_queue_;
};

}  // namespace vllm::v1
