// The admin API's bearer token as a file or variable holds it: read by the config loader
// (admin.token_file, admin.token_env) and by `kproxy tap --token-file`, so both see the same token.
#pragma once

#include <optional>
#include <string>

namespace kproxy::config {

/// `token` without surrounding spaces, tabs, CRs and LFs (a file usually ends with a newline).
std::string strip_token(std::string token);

/// The contents of the file at `path`, stripped; nullopt when it cannot be read.
std::optional<std::string> read_admin_token_file(const std::string& path);

}  // namespace kproxy::config
