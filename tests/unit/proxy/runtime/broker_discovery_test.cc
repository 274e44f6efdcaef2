#include "proxy/runtime/broker_discovery.h"

#include <doctest/doctest.h>

#include <optional>
#include <string>
#include <vector>

#include "codec/generated/messages/metadata.h"
#include "codec/request_header.h"
#include "codec/response_header.h"
#include "tests/unit/support/loop.h"
#include "tests/unit/support/services.h"
#include "tests/unit/support/test_ports.h"

using namespace kproxy;
using namespace std::chrono_literals;

namespace {

codec::MetadataResponse three_brokers() {
  codec::MetadataResponse response;
  for (int32_t id : {1, 2, 3}) {
    codec::MetadataResponse::MetadataResponseBroker b;
    b.node_id = id;
    b.host = id == 1 ? "kafka-1.internal" : id == 2 ? "kafka-2.internal" : "kafka-3.internal";
    b.port = 9092 + id;
    response.brokers.push_back(b);
  }
  return response;
}

/// A one-connection "broker" on loopback: it reads one whole request frame, keeps it, and then
/// does what `answer` says (sends those bytes; empty: closes without a word).
struct FakeBroker {
  uv_tcp_t server{};
  uv_tcp_t peer{};
  bool accepted = false;
  std::vector<uint8_t> request;
  std::vector<uint8_t> answer;
  uint16_t port = 0;

  explicit FakeBroker(uv_loop_t* loop) {
    uv_tcp_init(loop, &server);
    server.data = this;
    sockaddr_in a{};
    uv_ip4_addr("127.0.0.1", 0, &a);
    REQUIRE(uv_tcp_bind(&server, reinterpret_cast<sockaddr*>(&a), 0) == 0);
    REQUIRE(uv_listen(reinterpret_cast<uv_stream_t*>(&server), 4, on_connection) == 0);
    int len = sizeof(a);
    uv_tcp_getsockname(&server, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  static void on_connection(uv_stream_t* s, int status) {
    auto* self = static_cast<FakeBroker*>(s->data);
    REQUIRE(status == 0);
    uv_tcp_init(s->loop, &self->peer);
    self->peer.data = self;
    REQUIRE(uv_accept(s, reinterpret_cast<uv_stream_t*>(&self->peer)) == 0);
    self->accepted = true;
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&self->peer),
        [](uv_handle_t*, size_t, uv_buf_t* buf) {
          static char space[4096];
          *buf = uv_buf_init(space, sizeof space);
        },
        on_read);
  }
  static void on_read(uv_stream_t* s, ssize_t n, const uv_buf_t* buf) {
    auto* self = static_cast<FakeBroker*>(s->data);
    if (n <= 0) return;
    self->request.insert(self->request.end(), buf->base, buf->base + n);
    if (self->request.size() < 4) return;
    codec::Reader r(codec::Bytes(self->request.data(), 4));
    if (self->request.size() < 4 + static_cast<size_t>(r.int32())) return;
    uv_read_stop(s);
    if (self->answer.empty()) {
      self->close();
      return;
    }
    auto* req = new uv_write_t;
    uv_buf_t out = uv_buf_init(reinterpret_cast<char*>(self->answer.data()), static_cast<unsigned>(self->answer.size()));
    uv_write(req, s, &out, 1, [](uv_write_t* w, int) { delete w; });
  }
  void close() {
    if (accepted && !uv_is_closing(reinterpret_cast<uv_handle_t*>(&peer))) uv_close(reinterpret_cast<uv_handle_t*>(&peer), nullptr);
    if (!uv_is_closing(reinterpret_cast<uv_handle_t*>(&server))) uv_close(reinterpret_cast<uv_handle_t*>(&server), nullptr);
  }
};

struct Outcome {
  bool done = false;
  std::vector<runtime::DiscoveredBroker> brokers;
  std::string error;
};

/// Runs a discovery against 127.0.0.1:`port` until it is done and released.
Outcome discover(uv_loop_t* loop, uint16_t port, std::chrono::milliseconds timeout = 5s) {
  Outcome out;
  testing::TestServices services;
  runtime::BrokerDiscovery discovery(loop, services.view(),
                                     [&out](std::vector<runtime::DiscoveredBroker> brokers, const std::string& error) {
                                       out.done = true;
                                       out.brokers = std::move(brokers);
                                       out.error = error;
                                     });
  discovery.start({"127.0.0.1", port}, nullptr, timeout);
  while (!out.done || !discovery.released()) uv_run(loop, UV_RUN_ONCE);
  return out;
}

}  // namespace

