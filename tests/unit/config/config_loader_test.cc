#include "config/config_loader.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include <unistd.h>

#include "tests/unit/support/text.h"

using namespace kproxy::config;
using kproxy::testing::contains;

namespace {

const char* kMinimal = R"(listeners:
  - name: kafka
    listen: 127.0.0.1:9092
    upstream: broker-1:9092
    broker_ports: 9100
)";

// The first error of loading `yaml` as "test.yaml".
ConfigError first_error(const std::string& yaml) {
  auto r = load_config_string(yaml, "test.yaml");
  REQUIRE_FALSE(r.ok());
  REQUIRE_FALSE(r.errors.empty());
  return r.errors.front();
}

}  // namespace

TEST_CASE("a minimal config gets every default") {
  auto r = load_config_string(kMinimal, "test.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  const Config& c = *r.config;
  REQUIRE(c.listeners.size() == 1);
  const auto& l = c.listeners[0];
  CHECK(l.name == "kafka");
  CHECK(l.listen == HostPort{"127.0.0.1", 9092});
  CHECK(l.upstream == HostPort{"broker-1", 9092});
  CHECK(l.advertise == "127.0.0.1");  // a specific listen host is advertised by default
  CHECK(l.broker_ports.scheme == BrokerPorts::Scheme::kNodeIdOffset);
  CHECK(l.broker_ports.base == 9100);
  CHECK(c.limits.max_request_frame_bytes == 100 * kMiB);
  CHECK(c.limits.max_response_frame_bytes == 256 * kMiB);
  CHECK(c.limits.max_connections == 10000);
  CHECK(c.limits.connect_timeout == std::chrono::seconds(10));
  CHECK(c.limits.tls_handshake_timeout == std::chrono::seconds(10));
  CHECK(c.limits.request_completion_timeout == std::chrono::seconds(30));
  CHECK(c.limits.first_request_timeout == std::chrono::seconds(30));
  CHECK(c.drain_timeout == std::chrono::seconds(30));
  CHECK(c.workers == 0);
  CHECK(c.worker_count() >= 1);
  CHECK(c.log.format == LogConfig::Format::kText);
  CHECK(c.log.level == "info");
  CHECK_FALSE(c.admin.listen.has_value());
  CHECK(c.api_versions.yaml.empty());
}

TEST_CASE("every section is read") {
  auto r = load_config_string(R"(listeners:
  - name: east
    listen: 0.0.0.0:9092
    upstream: "[::1]:9093"
    advertise: proxy.example
    broker_port_range: 9100-9131
admin: { listen: 127.0.0.1:9644 }
limits:
  max_request_frame_bytes: 1MiB
  max_response_frame_bytes: 64KiB
  max_connections: 5
  connect_timeout: 250ms
  tls_handshake_timeout: 3s
  request_completion_timeout: 20s
  first_request_timeout: 1500ms
workers: 3
drain_timeout: 2m
log: { format: json, level: debug }
api_versions:
  - { api: Produce, max: 9 }
faults:
  - name: f
    action: { error: PRODUCER_FENCED }
)",
                              "full.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  const Config& c = *r.config;
  CHECK(c.listeners[0].upstream == HostPort{"::1", 9093});
  CHECK(c.listeners[0].advertise == "proxy.example");
  CHECK(c.listeners[0].broker_ports.scheme == BrokerPorts::Scheme::kInOrder);
  CHECK(c.listeners[0].broker_ports.first == 9100);
  CHECK(c.listeners[0].broker_ports.last == 9131);
  REQUIRE(c.admin.listen.has_value());
  CHECK(c.admin.listen->port == 9644);
  CHECK(c.limits.max_request_frame_bytes == kMiB);
  CHECK(c.limits.max_response_frame_bytes == 64 * 1024);
  CHECK(c.limits.max_connections == 5);
  CHECK(c.limits.connect_timeout == std::chrono::milliseconds(250));
  CHECK(c.limits.request_completion_timeout == std::chrono::seconds(20));
  CHECK(c.limits.first_request_timeout == std::chrono::milliseconds(1500));
  CHECK(c.limits.tls_handshake_timeout == std::chrono::seconds(3));
  CHECK(c.worker_count() == 3);
  CHECK(c.drain_timeout == std::chrono::minutes(2));
  CHECK(c.log.format == LogConfig::Format::kJson);
  CHECK(c.log.level == "debug");
  CHECK(c.api_versions.line == 19);
  CHECK(c.api_versions.yaml.find("Produce") != std::string::npos);
  CHECK(c.faults.line == 21);
  CHECK(c.faults.yaml.find("PRODUCER_FENCED") != std::string::npos);
}

TEST_CASE("errors name the file, line and column") {
  SUBCASE("unknown top-level key") {
    auto e = first_error(std::string(kMinimal) + "wokers: 2\n");
    CHECK(e.file == "test.yaml");
    CHECK(e.line == 6);
    CHECK(e.column == 1);
    CHECK(e.reason.find("wokers: unknown key") != std::string::npos);
    CHECK(e.to_string().rfind("test.yaml:6:1: wokers: unknown key", 0) == 0);
  }
  SUBCASE("bad port") {
    auto e = first_error("listeners:\n  - listen: 127.0.0.1:99999\n    upstream: b:9092\n    broker_ports: 9100\n");
    CHECK(e.line == 2);
    CHECK(e.column == 13);
    CHECK(e.reason.find("listeners[0].listen") != std::string::npos);
    CHECK(e.reason.find("1 to 65535") != std::string::npos);
  }
  SUBCASE("invalid YAML") {
    auto e = first_error("listeners: [\n");
    CHECK(e.line >= 1);
    CHECK(e.reason.find("invalid YAML") != std::string::npos);
  }
  SUBCASE("missing listeners") {
    auto e = first_error("workers: 2\n");
    CHECK(e.reason.find("listeners: missing") != std::string::npos);
  }
  SUBCASE("empty file") { CHECK(first_error("").reason.find("empty") != std::string::npos); }
  SUBCASE("wildcard listen needs advertise") {
    auto e = first_error("listeners:\n  - listen: 0.0.0.0:9092\n    upstream: b:9092\n    broker_ports: 9100\n");
    CHECK(e.reason.find("advertise: missing") != std::string::npos);
  }
  SUBCASE("no broker port scheme") {
    auto e = first_error("listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9092\n");
    CHECK(e.reason.find("missing broker_ports") != std::string::npos);
  }
  SUBCASE("both broker port schemes") {
    auto e = first_error(
        "listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 9100\n    broker_port_range: 9200-9210\n");
    CHECK(e.line == 5);
    CHECK(e.reason.find("not both") != std::string::npos);
  }
  SUBCASE("range containing the listen port") {
    auto e = first_error("listeners:\n  - listen: 127.0.0.1:9100\n    upstream: b:9092\n    broker_port_range: 9100-9110\n");
    CHECK(e.reason.find("own port") != std::string::npos);
  }
  SUBCASE("duplicate names and ports") {
    auto r = load_config_string(
        std::string(kMinimal) + "  - name: kafka\n    listen: 127.0.0.1:9092\n    upstream: c:9092\n    broker_ports: 9200\n", "test.yaml");
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors.size() == 2);
    CHECK(r.error_text().find("used by another listener") != std::string::npos);
    CHECK(r.error_text().find("port 9092 is also used") != std::string::npos);
  }
  SUBCASE("bad values") {
    CHECK(first_error(std::string(kMinimal) + "workers: 0\n").reason.find("workers") != std::string::npos);
    CHECK(first_error(std::string(kMinimal) + "drain_timeout: soon\n").reason.find("not a duration") != std::string::npos);
    CHECK(first_error(std::string(kMinimal) + "log: { format: xml }\n").reason.find("text, json") != std::string::npos);
    CHECK(first_error(std::string(kMinimal) + "log: { level: loud }\n").reason.find("log.level") != std::string::npos);
    CHECK(first_error(std::string(kMinimal) + "limits: { max_request_frame_bytes: 3GiB }\n").reason.find("int32") != std::string::npos);
    CHECK(first_error(std::string(kMinimal) + "limits: { max_connections: many }\n").reason.find("max_connections") != std::string::npos);
    CHECK(first_error(std::string(kMinimal) + "limits: { tls_handshake_timeout: 0s }\n").reason ==
          "limits.tls_handshake_timeout: must be more than 0 (a client gets that long to finish its TLS handshake)");
    CHECK(first_error(std::string(kMinimal) + "limits: { request_completion_timeout: 0s }\n").reason ==
          "limits.request_completion_timeout: must be more than 0 (a request frame gets that long from its first byte to its last)");
    CHECK(first_error(std::string(kMinimal) + "limits: { first_request_timeout: 0ms }\n").reason ==
          "limits.first_request_timeout: must be more than 0 (a new connection gets that long to send its first whole request)");
    CHECK(first_error(std::string(kMinimal) + "limits: { bogus: 1 }\n").reason.find("limits.bogus: unknown key") != std::string::npos);
    CHECK(first_error(std::string(kMinimal) + "faults: { a: 1 }\n").reason.find("expected a list") != std::string::npos);
  }
}

