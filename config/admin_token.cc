#include "config/admin_token.h"

#include <fstream>
#include <sstream>

namespace kproxy::config {

std::string strip_token(std::string token) {
  auto space = [](char ch) { return ch == ' ' || ch == '\t' || ch == '\r' || ch == '\n'; };
  while (!token.empty() && space(token.back())) token.pop_back();
  size_t start = 0;
  while (start < token.size() && space(token[start])) ++start;
  token.erase(0, start);
  return token;
}

std::optional<std::string> read_admin_token_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return std::nullopt;
  std::ostringstream text;
  text << in.rdbuf();
  return strip_token(text.str());
}

}  // namespace kproxy::config
