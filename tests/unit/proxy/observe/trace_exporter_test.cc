// TraceExporter: the OTLP/HTTP JSON encoding, the bounded queue (full: dropped and counted, never
// waited for), batching by size and by interval, the flush at stop, failures counted, and the
// HTTP client against a tiny HTTP listener of the test's own on 127.0.0.1.
#include "proxy/observe/trace_exporter.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <atomic>
#include <mutex>
#include <thread>

#include "tests/unit/support/tiny_http_server.h"

using namespace kproxy::observe;
using namespace std::chrono_literals;
using kproxy::testing::TinyHttpServer;

namespace {

Span span(std::string name, uint8_t trace = 1, uint8_t id = 1, uint8_t parent = 0) {
  Span s;
  s.trace_id.fill(trace);
  s.span_id.fill(id);
  s.parent_span_id.fill(parent);
  s.name = std::move(name);
  s.start_unix_nano = 1'700'000'000'000'000'000ULL;
  s.end_unix_nano = 1'700'000'000'005'000'000ULL;
  return s;
}

std::vector<Span> spans(size_t n) {
  std::vector<Span> out;
  for (size_t i = 0; i < n; ++i) out.push_back(span("s" + std::to_string(i), 1, static_cast<uint8_t>(i + 1)));
  return out;
}

/// A POST that records each batch (its span count) and answers as told.
struct FakeCollector {
  std::mutex mutex;
  std::vector<size_t> batches;  ///< spans per POST, in order
  std::atomic<bool> fail{false};
  std::atomic<int> posts{0};

  auto post() {
    return [this](const HttpTarget&, std::string_view type, std::string_view body, std::chrono::milliseconds) {
      CHECK(type == "application/json");
      auto j = nlohmann::json::parse(body);
      std::lock_guard lock(mutex);
      batches.push_back(j["resourceSpans"][0]["scopeSpans"][0]["spans"].size());
      ++posts;
      return fail ? HttpPostResult{503, "answered 503 Service Unavailable"} : HttpPostResult{200, ""};
    };
  }
  std::vector<size_t> seen() {
    std::lock_guard lock(mutex);
    return batches;
  }
};

template <typename Pred>
bool eventually(Pred pred, std::chrono::milliseconds limit = 5s) {
  auto deadline = std::chrono::steady_clock::now() + limit;
  while (!pred()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(2ms);
  }
  return true;
}

}  // namespace

TEST_CASE("trace exporter: the OTLP/HTTP JSON of spans follows protobuf's JSON mapping") {
  Span root = span("transaction orders", 0xab, 0x01);
  root.attributes.push_back({"kafka.transactional_id", std::string("orders")});
  root.attributes.push_back({"kafka.producer_id", int64_t{9000000000}});
  Span child = span("EndTxn", 0xab, 0x02, 0x01);
  child.error = true;
  child.status_message = "CONCURRENT_TRANSACTIONS";
  child.attributes.push_back({"kproxy.injected_by", std::string("endtxn-busy")});

  auto j = nlohmann::json::parse(encode_otlp_json({root, child}, "kproxy-test"));
  INFO(j.dump(2));
  const auto& rs = j["resourceSpans"];
  REQUIRE(rs.size() == 1);
  CHECK(rs[0]["resource"]["attributes"][0] == nlohmann::json::parse(R"({"key":"service.name","value":{"stringValue":"kproxy-test"}})"));
  const auto& ss = rs[0]["scopeSpans"];
  REQUIRE(ss.size() == 1);
  CHECK(ss[0]["scope"]["name"] == "kproxy");
  const auto& out = ss[0]["spans"];
  REQUIRE(out.size() == 2);
  CHECK(out[0]["traceId"] == "abababababababababababababababab");
  CHECK(out[0]["spanId"] == "0101010101010101");
  CHECK_FALSE(out[0].contains("parentSpanId"));  // a root span
  CHECK(out[0]["name"] == "transaction orders");
  CHECK(out[0]["kind"] == 1);
  CHECK(out[0]["startTimeUnixNano"] == "1700000000000000000");  // 64-bit numbers are strings
  CHECK(out[0]["endTimeUnixNano"] == "1700000000005000000");
  CHECK(out[0]["attributes"][0] == nlohmann::json::parse(R"({"key":"kafka.transactional_id","value":{"stringValue":"orders"}})"));
  CHECK(out[0]["attributes"][1] == nlohmann::json::parse(R"({"key":"kafka.producer_id","value":{"intValue":"9000000000"}})"));
  CHECK(out[0]["status"] == nlohmann::json::object());
  CHECK(out[1]["parentSpanId"] == "0101010101010101");
  CHECK(out[1]["status"] == nlohmann::json::parse(R"({"code":2,"message":"CONCURRENT_TRANSACTIONS"})"));
  CHECK(out[1]["attributes"][0]["value"]["stringValue"] == "endtxn-busy");
}

