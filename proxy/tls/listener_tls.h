// ListenerTls: the TLS contexts of one listener (config/tls_config.h), built from the config at
// start-up and again on every reload, so a reload picks up renewed certificate files.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "config/config.h"
#include "proxy/tls/tls_context.h"

namespace kproxy::tls {

struct ListenerTls {
  /// Clients must speak TLS to this listener's ports; nullptr = plaintext.
  std::shared_ptr<const TlsContext> clients;
  /// kproxy speaks TLS to this listener's brokers; nullptr = plaintext.
  std::shared_ptr<const TlsContext> upstream;
};

/// Builds the contexts of every listener of `config`, in listener order. Returns "" or every
/// error, one per line ("file:line:col: listeners[0].tls.cert: cannot load '...': why").
std::string build_listener_tls(const config::Config& config, std::vector<ListenerTls>& out);

}  // namespace kproxy::tls
