#include "proxy/metrics/proxy_metrics.h"

#include <thread>

#include <doctest/doctest.h>

#include "codec/generated/api_keys.h"
#include "codec/generated/error_code.h"
#include "tests/unit/support/text.h"

using namespace kproxy::metrics;
using namespace std::chrono_literals;

namespace {
constexpr int16_t kProduce = 0;
constexpr int16_t kEndTxn = 26;

using kproxy::testing::contains;
}  // namespace

TEST_CASE("metrics: latency buckets run from 100 us to 30 s") {
  CHECK(latency_bucket(50us) == 0);
  CHECK(latency_bucket(100us) == 0);
  CHECK(latency_bucket(101us) == 1);
  CHECK(latency_bucket(30s) == kLatencyBuckets.size() - 1);
  CHECK(latency_bucket(31s) == kLatencyBuckets.size());
}

TEST_CASE("metrics: slots bound api keys, versions and error codes") {
  CHECK(api_slot(0) == 0);
  CHECK(api_slot(-1) == kApiSlots - 1);
  CHECK(api_slot(10001) == kApiSlots - 1);
  CHECK(version_slot(99) == kVersionSlots - 1);
  CHECK(error_slot(-1) == 0);
  CHECK(error_slot(16) == 17);
  CHECK(error_slot(30000) == kErrorSlots - 1);
}

TEST_CASE("metrics: counts from several threads add up in the exposition") {
  ProxyMetrics m;
  m.set_listener_names({"kafka", "other"});
  auto work = [&m] {
    for (int i = 0; i < 1000; ++i) {
      m.request(0, kProduce, 11, 100);
      m.inflight(1);
      m.response(0, kProduce, 11, 50, 300us);
      m.inflight(-1);
    }
    m.request(1, kEndTxn, 4, 10);
    m.response(1, kEndTxn, 4, 10, 2ms);
    m.response_error(kEndTxn, static_cast<int16_t>(kproxy::codec::ErrorCode::kProducerFenced));
    m.response_error(kEndTxn, 0);  // not an error
  };
  std::thread a(work), b(work);
  a.join();
  b.join();
  CHECK(m.requests_total(kProduce) == 2000);
  CHECK(m.responses_total(kProduce) == 2000);
  CHECK(m.latency_count(kProduce) == 2000);
  CHECK(m.errors_total(kEndTxn, 90) == 2);
  std::string text = m.render();
  CHECK(contains(text, "kproxy_requests_total{listener=\"kafka\",api=\"Produce\",version=\"11\"} 2000"));
  CHECK(contains(text, "kproxy_requests_total{listener=\"other\",api=\"EndTxn\",version=\"4\"} 2"));
  CHECK(contains(text, "kproxy_response_errors_total{api=\"EndTxn\",error=\"PRODUCER_FENCED\"} 2"));
  CHECK(contains(text, "kproxy_request_duration_seconds_bucket{api=\"Produce\",le=\"0.0005\"} 2000"));
  CHECK(contains(text, "kproxy_request_duration_seconds_bucket{api=\"Produce\",le=\"0.00025\"} 0"));
  CHECK(contains(text, "kproxy_request_duration_seconds_count{api=\"Produce\"} 2000"));
  CHECK(contains(text, "kproxy_request_bytes_total{api=\"Produce\"} 200000"));
  CHECK(contains(text, "kproxy_inflight_requests 0"));
  CHECK(contains(text, "# TYPE kproxy_request_duration_seconds histogram"));
  CHECK_FALSE(contains(text, "error=\"NONE\""));
}

TEST_CASE("metrics: rare events, stages, connections, clients") {
  ProxyMetrics m(MetricsOptions{2, 1});
  m.set_listener_names({"kafka"});
  m.connection_opened(0, Side::kClient);
  m.connection_opened(0, Side::kUpstream);
  m.connection_opened(0, Side::kClient);
  m.connection_closed(0, Side::kClient);
  m.connection_close_reason(0, kproxy::net::CloseCategory::kClientClosed);
  int stage = m.stage_id("broker_address");
  CHECK(m.stage_id("broker_address") == stage);
  m.rewritten(3, stage);
  m.undecoded(12345, UndecodedReason::kUnknownApi);
  m.decode_error(3, Direction::kResponse, DecodeErrorReason::kBody);
  m.fault_injected("fence", kEndTxn, "error");
  m.fault_injected("fence", kEndTxn, "error");
  m.fault_injected("second-rule", kEndTxn, "error");  // over max_fault_rules: counted as "other"
  CHECK(m.fault_injections("fence") == 2);
  CHECK(m.fault_injections("other") == 1);
  auto java = m.client_seen("apache-kafka-java", "4.4.0");
  m.client_seen("librdkafka", "2.3.0");
  m.client_seen("another", "1");  // over the cap
  m.client_gone(java);
  std::string text = m.render();
  CHECK(contains(text, "kproxy_connections{listener=\"kafka\",side=\"client\"} 1"));
  CHECK(contains(text, "kproxy_connections_opened_total{listener=\"kafka\",side=\"client\"} 2"));
  CHECK(contains(text, "kproxy_connections_closed_total{listener=\"kafka\",reason=\"client_closed\"} 1"));
  CHECK(contains(text, "kproxy_frames_rewritten_total{api=\"Metadata\",stage=\"broker_address\"} 1"));
  CHECK(contains(text, "kproxy_frames_undecoded_total{api=\"other\",reason=\"unknown_api\"} 1"));
  CHECK(contains(text, "kproxy_decode_errors_total{api=\"Metadata\",direction=\"response\",reason=\"body\"} 1"));
  CHECK(contains(text, "kproxy_faults_injected_total{rule=\"fence\",api=\"EndTxn\",action=\"error\"} 2"));
  CHECK(contains(text, "kproxy_clients{software_name=\"apache-kafka-java\",software_version=\"4.4.0\"} 0"));
  CHECK(contains(text, "kproxy_clients{software_name=\"other\",software_version=\"other\"} 1"));
}

