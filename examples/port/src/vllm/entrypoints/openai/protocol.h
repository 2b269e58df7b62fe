// Reimplemented from the WIRE FORMAT of:
//   vllm/entrypoints/openai/protocol.py (ChatCompletionRequest,
//   ChatCompletionResponse, ToolCall) @ 147b89ac926dabf0d3a3ac630941428c07798a7c
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
