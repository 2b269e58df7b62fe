// Original implementation — no upstream mirror.
// Device queries loosely follow vllm/platforms/cuda.py (CudaPlatform) @ b236b541, but the
// structure is our own.

#include <string>

namespace vllm::platforms {

std::string device_name() { return "cuda"; }

}  // namespace vllm::platforms
