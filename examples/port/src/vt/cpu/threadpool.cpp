// Ported from llama.cpp (local fork) ggml/src/ggml-cpu/ggml-cpu.c @ 237ad9b96
// (b9892): the CPU threadpool's barrier. Attributed to the llama.cpp oracle
// (.agents/oracles/llama.cpp.md), never to vLLM.

#include <atomic>

namespace vt::cpu {

void Barrier(std::atomic<int>& n, int threads) {
  if (n.fetch_add(1) + 1 == threads) n.store(0);
}

}  // namespace vt::cpu
