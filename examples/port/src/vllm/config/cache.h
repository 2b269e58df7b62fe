// Ported from: vllm/config/cache.py @ `147b89ac926d`
#pragma once

#include <string>

namespace vllm::config {

struct CacheConfig {
  int block_size = 16;
  double gpu_memory_utilization = 0.9;
  std::string prefix_caching_hash_algo = "sha256";
};

}  // namespace vllm::config
