// Original implementation — no upstream mirror.
// Device queries loosely follow vllm/platforms/cuda.py (CudaPlatform) @ 147b89ac, but the
// structure is our own.

#include <string>

namespace vllm::platforms {

std::string device_name() { return "cuda"; }

}  // namespace vllm::platforms
