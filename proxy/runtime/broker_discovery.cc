#include "proxy/runtime/broker_discovery.h"

#include <uv.h>

#include "codec/generated/messages/metadata.h"
#include "codec/request_header.h"
#include "codec/response_header.h"
#include "proxy/tls/tls_session.h"

namespace kproxy::runtime {

namespace {
// MetadataRequest v12: flexible (header v2, response header v1), topic ids, answered by every
// broker since Kafka 2.8 and by Kafka 4 (KIP-896 removed only v0-v3).
constexpr int16_t kMetadataVersion = 12;
}  // namespace

std::vector<uint8_t> discovery_request_frame(int32_t correlation_id) {
  codec::MetadataRequest request;
  request.topics.emplace();  // an empty list: no topic, the brokers only (null would mean every topic)
  request.allow_auto_topic_creation = false;
  codec::RequestHeader header;
  header.api_key = codec::MetadataRequest::kApiKey;
  header.api_version = kMetadataVersion;
  header.correlation_id = correlation_id;
  header.client_id = "kproxy-broker-discovery";
  header.header_version = 2;
  std::vector<uint8_t> frame;
  codec::Writer w(frame);
  w.int32(static_cast<int32_t>(codec::request_header_size(header) + request.size(kMetadataVersion)));
  codec::write_request_header(w, header);
  request.write(w, kMetadataVersion);
  return frame;
}

std::vector<DiscoveredBroker> parse_discovery_response(codec::Bytes frame, int32_t correlation_id, std::string& error) {
  codec::ResponseHeader header;
  if (!codec::read_response_header(frame, 1, header, &error)) {
    error = "the Metadata response's header cannot be read: " + error;
    return {};
  }
  if (header.correlation_id != correlation_id) {
    error = "the answer carries correlation id " + std::to_string(header.correlation_id) + ", not the request's " +
            std::to_string(correlation_id);
    return {};
  }
  codec::Reader r(frame.subspan(header.size));
  codec::MetadataResponse response;
  response.read(r, kMetadataVersion);
  if (!r.ok()) {
    error = "the Metadata response cannot be read: " + r.error();
    return {};
  }
  std::vector<DiscoveredBroker> out;
  for (const auto& b : response.brokers) out.push_back({b.node_id, std::string(b.host), b.port});
  if (out.empty()) error = "the Metadata response names no broker";
  return out;
}

BrokerDiscovery::BrokerDiscovery(uv_loop_t* loop, const stage::Services& services, Done done)
    : clock_(services.clock), upstream_(loop, *this, *this, services.self_connections),
      deadline_(loop, services.clock, [this] { finish({}, "no answer within the connect timeout"); }), done_(std::move(done)) {}

void BrokerDiscovery::start(const config::HostPort& bootstrap, std::shared_ptr<const tls::TlsContext> upstream_tls,
                            std::chrono::milliseconds timeout) {
  deadline_.arm(clock_.now() + timeout);
  if (upstream_tls) upstream_.stream().use_tls(std::make_unique<tls::TlsSession>(*upstream_tls, bootstrap.host));
  upstream_.connect(bootstrap, timeout);
}

void BrokerDiscovery::cancel() {
  finished_ = true;
  deadline_.cancel();
  upstream_.close(/*flush_first=*/false);
}

void BrokerDiscovery::finish(std::vector<DiscoveredBroker> brokers, const std::string& error) {
  if (finished_) return;
  cancel();
  // Last: `done` may destroy this object once released() (the worker sweeps it later).
  Done done = std::move(done_);
  done(std::move(brokers), error);
}

void BrokerDiscovery::on_upstream_connected() {
  if (finished_) return;
  std::vector<uint8_t> request = discovery_request_frame(kCorrelationId);
  upstream_.stream().append(codec::Bytes(request.data(), request.size()));
  if (!upstream_.stream().flush()) return;
  upstream_.stream().start_reading();
}

void BrokerDiscovery::on_stream_read(net::TcpStream&, codec::Bytes data) {
  if (finished_) return;
  received_.insert(received_.end(), data.begin(), data.end());
  if (received_.size() < 4) return;
  codec::Reader size_reader(codec::Bytes(received_.data(), 4));
  int32_t size = size_reader.int32();
  if (size < 0 || static_cast<size_t>(size) > kMaxResponseBytes) {
    finish({}, "the answer's frame size " + std::to_string(size) + " is no brokers-only Metadata response");
    return;
  }
  if (received_.size() < 4 + static_cast<size_t>(size)) return;
  std::string error;
  auto brokers = parse_discovery_response(codec::Bytes(received_.data() + 4, static_cast<size_t>(size)), kCorrelationId, error);
  finish(std::move(brokers), error);
}

void BrokerDiscovery::on_stream_error(net::TcpStream&, int status, const char* during) {
  finish({}, status == UV_EOF ? "the broker closed the connection before it answered (does it require authentication first?)"
                              : std::string(during) + ": " + uv_strerror(status));
}

void BrokerDiscovery::on_stream_tls_failed(net::TcpStream&, const std::string& reason) { finish({}, "TLS: " + reason); }

}  // namespace kproxy::runtime
