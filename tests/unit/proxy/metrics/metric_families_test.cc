#include "proxy/metrics/metric_families.h"

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "proxy/metrics/label_values.h"
#include "proxy/metrics/proxy_metrics.h"
#include "tests/unit/support/text.h"

using namespace kproxy::metrics;
using namespace std::chrono_literals;

namespace {

using kproxy::testing::contains;

/// Every row of the table in table order: its exported name.
std::vector<std::string> declared_names() {
  std::vector<std::string> names;
#define KPROXY_TEST_FAMILY(id, name, type, labels, help) names.emplace_back(name);
#define KPROXY_TEST_EVENT(id, event, help) names.push_back(proxy_event_family_name(ProxyEvent::id));
  KPROXY_METRIC_FAMILIES(KPROXY_TEST_FAMILY, KPROXY_TEST_EVENT)
#undef KPROXY_TEST_FAMILY
#undef KPROXY_TEST_EVENT
  return names;
}

/// A ProxyMetrics with at least one sample in every family it makes (empty families are left out
/// of a scrape), and event i counted i + 1 times.
void fill(ProxyMetrics& m) {
  m.set_listener_names({"kafka", "tls"});
  m.enable_traffic_labels(true, true, 1);
  m.request(0, 0, 11, 100);
  m.response(0, 0, 11, 50, 300us);
  m.response_error(0, 90);
  observe_residence(m.shard(), Direction::kRequest, 0, 7us, 3);
  m.undecoded(0, UndecodedReason::kNotNeeded);
  m.decode_error(3, Direction::kResponse, DecodeErrorReason::kBody);
  m.rewritten(3, m.stage_id("broker_address"));
  for (size_t e = 0; e < static_cast<size_t>(ProxyEvent::kCount); ++e) m.count(static_cast<ProxyEvent>(e), e + 1);
  m.inflight(2);
  m.connection_opened(1, Side::kClient);
  m.connection_close_reason(1, kproxy::net::CloseCategory::kClientClosed);
  m.fault_injected("fence", 26, "error");
  m.client_seen("librdkafka", "2.3.0");
  m.topic_labels()->count(0, "orders");
  m.topic_labels()->count(0, "payments");  // past max_label_values 1: folded
  m.client_id_labels()->count(3, "app");
}

std::string_view type_name(FamilyType type) {
  switch (type) {
    case FamilyType::kCounter: return "counter";
    case FamilyType::kGauge: return "gauge";
    case FamilyType::kHistogram: return "histogram";
  }
  return "?";
}

}  // namespace

TEST_CASE("metric families: a scrape shows every row of the table, in table order, and no other family") {
  ProxyMetrics m;
  fill(m);
  std::vector<std::string> scraped;
  for (const auto& f : m.collect()) scraped.push_back(f.name);
  CHECK(scraped == declared_names());
  CHECK(scraped.size() == kFamilyCount + static_cast<size_t>(ProxyEvent::kCount));
}

TEST_CASE("metric families: each family has its row's type, help text and label names") {
  ProxyMetrics m;
  fill(m);
  std::map<std::string, prometheus::MetricFamily> by_name;
  for (auto& f : m.collect()) by_name[f.name] = f;
  std::string text = m.render();
  for (const FamilySpec& spec : kFamilies) {
    std::string name(spec.name);
    INFO(name);
    REQUIRE(by_name.count(name) == 1);
    const auto& f = by_name[name];
    CHECK(f.help == spec.help);
    CHECK(contains(text,
                   "# HELP " + name + " " + std::string(spec.help) + "\n# TYPE " + name + " " + std::string(type_name(spec.type)) + "\n"));
    REQUIRE(!f.metric.empty());
    for (const auto& sample : f.metric) {
      std::vector<std::string> labels;
      for (const auto& label : sample.label) labels.push_back(label.name);
      CHECK(labels == std::vector<std::string>(spec.label_names().begin(), spec.label_names().end()));
    }
  }
  for (size_t e = 0; e < static_cast<size_t>(ProxyEvent::kCount); ++e) {
    std::string name = proxy_event_family_name(static_cast<ProxyEvent>(e));
    INFO(name);
    REQUIRE(by_name.count(name) == 1);
    CHECK(by_name[name].help == kProxyEvents[e].help);
    CHECK(contains(text, "# HELP " + name + " " + std::string(kProxyEvents[e].help) + "\n# TYPE " + name + " counter\n" + name + " " +
                             std::to_string(e + 1) + "\n"));
    CHECK(m.total(static_cast<ProxyEvent>(e)) == e + 1);
  }
}

TEST_CASE("metric families: an event's names") {
  CHECK(std::string(proxy_event_name(ProxyEvent::kFramingError)) == "framing_errors");
  CHECK(proxy_event_family_name(ProxyEvent::kFramingError) == "kproxy_proxy_framing_errors_total");
  CHECK(proxy_event_family_name(ProxyEvent::kConnectionAccepted) == "kproxy_proxy_connections_accepted_total");
  CHECK(std::string(proxy_event_name(ProxyEvent::kCount)) == "other");
  CHECK(family_spec(FamilyId::kRequests).name == "kproxy_requests_total");
  CHECK(family_spec(FamilyId::kInflightRequests).label_names().empty());
}

TEST_CASE("metric families: docs/observability.md names every row of the table") {
  std::ifstream in(std::string(KPROXY_SOURCE_DIR) + "/docs/observability.md");
  REQUIRE(in.good());
  std::stringstream doc;
  doc << in.rdbuf();
  const std::string text = doc.str();
  // The page names a family in full or without its kproxy_ prefix in backquotes, and an event
  // in backquotes in its list of proxy_<event>_total.
  for (const FamilySpec& spec : kFamilies) {
    std::string name(spec.name);
    INFO(name);
    CHECK((contains(text, name) || contains(text, "`" + name.substr(std::string_view("kproxy_").size()) + "`")));
  }
  for (const ProxyEventSpec& e : kProxyEvents) {
    std::string event(e.event);
    INFO(event);
    CHECK((contains(text, "`" + event + "`") || contains(text, "kproxy_proxy_" + event + "_total")));
  }
}
