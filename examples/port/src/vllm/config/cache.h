// Ported from: vllm/config/cache.py @ `b236b54116c1`
#pragma once

#include <string>

namespace vllm::config {

struct CacheConfig {
  int block_size = 16;
  double gpu_memory_utilization = 0.9;
  std::string prefix_caching_hash_algo = "sha256";
};

}  // namespace vllm::config
