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

/// The value of series `series` (name and labels, as rendered) in `m`, -1 when absent.
double sample(const metrics::ProxyMetrics& m, const std::string& series) {
  std::string text = m.render();
  std::string key = "\n" + series + " ";
  auto at = text.find(key);
  return at == std::string::npos ? -1 : std::stod(text.substr(at + key.size()));
}

const std::string kClientGauge = R"(kproxy_connections{listener="kafka",side="client"})";
const std::string kUpstreamGauge = R"(kproxy_connections{listener="kafka",side="upstream"})";
const std::string kInflight = "kproxy_inflight_requests";
std::string closed_series(const char* reason) {
  return std::string(R"(kproxy_connections_closed_total{listener="kafka",reason=")") + reason + "\"}";
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
    connection.closed(net::CloseCategory::kClientClosed);
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

TEST_CASE("connection metrics: open connections and in-flight requests count while open and are taken back by the close") {
  metrics::ProxyMetrics m;
  m.set_listener_names({"kafka"});
  metrics::ConnectionMetrics connection(m, 0);
  connection.opened();
  connection.upstream_connected();
  connection.upstream_connected();  // a second connect of the same connection counts nothing more
  CHECK(sample(m, kClientGauge) == 1);
  CHECK(sample(m, kUpstreamGauge) == 1);
  CHECK(sample(m, R"(kproxy_connections_opened_total{listener="kafka",side="upstream"})") == 1);
  for (int i = 0; i < 3; ++i) connection.request_pushed();
  connection.response_popped();
  CHECK(sample(m, kInflight) == 2);
  connection.closed(net::CloseCategory::kBrokerClosed);
  CHECK(sample(m, kClientGauge) == 0);
  CHECK(sample(m, kUpstreamGauge) == 0);
  CHECK(sample(m, kInflight) == 0);
  CHECK(sample(m, closed_series("broker_closed")) == 1);
  // Closed once: a second close, or a response popped after it, changes nothing.
  connection.closed(net::CloseCategory::kFault);
  connection.response_popped();
  CHECK(sample(m, closed_series("broker_closed")) == 1);
  CHECK(sample(m, closed_series("fault")) <= 0);
  CHECK(sample(m, kInflight) == 0);
  CHECK(sample(m, kClientGauge) == 0);
}

TEST_CASE("connection metrics: the destructor closes an open connection as other; one never opened counts no close") {
  metrics::ProxyMetrics m;
  m.set_listener_names({"kafka"});
  {
    metrics::ConnectionMetrics connection(m, 0);
    connection.opened();
    connection.request_pushed();
    connection.response_popped();
    connection.response_popped();  // more answers than requests: the gauge does not go below what it counted
    connection.request_pushed();
    CHECK(sample(m, kInflight) == 1);
  }
  CHECK(sample(m, kClientGauge) == 0);
  CHECK(sample(m, kInflight) == 0);
  CHECK(sample(m, closed_series("other")) == 1);
  {
    metrics::ConnectionMetrics refused(m, 0);  // accepted and closed before it was counted open
    refused.closed(net::CloseCategory::kLimit);
  }
  CHECK(sample(m, closed_series("limit")) <= 0);
  CHECK(sample(m, closed_series("other")) == 1);
  CHECK(sample(m, kClientGauge) == 0);
}

TEST_CASE("connection metrics: byte counts add up per connection; events count in the process's metrics") {
  metrics::ProxyMetrics m;
  metrics::ConnectionMetrics a(m, 0), b(m, 0);
  a.bytes_in(100);
  a.bytes_in(23);
  a.bytes_out(7);
  b.bytes_in(1);
  CHECK(a.bytes_in() == 123);
  CHECK(a.bytes_out() == 7);
  CHECK(b.bytes_in() == 1);
  CHECK(b.bytes_out() == 0);
  CHECK(&a.process() == &m);
  uint64_t before = m.total(metrics::ProxyEvent::kUpstreamConnectFailure);
  a.count(metrics::ProxyEvent::kUpstreamConnectFailure);
  b.count(metrics::ProxyEvent::kUpstreamConnectFailure, 4);
  CHECK(m.total(metrics::ProxyEvent::kUpstreamConnectFailure) == before + 5);
}
