#pragma once

#include <string>
#include <string_view>

namespace vllm::utils {

inline bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

}  // namespace vllm::utils
