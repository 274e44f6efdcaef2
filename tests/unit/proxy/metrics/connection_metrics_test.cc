#include "proxy/metrics/connection_metrics.h"

#include <string>

#include <doctest/doctest.h>

#include "codec/generated/api_keys.h"

using namespace kproxy;

namespace {
/// The value of kproxy_clients{software_name=name,software_version=version} in `m`, 0 when the
/// series is absent.
double clients_gauge(metrics::ProxyMetrics& m, const std::string& name, const std::string& version) {
  std::string text = m.render();
  std::string key = "kproxy_clients{software_name=\"" + name + "\",software_version=\"" + version + "\"} ";
  auto at = text.find(key);
  return at == std::string::npos ? 0 : std::stod(text.substr(at + key.size()));
}
}  // namespace

TEST_CASE("connection metrics: a connection counts once in kproxy_clients, under the name it announced last") {
  // Issue #15 bug 8: franz-go's admin client announces "kadm" on connections that announced
  // "kgo"; each announcement used to add one and the close took one off only for the last name.
  metrics::ProxyMetrics m;
  double kgo = clients_gauge(m, "kgo-test", "1.0"), kadm = clients_gauge(m, "kadm-test", "1.0");
  {
    metrics::ConnectionMetrics connection(m, 0);
    connection.opened();
    connection.client_software("kgo-test", "1.0");
    connection.client_software("kgo-test", "1.0");  // the same announcement again counts nothing
    CHECK(clients_gauge(m, "kgo-test", "1.0") == kgo + 1);
    connection.client_software("kadm-test", "1.0");
    CHECK(clients_gauge(m, "kgo-test", "1.0") == kgo);
    CHECK(clients_gauge(m, "kadm-test", "1.0") == kadm + 1);
    connection.closed(proxy::CloseCategory::kClientClosed);
    CHECK(clients_gauge(m, "kadm-test", "1.0") == kadm);
    connection.client_software("kgo-test", "1.0");  // nothing counts after the close
  }
  CHECK(clients_gauge(m, "kgo-test", "1.0") == kgo);
  CHECK(clients_gauge(m, "kadm-test", "1.0") == kadm);
}

TEST_CASE("connection metrics: residence of the frames of one read, per API and direction (issue #32)") {
  using metrics::Direction;
  metrics::ProxyMetrics m;
  // Api keys no other test counts residence for.
  const int16_t a = 60, b = 61, c = 62, d = 63;
  auto before = [&](int16_t api, Direction dir) { return m.residence_count(api, dir); };
  uint64_t a0 = before(a, Direction::kRequest), b0 = before(b, Direction::kRequest), c0 = before(c, Direction::kRequest),
           d0 = before(d, Direction::kRequest), ar0 = before(a, Direction::kResponse);
  metrics::ConnectionMetrics connection(m, 0);
  connection.residence_begin(Direction::kRequest);
  connection.residence_begin(Direction::kResponse);
  CHECK_FALSE(connection.residence_pending(Direction::kRequest));
  connection.forwarded(Direction::kRequest, d);                              // left by an earlier read that never got written
  connection.residence_begin(Direction::kRequest);                           // forgotten when the next read begins
  for (int i = 0; i < 5; ++i) connection.forwarded(Direction::kRequest, a);  // five pipelined frames of one API
  connection.forwarded(Direction::kRequest, b);
  connection.forwarded(Direction::kRequest, c);
  connection.forwarded(Direction::kRequest, 64);
  connection.forwarded(Direction::kRequest, d);  // a fifth API in one read: not observed
  CHECK(connection.residence_pending(Direction::kRequest));
  CHECK_FALSE(connection.residence_pending(Direction::kResponse));
  auto arrived = std::chrono::steady_clock::now();
  connection.residence_written(Direction::kRequest, arrived, arrived + std::chrono::microseconds(30));
  CHECK_FALSE(connection.residence_pending(Direction::kRequest));
  CHECK(m.residence_count(a, Direction::kRequest) == a0 + 5);
  CHECK(m.residence_count(b, Direction::kRequest) == b0 + 1);
  CHECK(m.residence_count(c, Direction::kRequest) == c0 + 1);
  CHECK(m.residence_count(d, Direction::kRequest) == d0);
  CHECK(m.residence_count(a, Direction::kResponse) == ar0);
  // Written again with nothing pending: nothing more.
  connection.residence_written(Direction::kRequest, arrived, arrived);
  CHECK(m.residence_count(a, Direction::kRequest) == a0 + 5);
  // 30 µs falls in the le=5e-05 bucket and not below.
  CHECK(metrics::residence_bucket(std::chrono::microseconds(30)) == 3);
  CHECK(metrics::residence_bucket(std::chrono::microseconds(5)) == 0);
  CHECK(metrics::residence_bucket(std::chrono::seconds(2)) == metrics::kResidenceBuckets.size());
  std::string text = m.render();
  const char* name = codec::api_name(a);
  std::string label = name ? name : "unknown_" + std::to_string(a);
  CHECK(text.find("kproxy_proxy_residence_seconds_bucket{api=\"" + label + "\",direction=\"request\",le=\"5e-05\"}") != std::string::npos);
}
