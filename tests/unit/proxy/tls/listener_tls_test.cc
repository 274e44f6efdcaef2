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
  std::vector<tls::ListenerTls> tls;
  CHECK(tls::build_listener_tls(*loaded.config, tls) == "");
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
  std::vector<tls::ListenerTls> kept = tls;
  std::string error = tls::build_listener_tls(*loaded_bad.config, tls);
  CHECK(error ==
        "kproxy.yaml:6:24: listeners[0].upstream_tls.ca: cannot load '/nonexistent/ca.pem': No such file or directory\n"
        "kproxy.yaml:11:17: listeners[1].tls.cert: cannot load '/nonexistent/c.pem': No such file or directory");
  CHECK(tls.size() == 2);  // untouched on failure
  CHECK(tls[1].clients == kept[1].clients);
}

namespace {

/// One listener "edge" (port 0, kernel broker ports) with `sections` (YAML lines of the entry).
std::shared_ptr<const config::Config> edge_config(const std::string& sections) {
  std::string yaml =
      "listeners:\n"
      "  - name: edge\n    listen: 127.0.0.1:0\n    upstream: b:1\n    broker_ports: 0\n" +
      sections;
  auto loaded = config::load_config_string(yaml, "edge.yaml");
  REQUIRE_MESSAGE(loaded.ok(), loaded.error_text());
  return loaded.config;
}

}  // namespace

TEST_CASE("every build reads the certificate files again: a reload picks up a renewed or a broken file") {
  testing::TestPki pki;
  auto id = pki.issue("edge", "DNS:localhost");
  auto config = edge_config("    tls: {cert: " + id.cert + ", key: " + id.key + "}\n");
  std::vector<tls::ListenerTls> first;
  REQUIRE(tls::build_listener_tls(*config, first) == "");
  REQUIRE(first.size() == 1);
  REQUIRE(first[0].clients);
  CHECK_FALSE(first[0].upstream);

  // The same config, the file replaced by something that is no certificate: refused now.
  pki.write_text("edge.pem", "not a certificate\n");
  std::vector<tls::ListenerTls> broken = first;
  std::string error = tls::build_listener_tls(*config, broken);
  CHECK(error.rfind("edge.yaml:", 0) == 0);
  CHECK(error.find("listeners[0].tls.cert") != std::string::npos);
  CHECK(broken[0].clients == first[0].clients);  // what was running stays

  // Renewed (a new certificate and key under the same names): a new context.
  pki.issue("edge", "DNS:localhost");
  std::vector<tls::ListenerTls> renewed;
  REQUIRE(tls::build_listener_tls(*config, renewed) == "");
  REQUIRE(renewed[0].clients);
  CHECK(renewed[0].clients != first[0].clients);
}

TEST_CASE("upstream TLS alone: clients stay plaintext; both sections failing on one listener give two lines") {
  testing::TestPki pki;
  std::vector<tls::ListenerTls> out;
  REQUIRE(tls::build_listener_tls(*edge_config("    upstream_tls: {ca: " + pki.ca_file() + "}\n"), out) == "");
  REQUIRE(out.size() == 1);
  CHECK_FALSE(out[0].clients);
  CHECK(out[0].upstream);

  auto id = pki.issue("edge", "DNS:localhost");
  auto both_bad =
      edge_config("    tls: {cert: " + id.cert + ", key: /nonexistent/edge.key}\n    upstream_tls: {ca: /nonexistent/ca.pem}\n");
  std::string error = tls::build_listener_tls(*both_bad, out);
  INFO(error);
  CHECK(error.find("listeners[0].tls.key: cannot load '/nonexistent/edge.key'") != std::string::npos);
  CHECK(error.find("listeners[0].upstream_tls.ca: cannot load '/nonexistent/ca.pem'") != std::string::npos);
  CHECK(error.find('\n') != std::string::npos);
  CHECK(error.find('\n') == error.rfind('\n'));  // two lines: one newline between them, none after
  CHECK(error.back() != '\n');
  CHECK(out.size() == 1);
  CHECK(out[0].upstream);  // untouched
}