TEST_CASE("all errors are reported, not only the first") {
  auto r = load_config_string("listeners:\n  - listen: nope\n    upstream: also-nope\n    broker_ports: -1\nworkers: x\n", "test.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.errors.size() == 4);
}

TEST_CASE("unreadable file") {
  auto r = load_config_file("/nonexistent/kproxy.yaml");
  REQUIRE_FALSE(r.ok());
  CHECK(r.errors[0].to_string() == "/nonexistent/kproxy.yaml: cannot open the config file");
}

TEST_CASE("the example configs are valid") {
  for (const char* name : {"sidecar.yaml", "chaos.yaml", "two-clusters.yaml", "tls.yaml", "sni-gateway.yaml"}) {
    auto r = load_config_file(std::string(KPROXY_SOURCE_DIR) + "/config/examples/" + name);
    CHECK_MESSAGE(r.ok(), name, ": ", r.error_text());
  }
}

TEST_CASE("durations and sizes") {
  CHECK(parse_duration("30s") == std::chrono::seconds(30));
  CHECK(parse_duration("30") == std::chrono::seconds(30));
  CHECK(parse_duration("500ms") == std::chrono::milliseconds(500));
  CHECK(parse_duration("1h") == std::chrono::hours(1));
  CHECK_FALSE(parse_duration("").has_value());
  CHECK_FALSE(parse_duration("5 days").has_value());
  CHECK_FALSE(parse_duration("-1s").has_value());
  CHECK(parse_byte_size("100MiB") == 100 * kMiB);
  CHECK(parse_byte_size("1024") == 1024);
  CHECK(parse_byte_size("10MB") == 10'000'000);
  CHECK_FALSE(parse_byte_size("lots").has_value());
  CHECK_FALSE(parse_byte_size("5PiB").has_value());
}

TEST_CASE("several bootstrap servers") {
  auto r = load_config_string("listeners:\n  - listen: 127.0.0.1:9092\n    upstream: a:9092, b:9093\n    broker_ports: 9100\n", "t.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  REQUIRE(r.config->listeners[0].upstreams.size() == 2);
  CHECK(r.config->listeners[0].upstreams[1] == HostPort{"b", 9093});
  CHECK(r.config->listeners[0].upstream == HostPort{"a", 9092});
  auto list = load_config_string("listeners:\n  - listen: 127.0.0.1:9092\n    upstream: [a:9092, c:1]\n    broker_ports: 9100\n", "t.yaml");
  REQUIRE(list.ok());
  CHECK(list.config->listeners[0].upstreams.size() == 2);
  auto bad = load_config_string("listeners:\n  - listen: 127.0.0.1:9092\n    upstream: [a:9092, nope]\n    broker_ports: 9100\n", "t.yaml");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.errors[0].reason.find("upstream[1]") != std::string::npos);
  CHECK(bad.errors[0].line == 3);
}

TEST_CASE("tls and upstream_tls sections") {
  auto r = load_config_string(R"(listeners:
  - name: kafka
    listen: 127.0.0.1:9092
    upstream: broker-1:9093
    broker_ports: 9100
    tls:
      cert: /etc/kproxy/server.pem
      key: /etc/kproxy/server.key
      client_ca: /etc/kproxy/clients.pem
      min_version: "1.3"
    upstream_tls:
      ca: /etc/kproxy/ca.pem
      cert: /etc/kproxy/client.pem
      key: /etc/kproxy/client.key
      verify_hostname: false
  - name: system-cas
    listen: 127.0.0.1:9093
    upstream: broker-2:9093
    broker_ports: 9200
    upstream_tls:
)",
                              "tls.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  const auto& l = r.config->listeners[0];
  REQUIRE(l.tls.has_value());
  CHECK(l.tls->cert.path == "/etc/kproxy/server.pem");
  CHECK(l.tls->cert.key_path == "listeners[0].tls.cert");
  CHECK(l.tls->cert.line == 7);
  CHECK(l.tls->cert.column == 13);
  CHECK(l.tls->key.path == "/etc/kproxy/server.key");
  CHECK(l.tls->client_ca.path == "/etc/kproxy/clients.pem");
  CHECK(l.tls->client_auth == ClientAuth::kRequired);  // the default once client_ca is given
  CHECK(l.tls->min_version == TlsVersion::kTls13);
  REQUIRE(l.upstream_tls.has_value());
  CHECK(l.upstream_tls->ca.path == "/etc/kproxy/ca.pem");
  CHECK(l.upstream_tls->cert.path == "/etc/kproxy/client.pem");
  CHECK(l.upstream_tls->key.path == "/etc/kproxy/client.key");
  CHECK_FALSE(l.upstream_tls->verify_hostname);
  CHECK(l.upstream_tls->min_version == TlsVersion::kTls12);
  const auto& s = r.config->listeners[1];
  CHECK_FALSE(s.tls.has_value());
  REQUIRE(s.upstream_tls.has_value());
  CHECK_FALSE(s.upstream_tls->ca.given());
  CHECK(s.upstream_tls->verify_hostname);
}

TEST_CASE("tls errors name the file, line and column") {
  auto listener = [](const std::string& extra) {
    return "listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9093\n    broker_ports: 9100\n" + extra;
  };
  auto e = first_error(listener("    tls:\n      cert: /c.pem\n"));
  CHECK(e.to_string() == "test.yaml:6:7: listeners[0].tls.key: missing (the PEM private key of listeners[0].tls.cert)");
  e = first_error(listener("    upstream_tls:\n      cert: /c.pem\n"));
  CHECK(e.to_string() == "test.yaml:6:7: listeners[0].upstream_tls: give both cert and key (a client certificate for mTLS), or neither");
  e = first_error(listener("    upstream_tls:\n      min_version: \"1.1\"\n"));
  CHECK(e.to_string() == "test.yaml:6:20: listeners[0].upstream_tls.min_version: '1.1' is not a TLS version (\"1.2\" or \"1.3\")");
  e = first_error(listener("    upstream_tls:\n      verify_hostname: maybe\n"));
  CHECK(e.to_string() == "test.yaml:6:24: listeners[0].upstream_tls.verify_hostname: 'maybe' is not true or false");
  e = first_error(listener("    tls:\n      cert: /c.pem\n      key: /k.pem\n      client_auth: required\n"));
  CHECK(e.to_string() == "test.yaml:8:20: listeners[0].tls.client_auth: verifying client certificates needs listeners[0].tls.client_ca");
  e = first_error(listener("    upstream_tls:\n      cafile: /ca.pem\n"));
  CHECK(e.reason.find("listeners[0].upstream_tls.cafile: unknown key") == 0);
}

namespace {
std::string with_admin(const std::string& admin) { return std::string(kMinimal) + "admin:\n  listen: 127.0.0.1:9644\n" + admin; }
}  // namespace

TEST_CASE("admin.token_file and admin.token_env give the bearer token") {
  std::string path = "/tmp/kproxy-config-test-token-" + std::to_string(::getpid());
  {
    std::ofstream out(path);
    out << "  s3cr3t-t0ken\n";
  }
  auto r = load_config_string(with_admin("  token_file: " + path + "\n"), "t.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  CHECK(r.config->admin.token == "s3cr3t-t0ken");
  CHECK(r.config->admin.token_origin == "file " + path);

  ::setenv("KPROXY_CONFIG_TEST_TOKEN", "from-env", 1);
  auto e = load_config_string(with_admin("  token_env: KPROXY_CONFIG_TEST_TOKEN\n"), "t.yaml");
  REQUIRE_MESSAGE(e.ok(), e.error_text());
  CHECK(e.config->admin.token == "from-env");
  CHECK(e.config->admin.token_origin == "env KPROXY_CONFIG_TEST_TOKEN");

  auto none = load_config_string(with_admin(""), "t.yaml");
  REQUIRE(none.ok());
  CHECK_FALSE(none.config->admin.token);

  auto expect_error = [](const std::string& yaml, const std::string& text) {
    auto bad = load_config_string(yaml, "t.yaml");
    CHECK_FALSE(bad.ok());
    INFO(bad.error_text());
    CHECK(bad.error_text().find("t.yaml:") != std::string::npos);
    CHECK(bad.error_text().find(text) != std::string::npos);
  };
  expect_error(with_admin("  token_file: " + path + "\n  token_env: KPROXY_CONFIG_TEST_TOKEN\n"), "not both");
  expect_error(with_admin("  token_file: /nonexistent/kproxy-token\n"), "cannot read '/nonexistent/kproxy-token'");
  ::unsetenv("KPROXY_CONFIG_TEST_UNSET");
  expect_error(with_admin("  token_env: KPROXY_CONFIG_TEST_UNSET\n"), "'KPROXY_CONFIG_TEST_UNSET' is not set");
  {
    std::ofstream out(path);
    out << "\n \n";
  }
  expect_error(with_admin("  token_file: " + path + "\n"), "the token is empty");
  {
    std::ofstream out(path);
    out << "two words\n";
  }
  expect_error(with_admin("  token_file: " + path + "\n"), "spaces or control characters");
  expect_error(with_admin("  token: inline\n"), "admin.token: unknown key");
  ::unsetenv("KPROXY_CONFIG_TEST_TOKEN");
  std::remove(path.c_str());
}

TEST_CASE("metrics and tap sections") {
  auto defaults = load_config_string(kMinimal, "t.yaml");
  REQUIRE(defaults.ok());
  CHECK(defaults.config->metrics.frames);
  CHECK_FALSE(defaults.config->metrics.topic_labels);
  CHECK_FALSE(defaults.config->metrics.client_id_labels);
  CHECK(defaults.config->metrics.max_label_values == 100);
  CHECK_FALSE(defaults.config->tap.records);
  CHECK(defaults.config->tap.max_record_bytes == 256);

  auto r = load_config_string(std::string(kMinimal) +
                                  "metrics: { frames: off, topic_labels: true, client_id_labels: yes, max_label_values: 20 }\n"
                                  "tap: { records: on, max_record_bytes: 64, max_records: 5 }\n",
                              "t.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  CHECK_FALSE(r.config->metrics.frames);
  CHECK(r.config->metrics.topic_labels);
  CHECK(r.config->metrics.client_id_labels);
  CHECK(r.config->metrics.max_label_values == 20);
  CHECK(r.config->tap.records);
  CHECK(r.config->tap.max_record_bytes == 64);
  CHECK(r.config->tap.max_records == 5);

  auto bad = load_config_string(std::string(kMinimal) + "metrics:\n  topic_labels: maybe\n  max_label_values: 0\ntap:\n  recordz: true\n",
                                "t.yaml");
  REQUIRE_FALSE(bad.ok());
  std::string text = bad.error_text();
  CHECK(text.find("t.yaml:") != std::string::npos);
  CHECK(text.find("metrics.topic_labels: 'maybe' is not true or false") != std::string::npos);
  CHECK(text.find("metrics.max_label_values: '0' is not a number from 1 to 10000") != std::string::npos);
  CHECK(text.find("tap.recordz: unknown key") != std::string::npos);
}

TEST_CASE("the admin API listens only where admin.listen says, never on an implied wildcard") {
  // No admin section: no admin listener at all (the examples bind 127.0.0.1).
  CHECK_FALSE(load_config_string(kMinimal, "test.yaml").config->admin.listen.has_value());
  // A port without a host is refused rather than bound to every interface.
  CHECK(first_error(std::string(kMinimal) + "admin: { listen: \":9644\" }\n").reason.find("empty host") != std::string::npos);
  CHECK(first_error(std::string(kMinimal) + "admin: { listen: \"9644\" }\n").reason.find("admin.listen") != std::string::npos);
}

TEST_CASE("toxiproxy: off by default; listen and max_proxies checked like the rest (issue #34)") {
  auto defaults = load_config_string(kMinimal, "test.yaml");
  REQUIRE(defaults.ok());
  CHECK_FALSE(defaults.config->toxiproxy.listen.has_value());
  CHECK(defaults.config->toxiproxy.max_proxies == 64);
  auto on = load_config_string(std::string(kMinimal) + "toxiproxy: { listen: 127.0.0.1:8474, max_proxies: 5 }\n", "test.yaml");
  REQUIRE(on.ok());
  REQUIRE(on.config->toxiproxy.listen.has_value());
  CHECK(on.config->toxiproxy.listen->to_string() == "127.0.0.1:8474");
  CHECK(on.config->toxiproxy.max_proxies == 5);
  auto kernel = load_config_string(std::string(kMinimal) + "toxiproxy: { listen: 127.0.0.1:0 }\n", "test.yaml");
  REQUIRE(kernel.ok());
  CHECK(kernel.config->toxiproxy.listen->port == 0);

  auto bad = first_error(std::string(kMinimal) + "toxiproxy: { listen: \"8474\" }\n");
  CHECK(bad.line == 6);
  CHECK(bad.reason.find("toxiproxy.listen") != std::string::npos);
  CHECK(
      first_error(std::string(kMinimal) + "toxiproxy: { listen: 127.0.0.1:8474, max_proxies: 0 }\n").reason.find("toxiproxy.max_proxies") !=
      std::string::npos);
  CHECK(first_error(std::string(kMinimal) + "toxiproxy: { lisen: 127.0.0.1:8474 }\n").reason.find("toxiproxy.lisen: unknown key") !=
        std::string::npos);
  // The same port as the admin API or a listener is refused, as between those two.
  CHECK(first_error(std::string(kMinimal) + "admin: { listen: 127.0.0.1:8474 }\ntoxiproxy: { listen: 127.0.0.1:8474 }\n")
            .reason.find("toxiproxy.listen: port 8474 overlaps admin.listen") != std::string::npos);
  CHECK(
      first_error(std::string(kMinimal) + "toxiproxy: { listen: 127.0.0.1:9092 }\n").reason.find("toxiproxy.listen: port 9092 overlaps") !=
      std::string::npos);
}

TEST_CASE("limits.max_fault_rules: default 1000, a positive number") {
  auto defaults = load_config_string(kMinimal, "test.yaml");
  REQUIRE(defaults.ok());
  CHECK(defaults.config->limits.max_fault_rules == 1000);
  auto set = load_config_string(std::string(kMinimal) + "limits: { max_fault_rules: 5 }\n", "test.yaml");
  REQUIRE_MESSAGE(set.ok(), set.error_text());
  CHECK(set.config->limits.max_fault_rules == 5);
  CHECK(first_error(std::string(kMinimal) + "limits: { max_fault_rules: 0 }\n").reason ==
        "limits.max_fault_rules: '0' is not a positive number");
}

namespace {

// No ephemeral-range warnings unless a test asks for them (the host's range is not the test's).
LoadOptions no_host() {
  LoadOptions o;
  o.ephemeral_ports = nullptr;
  return o;
}

LoadResult load(const std::string& yaml, const LoadOptions& options = no_host()) { return load_config_string(yaml, "test.yaml", options); }

// Two listeners; `east_ports` and `west_ports` are their broker port keys, `extra` more YAML.
std::string two_listeners(const std::string& east_ports, const std::string& west_ports, const std::string& extra = "") {
  return "listeners:\n"
         "  - name: east\n"
         "    listen: 127.0.0.1:9092\n"
         "    upstream: east:9092\n"
         "    " +
         east_ports +
         "\n"
         "  - name: west\n"
         "    listen: 127.0.0.1:9192\n"
         "    upstream: west:9092\n"
         "    " +
         west_ports + "\n" + extra;
}

}  // namespace

TEST_CASE("a key given twice is refused at its second occurrence") {
  auto r = load(std::string(kMinimal) + "workers: 2\nlog: { level: info, level: debug }\nworkers: 3\n");
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.errors.size() == 2);
  CHECK(r.errors[0].to_string() ==
        "test.yaml:7:21: log.level: duplicate key (first given at line 7, column 8; YAML would silently keep only one)");
  CHECK(r.errors[1].line == 8);
  CHECK(r.errors[1].column == 1);
  CHECK(r.errors[1].reason.rfind("workers: duplicate key (first given at line 6, column 1", 0) == 0);
  // Inside the sections the loader passes on (faults:), too.
  auto f = load(std::string(kMinimal) + "faults:\n  - name: a\n    name: b\n    action: { error: PRODUCER_FENCED }\n");
  REQUIRE_FALSE(f.ok());
  CHECK(f.errors[0].to_string().rfind("test.yaml:8:5: faults[0].name: duplicate key", 0) == 0);
}

TEST_CASE("an alias bomb is refused before it expands") {
  // 9 levels of 10 aliases each: 10^9 nodes once expanded, a few hundred bytes of text.
  std::string yaml = std::string(kMinimal) + "faults:\n  - &a0 [x, x, x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i <= 9; ++i) {
    std::string prev = "*a" + std::to_string(i - 1);
    yaml += "  - &a" + std::to_string(i) + " [" + prev;
    for (int k = 1; k < 10; ++k) yaml += ", " + prev;
    yaml += "]\n";
  }
  CHECK(yaml.size() < 700);
  auto started = std::chrono::steady_clock::now();
  auto r = load(yaml);
  auto took = std::chrono::steady_clock::now() - started;
  REQUIRE_FALSE(r.ok());
  REQUIRE(r.errors.size() == 1);
  CHECK(r.errors[0].line >= 6);
  CHECK(r.errors[0].column >= 1);
  CHECK(r.errors[0].reason.find("more than 100000 YAML nodes") != std::string::npos);
  CHECK(took < std::chrono::seconds(5));
  // Anchors and aliases themselves are fine.
  auto ok = load(std::string(kMinimal) + "limits: &l { max_connections: 5 }\n");
  CHECK_MESSAGE(ok.ok(), ok.error_text());
}

TEST_CASE("an alias counts its nodes at every use, and its depth where it is used") {
  // One anchored list of 1,000 nodes (the list and 999 scalars), used N times.
  auto uses = [](int n) {
    std::string yaml = std::string(kMinimal) + "faults:\n  - &big [x";
    for (int i = 1; i < 999; ++i) yaml += ", x";
    yaml += "]\n";
    for (int i = 0; i < n; ++i) yaml += "  - *big\n";
    return yaml;
  };
  auto refused_for_size = [](const kproxy::config::LoadResult& r) {
    for (const auto& e : r.errors) {
      if (e.reason.find("more than 100000 YAML nodes") != std::string::npos) return true;
    }
    return false;
  };
  auto under = load(uses(90));  // about 91,000 nodes: read on
  CHECK_FALSE(refused_for_size(under));
  auto over = load(uses(110));  // about 111,000 nodes
  REQUIRE_FALSE(over.ok());
  CHECK(refused_for_size(over));
  CHECK(over.errors.size() == 1);
  // A list 40 deep is fine at the top; used 30 levels down it would nest 70 deep.
  const std::string deep = std::string(40, '[') + "x" + std::string(40, ']');
  auto shallow = load(std::string(kMinimal) + "faults:\n  - &deep " + deep + "\n  - *deep\n");
  for (const auto& e : shallow.errors) CHECK(e.reason.find("levels deep") == std::string::npos);
  auto nested =
      load(std::string(kMinimal) + "faults:\n  - &deep " + deep + "\n  - " + std::string(30, '[') + "*deep" + std::string(30, ']') + "\n");
  REQUIRE_FALSE(nested.ok());
  CHECK(nested.errors[0].reason.find("nested more than 64 levels deep") != std::string::npos);
}

TEST_CASE("nesting deeper than kMaxConfigDepth is refused") {
  const size_t levels = kMaxConfigDepth + 5;
  std::string deep = std::string(kMinimal) + "faults: " + std::string(levels, '[') + std::string(levels, ']') + "\n";
  auto r = load(deep);
  REQUIRE_FALSE(r.ok());
  CHECK(r.errors[0].line == 6);
  CHECK(r.errors[0].reason.find("nested more than 64 levels deep") != std::string::npos);
}

TEST_CASE("no port is claimed by two parts of the config") {
  SUBCASE("overlapping broker_port_ranges (issue #15 bug 4)") {
    auto r = load(two_listeners("broker_port_range: 9100-9103", "broker_port_range: 9102-9110"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].to_string() ==
          "test.yaml:9:24: listeners[1].broker_port_range: ports 9102-9110 overlaps listeners[0].broker_port_range (the broker ports of "
          "listener 'east', ports 9100-9103): port 9102 would be claimed by both, and clients of one would reach the other");
  }
  SUBCASE("a range holding another listener's bootstrap port") {
    auto r = load(two_listeners("broker_port_range: 9190-9199", "broker_ports: 9300"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].line == 7);
    CHECK(r.errors[0].column == 13);
    CHECK(r.errors[0].reason.find("listeners[1].listen: port 9192 overlaps listeners[0].broker_port_range") != std::string::npos);
  }
  SUBCASE("admin.listen on a listener's port (issue #15 bug 3)") {
    auto r = load(two_listeners("broker_ports: 9100", "broker_ports: 9200", "admin: { listen: 127.0.0.1:9192 }\n"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].to_string().rfind(
              "test.yaml:10:18: admin.listen: port 9192 overlaps listeners[1].listen (the bootstrap port of listener 'west'", 0) == 0);
  }
  SUBCASE("admin.listen inside a broker range") {
    auto r = load(two_listeners("broker_port_range: 9100-9110", "broker_ports: 9200", "admin: { listen: 127.0.0.1:9105 }\n"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].reason.find("admin.listen: port 9105 overlaps listeners[0].broker_port_range") != std::string::npos);
  }
  SUBCASE("two listeners with one broker_ports base") {
    auto r = load(two_listeners("broker_ports: 9100", "broker_ports: 9100"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].line == 9);
    CHECK(r.errors[0].reason.find(
              "listeners[1].broker_ports: port 9100 overlaps listeners[0].broker_ports (broker node 0 of listener 'east'") !=
          std::string::npos);
  }
  SUBCASE("a base whose node 0 is another listener's port") {
    auto r = load(two_listeners("broker_ports: 9192", "broker_ports: 9200"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].reason.find("listeners[1].listen: port 9192 overlaps listeners[0].broker_ports") != std::string::npos);
  }
  SUBCASE("a base + a node id advertise names lands on another listener's port (issue #46)") {
    auto r = load(two_listeners("broker_ports: 9100\n    advertise: \"1=h:9001,92=h:9002\"", "broker_ports: 9200"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].to_string() ==
          "test.yaml:8:13: listeners[1].listen: port 9192 overlaps listeners[0].broker_ports (broker node 92 of listener 'east', base "
          "9100 + node 92 (named in advertise), port 9192): port 9192 would be claimed by both, and clients of one would reach the other");
    // The other way round: the listener with the advertised nodes comes second.
    r = load(two_listeners("broker_ports: 9300", "broker_ports: 9000\n    advertise: \"92=h:9002\""));
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].to_string().rfind("test.yaml:9:19: listeners[1].broker_ports: port 9092 overlaps listeners[0].listen", 0) == 0);
    // Its own bootstrap port.
    r = load(two_listeners("broker_ports: 9000\n    advertise: \"92=h:9002\"", "broker_ports: 9200"));
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].reason ==
          "listeners[0].broker_ports: base 9000 + node 92 (named in advertise) would give node 92 the bootstrap port 9092");
  }
  SUBCASE("distinct ports load, whatever base + node id may reach later (refused at discovery)") {
    auto r = load(two_listeners("broker_ports: 9100", "broker_port_range: 9200-9203", "admin: { listen: 127.0.0.1:9644 }\n"));
    CHECK_MESSAGE(r.ok(), r.error_text());
  }
}

