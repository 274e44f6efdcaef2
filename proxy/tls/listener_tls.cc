#include "proxy/tls/listener_tls.h"

namespace kproxy::tls {

std::string build_listener_tls(const config::Config& config, std::vector<ListenerTls>& out) {
  std::string errors;
  std::vector<ListenerTls> built;
  for (const auto& listener : config.listeners) {
    ListenerTls tls;
    std::string error;
    if (listener.tls) {
      tls.clients = TlsContext::for_clients(*listener.tls, config.source, &error);
      if (!tls.clients) errors += error + "\n";
    }
    error.clear();
    if (listener.upstream_tls) {
      tls.upstream = TlsContext::for_upstream(*listener.upstream_tls, config.source, &error);
      if (!tls.upstream) errors += error + "\n";
    }
    built.push_back(std::move(tls));
  }
  if (!errors.empty()) {
    errors.pop_back();
    return errors;
  }
  out = std::move(built);
  return "";
}

}  // namespace kproxy::tls
