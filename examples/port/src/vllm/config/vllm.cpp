// Ported FROM: vllm/config/vllm.py (VllmConfig) @ pin 147b89ac9

#include <stdexcept>

#include "vllm/config/cache.h"

namespace vllm::config {

struct VllmConfig {
  CacheConfig cache_config;

  void validate() const {
    if (cache_config.block_size <= 0) throw std::invalid_argument("block_size must be > 0");
  }
};

}  // namespace vllm::config
