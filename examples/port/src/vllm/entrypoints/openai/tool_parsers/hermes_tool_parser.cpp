// Ported from: vllm/entrypoints/openai/tool_parsers/hermes_tool_
//              parser.py @ 147b89ac92

#include <string>
#include <vector>

namespace vllm::entrypoints {

std::vector<std::string> extract_tool_calls(const std::string& text) {
  std::vector<std::string> calls;
  const std::string open = "<tool_call>", close = "</tool_call>";
  for (auto pos = text.find(open); pos != std::string::npos; pos = text.find(open, pos)) {
    const auto end = text.find(close, pos);
    if (end == std::string::npos) break;
    calls.push_back(text.substr(pos + open.size(), end - pos - open.size()));
    pos = end + close.size();
  }
  return calls;
}

}  // namespace vllm::entrypoints