TEST_CASE("metrics: labelled counters, exported counters and gauges are in every scrape") {
  ProxyMetrics m;
  auto& refusals = m.labelled_counter("kproxy_test_refusals_total", "test", "status", {"400", "409"});
  CHECK(&m.labelled_counter("kproxy_test_refusals_total", "ignored") == &refusals);  // one family per name
  refusals.add(1, 3);
  refusals.add(7);  // past the list: ignored
  std::string text = m.render();
  CHECK(contains(text, "kproxy_test_refusals_total{status=\"400\"} 0"));
  CHECK(contains(text, "kproxy_test_refusals_total{status=\"409\"} 3"));
  CHECK(refusals.value(1) == 3);

  kproxy::metrics::LabelledCounter dropped("kproxy_test_dropped_total", "test", "", {});
  dropped.add(0, 2);
  m.export_counter(dropped);
  int reading = 7;
  m.add_gauge("kproxy_test_gauge", "test", "", [&] { return std::vector<std::pair<std::string, double>>{{"", double(reading)}}; });
  m.add_gauge("kproxy_test_workers", "test", "worker", [] { return std::vector<std::pair<std::string, double>>{{"0", 1}, {"1", 2}}; });
  text = m.render();
  CHECK(contains(text, "kproxy_test_dropped_total 2"));
  CHECK(contains(text, "kproxy_test_gauge 7"));
  CHECK(contains(text, "kproxy_test_workers{worker=\"1\"} 2"));
  reading = 9;  // read at scrape time
  CHECK(contains(m.render(), "kproxy_test_gauge 9"));
}

TEST_CASE("metrics: a histogram family read at scrape time is exported with cumulative buckets, sum and count") {
  ProxyMetrics m;
  std::vector<uint64_t> fast = {1, 0, 2};  // per bucket of {0.1, 1}, then +Inf
  m.add_histogram_reader("kproxy_test_duration_seconds", "test", {"kind"}, {0.1, 1.0}, [&] {
    return std::vector<ProxyMetrics::HistogramReading>{{{"fast"}, fast, 7.5}, {{"idle"}, {0, 0, 0}, 0}};
  });
  std::string text = m.render();
  INFO(text);
  CHECK(contains(text, "# TYPE kproxy_test_duration_seconds histogram"));
  CHECK(contains(text, "kproxy_test_duration_seconds_bucket{kind=\"fast\",le=\"0.1\"} 1\n"));
  CHECK(contains(text, "kproxy_test_duration_seconds_bucket{kind=\"fast\",le=\"1\"} 1\n"));
  CHECK(contains(text, "kproxy_test_duration_seconds_bucket{kind=\"fast\",le=\"+Inf\"} 3\n"));
  CHECK(contains(text, "kproxy_test_duration_seconds_count{kind=\"fast\"} 3\n"));
  CHECK(contains(text, "kproxy_test_duration_seconds_sum{kind=\"fast\"} 7.5\n"));
  CHECK(contains(text, "kproxy_test_duration_seconds_bucket{kind=\"idle\",le=\"+Inf\"} 0\n"));  // an empty series is exported too
  fast = {2, 1, 2};                                                                             // read at scrape time
  CHECK(contains(m.render(), "kproxy_test_duration_seconds_bucket{kind=\"fast\",le=\"1\"} 3\n"));
  // Registering the name again replaces the family, whatever its kind.
  m.add_family_reader("kproxy_test_duration_seconds", "test", ProxyMetrics::ReadType::kGauge, {}, [] {
    return std::vector<ProxyMetrics::Reading>{{{}, 4}};
  });
  text = m.render();
  CHECK(contains(text, "# TYPE kproxy_test_duration_seconds gauge"));
  CHECK(!contains(text, "kproxy_test_duration_seconds_bucket"));
}
