#include "proxy/metrics/connection_metrics.h"

#include <string>

#include <doctest/doctest.h>

using namespace kproxy;

namespace {
/// The value of kproxy_clients{software_name=name,software_version=version} in the process's
/// metrics, 0 when the series is absent.
double clients_gauge(const std::string& name, const std::string& version) {
  std::string text = metrics::ProxyMetrics::instance().render();
  std::string key = "kproxy_clients{software_name=\"" + name + "\",software_version=\"" + version + "\"} ";
  auto at = text.find(key);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
}
}  // namespace

TEST_CASE("connection metrics: a connection counts once in kproxy_clients, under the name it announced last") {
  // Issue #15 bug 8: franz-go's admin client announces "kadm" on connections that announced
  // "kgo"; each announcement used to add one and the close took one off only for the last name.
  double kgo = clients_gauge("kgo-test", "1.0"), kadm = clients_gauge("kadm-test", "1.0");
  {
    metrics::ConnectionMetrics connection(0);
    connection.opened();
    connection.client_software("kgo-test", "1.0");
    connection.client_software("kgo-test", "1.0");  // the same announcement again counts nothing
    CHECK(clients_gauge("kgo-test", "1.0") == kgo + 1);
    connection.client_software("kadm-test", "1.0");
    CHECK(clients_gauge("kgo-test", "1.0") == kgo);
    CHECK(clients_gauge("kadm-test", "1.0") == kadm + 1);
    connection.closed(proxy::CloseCategory::kClientClosed);
    CHECK(clients_gauge("kadm-test", "1.0") == kadm);
    connection.client_software("kgo-test", "1.0");  // nothing counts after the close
  }
  CHECK(clients_gauge("kgo-test", "1.0") == kgo);
  CHECK(clients_gauge("kadm-test", "1.0") == kadm);
}