TEST_CASE("max_broker_ports") {
  auto r = load(kMinimal);
  REQUIRE(r.ok());
  CHECK(r.config->listeners[0].broker_ports.max_ports == kDefaultMaxBrokerPorts);
  auto set = load(std::string(kMinimal) + "    max_broker_ports: 8\n");
  REQUIRE_MESSAGE(set.ok(), set.error_text());
  CHECK(set.config->listeners[0].broker_ports.max_ports == 8);
  auto bad = load(std::string(kMinimal) + "    max_broker_ports: 0\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(bad.errors[0].to_string() == "test.yaml:6:23: listeners[0].max_broker_ports: '0' is not a number from 1 to 65535");
}

TEST_CASE("advertise: a host and/or per node host:port (docs/toxiproxy.md \"Kafka-aware proxies\")") {
  auto nodes = load(
      "listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 9100\n"
      "    advertise: \"1=localhost:32771,2=localhost:32772\"\n");
  REQUIRE_MESSAGE(nodes.ok(), nodes.error_text());
  const auto& l = nodes.config->listeners[0];
  CHECK(l.advertise == "127.0.0.1");  // brokers not listed: the listen host
  CHECK(l.advertise_nodes == std::map<int32_t, HostPort>{{1, {"localhost", 32771}}, {2, {"localhost", 32772}}});
  // A wildcard listen: brokers not listed get the first node's host, unless a host is given.
  auto wild = load("listeners:\n  - listen: 0.0.0.0:9092\n    upstream: b:9092\n    broker_ports: 9100\n    advertise: 3=gw:1,4=gw2:2\n");
  REQUIRE_MESSAGE(wild.ok(), wild.error_text());
  CHECK(wild.config->listeners[0].advertise == "gw");
  auto host = load("listeners:\n  - listen: 0.0.0.0:9092\n    upstream: b:9092\n    broker_ports: 9100\n    advertise: h.example,3=gw:1\n");
  REQUIRE_MESSAGE(host.ok(), host.error_text());
  CHECK(host.config->listeners[0].advertise == "h.example");
  CHECK(host.config->listeners[0].advertise_nodes.size() == 1);
  auto plain = load(kMinimal);
  CHECK(plain.config->listeners[0].advertise_nodes.empty());

  auto bad = load("listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 9100\n    advertise: localhost:32771\n");
  REQUIRE_FALSE(bad.ok());
  CHECK(contains(bad.errors[0].to_string(), "test.yaml:5:16: listeners[0].advertise: 'localhost:32771': a host:port needs a node id"));
  auto port = load("listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 9100\n    advertise: 1=h:70000\n");
  REQUIRE_FALSE(port.ok());
  CHECK(contains(port.errors[0].reason, "listeners[0].advertise: node 1: 'h:70000': port must be a number from 1 to 65535"));
  auto wildcard = load("listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 9100\n    advertise: 0.0.0.0\n");
  REQUIRE_FALSE(wildcard.ok());
  CHECK(contains(wildcard.errors[0].reason, "cannot be handed to clients"));
}

TEST_CASE("ports inside the kernel's ephemeral range are warnings (issue #15 bug 10)") {
  LoadOptions host;
  host.ephemeral_ports = [] { return std::optional<PortRange>(PortRange{32768, 60999}); };
  SUBCASE("outside: nothing") {
    auto r = load(kMinimal, host);
    REQUIRE(r.ok());
    CHECK(r.warnings.empty());
  }
  SUBCASE("a base whose node ports reach into the range") {
    auto r = load(
        "listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 32700\n    max_broker_ports: 100\n"
        "admin: { listen: 127.0.0.1:47170 }\n",
        host);
    REQUIRE_MESSAGE(r.ok(), r.error_text());  // a warning does not refuse the file
    REQUIRE(r.warnings.size() == 2);
    CHECK(r.warnings[0].to_string().rfind("test.yaml:4:19: listeners[0].broker_ports: ports 32700-32799 (base + node ids 0-99) overlap the "
                                          "kernel's ephemeral port range 32768-60999 (net.ipv4.ip_local_port_range)",
                                          0) == 0);
    CHECK(r.warnings[1].line == 6);
    CHECK(r.warnings[1].reason.rfind("admin.listen: port 47170 overlaps the kernel's ephemeral port range", 0) == 0);
  }
  SUBCASE("a range") {
    auto r = load("listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_port_range: 60990-61010\n", host);
    REQUIRE(r.ok());
    REQUIRE(r.warnings.size() == 1);
    CHECK(r.warnings[0].reason.find("ports 60990-61010 overlap") != std::string::npos);
  }
  SUBCASE("no range known: nothing") {
    LoadOptions unknown;
    unknown.ephemeral_ports = [] { return std::optional<PortRange>(); };
    CHECK(load("listeners:\n  - listen: 127.0.0.1:40000\n    upstream: b:9092\n    broker_ports: 40001\n", unknown).warnings.empty());
  }
}

TEST_CASE("port 0: the kernel picks listening ports, never claimed, never warned about (issue #30 item 7)") {
  LoadOptions host;
  host.ephemeral_ports = [] { return std::optional<PortRange>(PortRange{32768, 60999}); };
  auto r = load(
      "listeners:\n"
      "  - name: east\n    listen: 127.0.0.1:0\n    upstream: b:9092\n    broker_ports: 0\n"
      "  - name: west\n    listen: 127.0.0.1:0\n    upstream: c:9092\n    broker_ports: 0\n"
      "admin: { listen: 127.0.0.1:0 }\n",
      host);
  REQUIRE_MESSAGE(r.ok(), r.error_text());  // two port-0 listeners do not share a port
  CHECK(r.warnings.empty());                // the kernel's pick is free by definition
  CHECK(r.config->listeners[0].listen.port == 0);
  CHECK(r.config->listeners[0].broker_ports.scheme == BrokerPorts::Scheme::kKernel);
  CHECK(r.config->listeners[1].broker_ports.scheme == BrokerPorts::Scheme::kKernel);
  CHECK(r.config->admin.listen->port == 0);
  SUBCASE("a broker's address is never port 0") {
    auto e = first_error("listeners:\n  - listen: 127.0.0.1:0\n    upstream: b:0\n    broker_ports: 0\n");
    CHECK(e.to_string() == "test.yaml:3:15: listeners[0].upstream: 'b:0': port 0 is not allowed here");
  }
  SUBCASE("a range cannot start at 0") {
    auto e = first_error("listeners:\n  - listen: 127.0.0.1:0\n    upstream: b:9092\n    broker_port_range: 0-10\n");
    CHECK(e.reason == "listeners[0].broker_port_range: '0-10' is not a port range 'first-last' (1 to 65535, first <= last)");
  }
}

TEST_CASE("parse_ephemeral_ports reads ip_local_port_range") {
  auto r = parse_ephemeral_ports("32768\t60999\n");
  REQUIRE(r.has_value());
  CHECK(r->first == 32768);
  CHECK(r->last == 60999);
  CHECK_FALSE(parse_ephemeral_ports("").has_value());
  CHECK_FALSE(parse_ephemeral_ports("60999 32768").has_value());
  CHECK_FALSE(parse_ephemeral_ports("1 70000").has_value());
  CHECK_FALSE(parse_ephemeral_ports("1 2 3").has_value());
}

TEST_CASE("a merge key is refused with what to do instead") {
  auto r = load(
      "listeners:\n  - &l { name: a, listen: 127.0.0.1:9092, upstream: b:9092, broker_ports: 9100 }\n"
      "  - <<: *l\n    name: b\n    listen: 127.0.0.1:9192\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.errors[0].to_string() ==
        "test.yaml:3:5: listeners[1].<<: merge keys are not supported: write the keys out (anchors and aliases of whole values work)");
}

TEST_CASE("a value or key that is not UTF-8 is refused with its position (found by fuzz_config_loader)") {
  auto r = load(std::string(kMinimal) +
                "api_versions:\n  - { api: Pro\xff\xff"
                "duce, max: 9 }\n");
  REQUIRE_FALSE(r.ok());
  CHECK(r.errors[0].to_string() == "test.yaml:7:12: api_versions[0].api: not valid UTF-8 (byte 0xFF at offset 3 of the value)");
  auto key = load(std::string(kMinimal) + "faults:\n  - { na\xc0\xafme: x }\n");
  REQUIRE_FALSE(key.ok());
  CHECK(key.errors[0].to_string() == "test.yaml:7:7: faults[0]: a key is not valid UTF-8");
  // Well-formed multi-byte text is fine (a rule name in Greek, an emoji).
  auto ok =
      load(std::string(kMinimal) + "faults:\n  - { name: \"\xce\xb1\xce\xb2\xf0\x9f\x99\x82\", action: { error: PRODUCER_FENCED } }\n");
  CHECK_MESSAGE(ok.ok(), ok.error_text());
  // Overlong forms and surrogates are not UTF-8 either.
  CHECK_FALSE(load(std::string(kMinimal) + "faults:\n  - { name: \"\xe0\x80\xaf\" }\n").ok());
  CHECK_FALSE(load(std::string(kMinimal) + "faults:\n  - { name: \"\xed\xa0\x80\" }\n").ok());
}

namespace {

std::string sni_listener(const std::string& sni, const std::string& extra = "") {
  return "listeners:\n"
         "  - name: gw\n"
         "    listen: 0.0.0.0:9092\n"
         "    upstream: broker-1:9093\n"
         "    tls: {cert: /etc/kproxy/wildcard.pem, key: /etc/kproxy/wildcard.key}\n" +
         extra + "    sni:\n" + sni;
}

}  // namespace

TEST_CASE("an SNI listener: names lower-cased, $(listener) replaced, defaults, one port for every broker") {
  auto r = load_config_string(sni_listener("      bootstrap: Kafka.Example.COM.\n"
                                           "      broker: Broker-$(nodeId).$(listener).Example.com\n"),
                              "test.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  const auto& l = r.config->listeners[0];
  REQUIRE(l.sni.has_value());
  CHECK(l.sni->bootstrap == "kafka.example.com");
  CHECK(l.sni->broker.render(2) == "broker-2.gw.example.com");
  CHECK(l.sni->advertised_port == 9092);  // the listen port unless told
  CHECK(l.sni->unknown == UnknownServerName::kRefuse);
  CHECK(l.sni->client_hello_timeout == std::chrono::seconds(5));
  CHECK(l.sni->max_client_hello_bytes == 16 * 1024);
  CHECK(l.broker_ports.scheme == BrokerPorts::Scheme::kSni);
  CHECK(l.broker_ports.base == 9092);
  CHECK(l.advertise == "kafka.example.com");  // no advertise needed on a wildcard listen
  CHECK(r.warnings.empty());
}

TEST_CASE("an SNI listener's advertised port, policy and ClientHello limits") {
  auto r = load_config_string(sni_listener("      bootstrap: kafka.example.com\n"
                                           "      broker: b-$(nodeId).kafka.example.com\n"
                                           "      advertised_port: 443\n"
                                           "      unknown: bootstrap\n"
                                           "      client_hello_timeout: 750ms\n"
                                           "      max_client_hello_bytes: 4KiB\n"),
                              "test.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  const auto& sni = *r.config->listeners[0].sni;
  CHECK(sni.advertised_port == 443);
  CHECK(r.config->listeners[0].broker_ports.base == 443);
  CHECK(sni.unknown == UnknownServerName::kBootstrap);
  CHECK(sni.client_hello_timeout == std::chrono::milliseconds(750));
  CHECK(sni.max_client_hello_bytes == 4096);
}

TEST_CASE("SNI listener mistakes are errors that say what to do") {
  auto err = [](const std::string& yaml) { return first_error(yaml).reason; };
  CHECK(contains(err(sni_listener("      bootstrap: kafka.example.com\n      broker: broker.kafka.example.com\n")), "no $(nodeId)"));
  CHECK(contains(err(sni_listener("      broker: b-$(nodeId).example.com\n")), "sni.bootstrap: missing"));
  CHECK(contains(err(sni_listener("      bootstrap: kafka.example.com\n      broker: b-$(nodeId).example.com\n      unknown: drop\n")),
                 "not refuse or bootstrap"));
  CHECK(
      contains(err(sni_listener("      bootstrap: kafka.example.com\n      broker: b-$(nodeId).example.com\n", "    broker_ports: 9100\n")),
               "remove broker_ports"));
  CHECK(contains(err(sni_listener("      bootstrap: kafka example\n      broker: b-$(nodeId).example.com\n")), "not a DNS host name"));
  CHECK(contains(err(sni_listener("      bootstrap: kafka.example.com\n      broker: b-$(nodeId).example.com\n      color: red\n")),
                 "unknown key"));
  // No tls: the server name is in a TLS ClientHello.
  auto no_tls = load_config_string(
      "listeners:\n  - name: gw\n    listen: 127.0.0.1:9092\n    upstream: b:9093\n    sni: {bootstrap: k.example.com, broker: "
      "\"b-$(nodeId).example.com\"}\n",
      "test.yaml");
  REQUIRE_FALSE(no_tls.ok());
  CHECK(contains(no_tls.error_text(), "sni: needs tls"));
  // Port 0 (the kernel's pick) cannot be advertised.
  auto port0 = load_config_string(
      "listeners:\n  - name: gw\n    listen: 127.0.0.1:0\n    upstream: b:9093\n    tls: {cert: /c.pem, key: /k.pem}\n"
      "    sni: {bootstrap: k.example.com, broker: \"b-$(nodeId).example.com\"}\n",
      "test.yaml");
  REQUIRE_FALSE(port0.ok());
  CHECK(contains(port0.error_text(), "advertised_port: missing"));
}

TEST_CASE("an SNI pattern or bootstrap name that is an IP address is a warning (clients send no SNI for one)") {
  auto r = load_config_string(sni_listener("      bootstrap: 10.0.0.10\n"
                                           "      broker: 10.0.1.$(nodeId)\n"),
                              "test.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  REQUIRE(r.warnings.size() == 2);
  CHECK(contains(r.warnings[0].reason, "sni.bootstrap: '10.0.0.10' is an IP address"));
  CHECK(contains(r.warnings[1].reason, "sni.broker: '10.0.1.$(nodeId)' gives node 0 the name '10.0.1.0'"));
  CHECK(contains(r.warnings[1].reason, "RFC 6066"));
}

TEST_CASE("tls.certificates: more certificates, each with its key and position") {
  auto c = load_config_string(
      "listeners:\n  - name: gw\n    listen: 127.0.0.1:9092\n    upstream: b:9093\n    broker_ports: 9100\n    tls:\n"
      "      cert: /c.pem\n      key: /k.pem\n      certificates:\n        - {cert: /east.pem, key: /east.key}\n"
      "        - {cert: /west.pem, key: /west.key}\n",
      "test.yaml");
  REQUIRE_MESSAGE(c.ok(), c.error_text());
  const auto& t = *c.config->listeners[0].tls;
  REQUIRE(t.certificates.size() == 2);
  CHECK(t.certificates[1].cert.path == "/west.pem");
  CHECK(t.certificates[1].key.key_path == "listeners[0].tls.certificates[1].key");
  CHECK(t.certificates[0].cert.line == 10);
  auto missing = load_config_string(
      "listeners:\n  - name: gw\n    listen: 127.0.0.1:9092\n    upstream: b:9093\n    broker_ports: 9100\n    tls:\n"
      "      cert: /c.pem\n      key: /k.pem\n      certificates:\n        - {cert: /east.pem}\n",
      "test.yaml");
  REQUIRE_FALSE(missing.ok());
  CHECK(contains(missing.error_text(), "listeners[0].tls.certificates[0].key: missing"));
}

TEST_CASE("an SNI listener without tls routes by the PROXY header's authority (TLS ended at the load balancer)") {
  auto r = load_config_string(
      "listeners:\n  - name: gw\n    listen: 127.0.0.1:9092\n    upstream: b:9093\n    proxy_protocol: v2\n"
      "    sni: {bootstrap: k.example.com, broker: \"b-$(nodeId).example.com\"}\n",
      "test.yaml");
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  CHECK(r.config->listeners[0].sni.has_value());
  CHECK_FALSE(r.config->listeners[0].tls.has_value());
}

TEST_CASE("a listener entry checked at run time: the loader's checks and texts, against the running listeners") {
  auto loaded = load_config_string(
      "listeners:\n  - name: a\n    listen: 127.0.0.1:19092\n    upstream: b:9092\n    broker_port_range: 19100-19110\n"
      "admin: { listen: 127.0.0.1:19644 }\n",
      "k.yaml");
  REQUIRE(loaded.ok());
  std::vector<ListenerConfig> none;
  LoadOptions no_ephemeral;
  no_ephemeral.ephemeral_ports = [] { return std::optional<PortRange>{}; };
  auto ok = load_listener_entry(R"({"listen": "127.0.0.1:0", "upstream": "x:1", "broker_ports": 0})", "late", *loaded.config, none, "PUT",
                                no_ephemeral);
  REQUIRE_MESSAGE(ok.listener.has_value(), ok.error_text());
  CHECK(ok.listener->name == "late");
  CHECK(ok.listener->broker_ports.scheme == BrokerPorts::Scheme::kKernel);
  auto inside = load_listener_entry(R"({"listen": "127.0.0.1:19105", "upstream": "x:1", "broker_ports": 0})", "late", *loaded.config, none,
                                    "PUT", no_ephemeral);
  CHECK_FALSE(inside.listener);
  CHECK(inside.error_text().find(
            "listeners[1].listen: port 19105 overlaps listeners[0].broker_port_range (the broker ports of listener 'a'") !=
        std::string::npos);
  CHECK(inside.well_formed);
  CHECK(inside.port_conflict);  // a port taken: the admin API answers 409
  auto same = load_listener_entry(R"({"listen": "127.0.0.1:19092", "upstream": "x:1", "broker_ports": 0})", "late", *loaded.config, none,
                                  "PUT", no_ephemeral);
  CHECK(same.error_text().find("listeners[1].listen: port 19092 is also used by listener 'a'") != std::string::npos);
  auto admin = load_listener_entry(R"({"listen": "127.0.0.1:19644", "upstream": "x:1", "broker_ports": 0})", "late", *loaded.config, none,
                                   "PUT", no_ephemeral);
  CHECK(admin.error_text().find("overlaps admin.listen (the admin API") != std::string::npos);
  auto taken = load_listener_entry(R"({"listen": "127.0.0.1:0", "upstream": "x:1", "broker_ports": 0})", "a", *loaded.config, none, "PUT",
                                   no_ephemeral);
  CHECK(taken.error_text().find("'a' is used by another listener") != std::string::npos);
  auto unknown = load_listener_entry(R"({"listen": "127.0.0.1:0", "upstream": "x:1", "broker_ports": 0, "colour": 1})", "late",
                                     *loaded.config, none, "PUT", no_ephemeral);
  CHECK(unknown.error_text().find("listeners[1].colour: unknown key") != std::string::npos);
  CHECK_FALSE(unknown.well_formed);  // not a listener entry: 400
  auto tls = load_listener_entry(R"({"listen": "127.0.0.1:0", "upstream": "x:1", "broker_ports": 0, "tls": {}})", "late", *loaded.config,
                                 none, "PUT", no_ephemeral);
  CHECK(tls.error_text().find("not taken for a listener added at run time") != std::string::npos);
  CHECK_FALSE(tls.well_formed);
  // Neither broker_ports nor broker_port_range, and an empty body: the form is right, the entry
  // cannot be opened; a nested value, a sequence and text that is not YAML are not entries.
  auto no_ports =
      load_listener_entry(R"({"listen": "127.0.0.1:0", "upstream": ["x:1", "y:2"]})", "late", *loaded.config, none, "PUT", no_ephemeral);
  CHECK_FALSE(no_ports.listener);
  CHECK(no_ports.well_formed);
  CHECK_FALSE(no_ports.port_conflict);  // 422
  CHECK(no_ports.error_text().find("missing broker_ports") != std::string::npos);
  auto empty = load_listener_entry("{}", "late", *loaded.config, none, "PUT", no_ephemeral);
  CHECK_FALSE(empty.listener);
  CHECK(empty.well_formed);
  CHECK(empty.error_text().find("listeners[1].listen: missing") != std::string::npos);
  CHECK_FALSE(load_listener_entry(R"({"listen": {"host": "a"}, "upstream": "x:1"})", "late", *loaded.config, none, "PUT").well_formed);
  CHECK_FALSE(load_listener_entry(R"(["listen"])", "late", *loaded.config, none, "PUT").well_formed);
  auto not_yaml = load_listener_entry(R"({"listen": "\ud800"})", "late", *loaded.config, none, "PUT");
  CHECK_FALSE(not_yaml.listener);
  CHECK_FALSE(not_yaml.well_formed);
  // A listener added before claims its ports too.
  std::vector<ListenerConfig> added{*ok.listener};
  added[0].listen.port = 19200;
  auto second = load_listener_entry(R"({"listen": "127.0.0.1:19200", "upstream": "x:1", "broker_ports": 0})", "later", *loaded.config,
                                    added, "PUT", no_ephemeral);
  CHECK(second.error_text().find("listeners[2].listen: port 19200 is also used by listener 'late'") != std::string::npos);
  // Inside the ephemeral range: a warning, as for the file.
  LoadOptions ephemeral;
  ephemeral.ephemeral_ports = [] { return std::optional<PortRange>{PortRange{30000, 40000}}; };
  auto warned = load_listener_entry(R"({"listen": "127.0.0.1:30500", "upstream": "x:1", "broker_ports": "listen"})", "late", *loaded.config,
                                    none, "PUT", ephemeral);
  REQUIRE(warned.listener);
  CHECK(warned.listener->broker_ports.scheme == BrokerPorts::Scheme::kListenPort);
  REQUIRE(warned.warnings.size() == 1);
  CHECK(warned.warnings[0].reason.find("ephemeral port range") != std::string::npos);
}

namespace {

// Every error of loading `yaml` as "t.yaml", one "line:column: reason" per line.
std::string errors_of(const std::string& yaml) {
  auto r = load_config_string(yaml, "t.yaml", no_host());
  std::string out;
  for (const auto& e : r.errors) out += std::to_string(e.line) + ":" + std::to_string(e.column) + ": " + e.reason + "\n";
  return out;
}

}  // namespace

TEST_CASE("tracing: every key read, and each bad one named in the file's order (the texts of f00648c9)") {
  auto r = load_config_string(std::string(kMinimal) +
                                  "tracing: { endpoint: http://127.0.0.1:4318, service_name: x, max_queue_spans: 10, "
                                  "max_spans_per_transaction: 9, batch: { max_spans: 4, interval: 2s }, timeout: 1500ms }\n",
                              "t.yaml", no_host());
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  REQUIRE(r.config->tracing.has_value());
  const TracingConfig& t = *r.config->tracing;
  CHECK(t.host == "127.0.0.1");
  CHECK(t.port == 4318);
  CHECK(t.path == "/v1/traces");
  CHECK(t.service_name == "x");
  CHECK(t.max_queue_spans == 10);
  CHECK(t.max_spans_per_transaction == 9);
  CHECK(t.batch_max_spans == 4);
  CHECK(t.batch_interval == std::chrono::seconds(2));
  CHECK(t.timeout == std::chrono::milliseconds(1500));
  CHECK_FALSE(load_config_string(kMinimal, "t.yaml", no_host()).config->tracing.has_value());

  CHECK(errors_of(std::string(kMinimal) +
                  "tracing: { service_name: '', max_queue_spans: 1, max_spans_per_transaction: 0, batch: { max_spans: 0, interval: 0s, x: "
                  "1 }, timeout: 0, foo: 1 }\n") ==
        "6:137: tracing.foo: unknown key (known: endpoint, service_name, max_queue_spans, max_spans_per_transaction, batch, timeout)\n"
        "6:10: tracing.endpoint: missing (the collector's OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces)\n"
        "6:26: tracing.service_name: must not be empty\n"
        "6:47: tracing.max_queue_spans: '1' is not a number from 2 to 1000000\n"
        "6:77: tracing.max_spans_per_transaction: '0' is not a number from 1 to 100000\n"
        "6:117: tracing.batch.x: unknown key (known: max_spans, interval)\n"
        "6:100: tracing.batch.max_spans: '0' is not a number from 1 to 100000\n"
        "6:113: tracing.batch.interval: must be more than 0\n"
        "6:134: tracing.timeout: must be more than 0\n");
}

TEST_CASE("listener, TLS and SNI scalars: values and error texts (the texts of f00648c9)") {
  const std::string head = "listeners:\n  - name: k\n    listen: 127.0.0.1:9092\n    upstream: b:9092\n";
  auto r =
      load_config_string(head +
                             "    tls: { cert: a.pem, key: b.pem, client_ca: c.pem, client_auth: requested, min_version: TLSv1.3 }\n"
                             "    upstream_tls: { min_version: \"1.3\", verify_hostname: off }\n"
                             "    proxy_protocol: v2\n"
                             "    max_broker_ports: 7\n"
                             "    sni: { bootstrap: kafka.example.com, broker: b-$(nodeId).example.com, advertised_port: 443, unknown: "
                             "bootstrap, client_hello_timeout: 2s, max_client_hello_bytes: 1KiB }\n"
                             "log: { format: json }\n",
                         "t.yaml", no_host());
  REQUIRE_MESSAGE(r.ok(), r.error_text());
  const ListenerConfig& l = r.config->listeners.at(0);
  REQUIRE(l.tls.has_value());
  CHECK(l.tls->client_auth == ClientAuth::kRequested);
  CHECK(l.tls->min_version == TlsVersion::kTls13);
  REQUIRE(l.upstream_tls.has_value());
  CHECK(l.upstream_tls->min_version == TlsVersion::kTls13);
  CHECK_FALSE(l.upstream_tls->verify_hostname);
  CHECK(l.proxy_protocol);
  CHECK(l.broker_ports.max_ports == 7);
  REQUIRE(l.sni.has_value());
  CHECK(l.sni->advertised_port == 443);
  CHECK(l.sni->unknown == UnknownServerName::kBootstrap);
  CHECK(l.sni->client_hello_timeout == std::chrono::seconds(2));
  CHECK(l.sni->max_client_hello_bytes == 1024);
  CHECK(r.config->log.format == LogConfig::Format::kJson);

  CHECK(errors_of(head + "    broker_ports: 9100\n"
                         "    max_broker_ports: 0\n"
                         "    proxy_protocol: v1\n"
                         "    upstream_tls: { verify_hostname: maybe, min_version: '1.1' }\n"
                         "    tls: { cert: a.pem, key: b.pem, client_auth: sometimes, min_version: 1.0, certificates: [ { cert: c, key: d, "
                         "x: 1 } ] }\n") ==
        "6:23: listeners[0].max_broker_ports: '0' is not a number from 1 to 65535\n"
        "9:50: listeners[0].tls.client_auth: 'sometimes' is not one of none, requested, required\n"
        "9:74: listeners[0].tls.min_version: '1.0' is not a TLS version (\"1.2\" or \"1.3\")\n"
        "9:114: listeners[0].tls.certificates[0].x: unknown key (known: cert, key)\n"
        "8:38: listeners[0].upstream_tls.verify_hostname: 'maybe' is not true or false\n"
        "8:58: listeners[0].upstream_tls.min_version: '1.1' is not a TLS version (\"1.2\" or \"1.3\")\n"
        "7:21: listeners[0].proxy_protocol: 'v1' is not v2 or off (version 1, the text form, is not taken: use send-proxy-v2)\n");
  CHECK(errors_of(head + "    proxy_protocol: v2\n"
                         "    sni: { bootstrap: kafka.example.com, broker: b-$(nodeId).example.com, advertised_port: 0, unknown: maybe, "
                         "client_hello_timeout: 0s, max_client_hello_bytes: 100 }\n") ==
        "6:92: listeners[0].sni.advertised_port: '0' is not a port (1 to 65535)\n"
        "6:104: listeners[0].sni.unknown: 'maybe' is not refuse or bootstrap\n"
        "6:133: listeners[0].sni.client_hello_timeout: must be more than 0\n"
        "6:161: listeners[0].sni.max_client_hello_bytes: must be from 512 bytes to 1MiB\n");
}