TEST_CASE("trace exporter: bytes from the wire that are not UTF-8 do not break the encoding") {
  Span s = span(std::string("transaction \xff\xfe"));
  std::string body;
  CHECK_NOTHROW(body = encode_otlp_json({s}, "kproxy"));
  CHECK(nlohmann::json::parse(body)["resourceSpans"][0]["scopeSpans"][0]["spans"][0]["name"].is_string());
}

TEST_CASE("trace exporter: hex ids") {
  uint8_t bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  CHECK(to_hex(bytes, 4) == "000fa0ff");
}

TEST_CASE("trace exporter: a full queue drops (and counts) what does not fit, whole, without waiting") {
  FakeCollector collector;
  TraceExporterOptions o;
  o.max_queue_spans = 10;
  o.batch_max_spans = 100;
  o.batch_interval = 1h;  // nothing leaves before stop
  o.post = collector.post();
  TraceExporter e(o);
  e.start();
  CHECK(e.try_push(spans(4)));
  CHECK(e.try_push(spans(4)));
  CHECK_FALSE(e.try_push(spans(3)));  // 8 + 3 > 10: all three dropped, none queued
  CHECK(e.try_push(spans(2)));        // 10: fits exactly
  CHECK_FALSE(e.try_push(spans(1)));
  auto s = e.stats();
  CHECK(s.queued == 10);
  CHECK(s.dropped_queue_full == 4);
  CHECK(collector.posts == 0);
  e.stop();  // flushes
  s = e.stats();
  CHECK(s.exported == 10);
  CHECK(s.batches == 1);
  CHECK(collector.seen() == std::vector<size_t>{10});
  CHECK_FALSE(e.try_push(spans(1)));  // after stop: refused, counted as shutdown
  CHECK(e.stats().dropped_shutdown == 1);
}

TEST_CASE("trace exporter: batches of at most batch_max_spans, sent as soon as one is full") {
  FakeCollector collector;
  TraceExporterOptions o;
  o.max_queue_spans = 100;
  o.batch_max_spans = 5;
  o.batch_interval = 1h;  // only full batches go before stop
  o.post = collector.post();
  TraceExporter e(o);
  e.start();
  CHECK(e.try_push(spans(3)));
  CHECK(e.try_push(spans(9)));  // 12 waiting: two full batches go now, 2 wait
  REQUIRE(eventually([&] { return e.stats().exported == 10; }));
  CHECK(collector.seen() == std::vector<size_t>{5, 5});
  CHECK(e.stats().queued == 2);
  e.stop();
  CHECK(collector.seen() == std::vector<size_t>{5, 5, 2});
  CHECK(e.stats().exported == 12);
}

TEST_CASE("trace exporter: a partial batch goes after batch_interval, and the tick runs on the exporter thread") {
  FakeCollector collector;
  std::atomic<int> ticks{0};
  TraceExporterOptions o;
  o.batch_max_spans = 100;
  o.batch_interval = 20ms;
  o.post = collector.post();
  o.tick = [&] { ++ticks; };
  TraceExporter e(o);
  e.start();
  CHECK(e.try_push(spans(3)));
  REQUIRE(eventually([&] { return e.stats().exported == 3; }));
  CHECK(collector.seen() == std::vector<size_t>{3});
  REQUIRE(eventually([&] { return ticks >= 2; }));
  e.stop();
}

TEST_CASE("trace exporter: a batch the collector refuses is dropped and counted; the next one goes") {
  FakeCollector collector;
  collector.fail = true;
  TraceExporterOptions o;
  o.batch_max_spans = 4;
  o.batch_interval = 1h;
  o.post = collector.post();
  TraceExporter e(o);
  e.start();
  CHECK(e.try_push(spans(4)));
  REQUIRE(eventually([&] { return e.stats().export_failures == 1; }));
  CHECK(e.stats().dropped_export_failed == 4);
  CHECK(e.stats().exported == 0);
  collector.fail = false;
  CHECK(e.try_push(spans(4)));
  REQUIRE(eventually([&] { return e.stats().exported == 4; }));
  CHECK(e.stats().export_failures == 1);
  e.stop();
}

