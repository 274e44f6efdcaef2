#include "proxy/tls/listener_tls.h"

#include <doctest/doctest.h>

#include "config/config_loader.h"
#include "tests/unit/proxy/tls/test_pki.h"

using namespace kproxy;

TEST_CASE("every listener gets the contexts its sections ask for; errors of all listeners are reported") {
  testing::TestPki pki;
  auto id = pki.issue("kproxy", "DNS:localhost");
  std::string yaml =
      "listeners:\n"
      "  - name: plain\n    listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 9100\n"
      "  - name: both\n    listen: 127.0.0.1:9093\n    upstream: b:9093\n    broker_ports: 9200\n"
      "    tls: {cert: " +
      id.cert + ", key: " + id.key +
      "}\n"
      "    upstream_tls: {ca: " +
      pki.ca_file() + "}\n";
  auto loaded = config::load_config_string(yaml, "kproxy.yaml");
  REQUIRE_MESSAGE(loaded.ok(), loaded.error_text());
  std::vector<proxy::tls::ListenerTls> tls;
  CHECK(proxy::tls::build_listener_tls(*loaded.config, tls) == "");
  REQUIRE(tls.size() == 2);
  CHECK_FALSE(tls[0].clients);
  CHECK_FALSE(tls[0].upstream);
  CHECK(tls[1].clients);
  CHECK(tls[1].upstream);

  std::string bad =
      "listeners:\n"
      "  - name: a\n    listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 9100\n"
      "    upstream_tls: {ca: /nonexistent/ca.pem}\n"
      "  - name: b\n    listen: 127.0.0.1:9093\n    upstream: b:9093\n    broker_ports: 9200\n"
      "    tls: {cert: /nonexistent/c.pem, key: " +
      id.key + "}\n";
  auto loaded_bad = config::load_config_string(bad, "kproxy.yaml");
  REQUIRE_MESSAGE(loaded_bad.ok(), loaded_bad.error_text());
  std::vector<proxy::tls::ListenerTls> kept = tls;
  std::string error = proxy::tls::build_listener_tls(*loaded_bad.config, tls);
  CHECK(error ==
        "kproxy.yaml:6:24: listeners[0].upstream_tls.ca: cannot load '/nonexistent/ca.pem': No such file or directory\n"
        "kproxy.yaml:11:17: listeners[1].tls.cert: cannot load '/nonexistent/c.pem': No such file or directory");
  CHECK(tls.size() == 2);  // untouched on failure
  CHECK(tls[1].clients == kept[1].clients);
}
