// Reimplemented from the WIRE FORMAT of:
//   vllm/entrypoints/openai/protocol.py (ChatCompletionRequest,
//   ChatCompletionResponse, ToolCall) @ b236b54116c1bde253bd75f442c2483692241ef3
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace vllm::entrypoints {

struct ChatMessage {
  std::string role;
  std::string content;
};

struct ChatCompletionRequest {
  std::optional<std::string> model;
  std::vector<ChatMessage> messages;
  std::optional<int> max_tokens;
  bool parallel_tool_calls = true;
};

}  // namespace vllm::entrypoints