TEST_CASE("trace exporter: a collector that hangs: workers never wait, the queue overflows into drops, stop ends within its timeout") {
  TraceExporterOptions o;
  o.max_queue_spans = 8;
  o.batch_max_spans = 4;
  o.batch_interval = 1h;
  o.timeout = 200ms;
  // A POST that takes its whole timeout (the collector accepted the connection and says nothing).
  o.post = [&](const HttpTarget&, std::string_view, std::string_view, std::chrono::milliseconds timeout) {
    auto until = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < until) std::this_thread::sleep_for(1ms);
    return HttpPostResult{0, "no answer"};
  };
  TraceExporter e(o);
  e.start();
  CHECK(e.try_push(spans(4)));  // taken by the thread, which then hangs in its POST
  REQUIRE(eventually([&] { return e.stats().queued == 0; }));
  auto t0 = std::chrono::steady_clock::now();
  size_t refused = 0;
  for (int i = 0; i < 50; ++i)
    if (!e.try_push(spans(1))) ++refused;
  auto pushing = std::chrono::steady_clock::now() - t0;
  CHECK(pushing < 100ms);    // 50 pushes against a hung collector: none waited for it
  CHECK(refused >= 42 - 8);  // the queue holds 8 (and a batch of 4 may have left meanwhile)
  CHECK(e.stats().dropped_queue_full == refused);
  auto s0 = std::chrono::steady_clock::now();
  e.stop();
  CHECK(std::chrono::steady_clock::now() - s0 < 2s);  // the POST in flight, then a flush bounded by the timeout
  auto s = e.stats();
  CHECK(s.exported == 0);
  CHECK(s.queued == 0);
  // Every span pushed is accounted for: exported, or dropped for a reason.
  CHECK(s.dropped_queue_full + s.dropped_export_failed + s.dropped_shutdown == 54);
}

TEST_CASE("trace exporter: stop without start drops what is queued, counted as shutdown") {
  TraceExporter e(TraceExporterOptions{});
  CHECK(e.try_push(spans(3)));
  e.stop();
  CHECK(e.stats().dropped_shutdown == 3);
  e.stop();  // idempotent
}

TEST_CASE("trace exporter: http_post against a tiny HTTP listener") {
  SUBCASE("200: the request is an HTTP/1.1 POST of the body, with its length") {
    TinyHttpServer server(200);
    auto r = http_post(HttpTarget{"127.0.0.1", server.port(), "/v1/traces"}, "application/json", R"({"resourceSpans":[]})", 2s);
    CHECK(r.ok());
    CHECK(r.status == 200);
    REQUIRE(eventually([&] { return server.requests().size() == 1; }));
    std::string req = server.requests()[0];
    INFO(req);
    CHECK(req.starts_with("POST /v1/traces HTTP/1.1\r\n"));
    CHECK(req.find("\r\nHost: 127.0.0.1:" + std::to_string(server.port()) + "\r\n") != std::string::npos);
    CHECK(req.find("\r\nContent-Type: application/json\r\n") != std::string::npos);
    CHECK(req.find("\r\nContent-Length: 20\r\n") != std::string::npos);
    CHECK(req.ends_with("\r\n\r\n{\"resourceSpans\":[]}"));
  }
  SUBCASE("a refusal is an error with its status") {
    TinyHttpServer server(400);
    auto r = http_post(HttpTarget{"127.0.0.1", server.port(), "/v1/traces"}, "application/json", "{}", 2s);
    CHECK_FALSE(r.ok());
    CHECK(r.status == 400);
    CHECK(r.error.find("400") != std::string::npos);
  }
  SUBCASE("a listener that never answers: an error after the timeout, not before, not much after") {
    TinyHttpServer server(200, /*silent=*/true);
    auto t0 = std::chrono::steady_clock::now();
    auto r = http_post(HttpTarget{"127.0.0.1", server.port(), "/v1/traces"}, "application/json", "{}", 150ms);
    auto took = std::chrono::steady_clock::now() - t0;
    CHECK_FALSE(r.ok());
    CHECK(r.status == 0);
    CHECK(r.error.find("no answer") != std::string::npos);
    CHECK(took >= 140ms);
    CHECK(took < 2s);
  }
  SUBCASE("nobody listens: connection refused") {
    uint16_t port;
    {
      TinyHttpServer gone(200);
      port = gone.port();
    }  // closed: the port refuses now (nobody else binds a fresh ephemeral port that fast)
    auto r = http_post(HttpTarget{"127.0.0.1", port, "/v1/traces"}, "application/json", "{}", 1s);
    CHECK_FALSE(r.ok());
    CHECK(r.error.find("cannot connect") != std::string::npos);
  }
}

TEST_CASE("trace exporter: the exporter's own HTTP client delivers batches to a listener") {
  TinyHttpServer server(200);
  TraceExporterOptions o;
  o.target = HttpTarget{"127.0.0.1", server.port(), "/v1/traces"};
  o.service_name = "kproxy-unit";
  o.batch_max_spans = 3;
  o.batch_interval = 1h;
  TraceExporter e(o);
  e.start();
  CHECK(e.try_push(spans(3)));
  REQUIRE(eventually([&] { return e.stats().exported == 3; }));
  e.stop();
  auto requests = server.requests();
  REQUIRE(requests.size() == 1);
  auto body = nlohmann::json::parse(requests[0].substr(requests[0].find("\r\n\r\n") + 4));
  CHECK(body["resourceSpans"][0]["resource"]["attributes"][0]["value"]["stringValue"] == "kproxy-unit");
  CHECK(body["resourceSpans"][0]["scopeSpans"][0]["spans"].size() == 3);
}