TEST_CASE("the discovery request is MetadataRequest v12 for no topic, header v2") {
  std::vector<uint8_t> frame = runtime::discovery_request_frame(77);
  codec::Reader size(codec::Bytes(frame.data(), 4));
  REQUIRE(static_cast<size_t>(size.int32()) == frame.size() - 4);
  codec::Bytes body(frame.data() + 4, frame.size() - 4);
  codec::RequestHeader header;
  std::string error;
  REQUIRE(codec::read_request_header(body, header, &error));
  CHECK(header.api_key == 3);
  CHECK(header.api_version == 12);
  CHECK(header.header_version == 2);
  CHECK(header.correlation_id == 77);
  CHECK(header.client_id == std::optional<std::string_view>("kproxy-broker-discovery"));
  codec::Reader r(body.subspan(header.size));
  codec::MetadataRequest request;
  request.read(r, 12);
  REQUIRE(r.ok());
  CHECK(r.at_end());
  REQUIRE(request.topics.has_value());  // an empty list, not null (null asks for every topic)
  CHECK(request.topics->empty());
  CHECK_FALSE(request.allow_auto_topic_creation);
}

TEST_CASE("parse_discovery_response: the brokers, or why not") {
  std::string error;
  auto frame = codec::encode_response_frame(5, 1, three_brokers(), 12);
  codec::Bytes body(frame.data() + 4, frame.size() - 4);
  auto brokers = runtime::parse_discovery_response(body, 5, error);
  CHECK(error.empty());
  REQUIRE(brokers.size() == 3);
  CHECK(brokers[1].node_id == 2);
  CHECK(brokers[1].host == "kafka-2.internal");
  CHECK(brokers[1].port == 9094);

  CHECK(runtime::parse_discovery_response(body, 6, error).empty());
  CHECK(error == "the answer carries correlation id 5, not the request's 6");

  CHECK(runtime::parse_discovery_response(body.first(body.size() - 7), 5, error).empty());
  CHECK(error.rfind("the Metadata response cannot be read: ", 0) == 0);

  auto none = codec::encode_response_frame(5, 1, codec::MetadataResponse{}, 12);
  CHECK(runtime::parse_discovery_response(codec::Bytes(none.data() + 4, none.size() - 4), 5, error).empty());
  CHECK(error == "the Metadata response names no broker");
}

TEST_CASE("a discovery learns the brokers a broker's answer names") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  FakeBroker broker(&loop);
  broker.answer = codec::encode_response_frame(runtime::BrokerDiscovery::kCorrelationId, 1, three_brokers(), 12);
  Outcome out = discover(&loop, broker.port);
  CHECK(out.error.empty());
  REQUIRE(out.brokers.size() == 3);
  CHECK(out.brokers[0].host == "kafka-1.internal");
  CHECK(broker.request == runtime::discovery_request_frame(
                              runtime::BrokerDiscovery::kCorrelationId));  // what the broker received is the request frame, whole
  broker.close();
  kproxy::testing::close_loop(&loop);
}

TEST_CASE("a discovery fails with a reason: refused, closed without an answer, a wrong answer, no answer in time") {
  uv_loop_t loop;
  uv_loop_init(&loop);
  SUBCASE("nobody listens") {
    uint16_t port = kproxy::testing::reserved_port();
    Outcome out = discover(&loop, port);
    CHECK(out.brokers.empty());
    CHECK(out.error == "cannot connect to 127.0.0.1:" + std::to_string(port) + ": connection refused");
  }
  SUBCASE("the broker closes (a SASL listener does so to a Metadata request before authentication)") {
    FakeBroker broker(&loop);
    Outcome out = discover(&loop, broker.port);
    CHECK(out.brokers.empty());
    CHECK(out.error == "the broker closed the connection before it answered (does it require authentication first?)");
    broker.close();
  }
  SUBCASE("an answer to another request") {
    FakeBroker broker(&loop);
    broker.answer = codec::encode_response_frame(1, 1, three_brokers(), 12);
    Outcome out = discover(&loop, broker.port);
    CHECK(out.brokers.empty());
    CHECK(out.error.find("correlation id 1, not the request's") != std::string::npos);
    broker.close();
  }
  SUBCASE("a frame size no Metadata answer has") {
    FakeBroker broker(&loop);
    broker.answer = {0x7f, 0, 0, 0, 1, 2, 3, 4};
    Outcome out = discover(&loop, broker.port);
    CHECK(out.brokers.empty());
    CHECK(out.error == "the answer's frame size 2130706432 is no brokers-only Metadata response");
    broker.close();
  }
  SUBCASE("no answer in time") {
    FakeBroker broker(&loop);
    broker.answer = {0, 0};  // half a size prefix, then silence
    Outcome out = discover(&loop, broker.port, 200ms);
    CHECK(out.brokers.empty());
    CHECK(out.error == "no answer within the connect timeout");
    broker.close();
  }
  kproxy::testing::close_loop(&loop);
}
