#include "proxy/client_connection.h"

#include <sys/socket.h>

#include <cassert>

#include <spdlog/spdlog.h>

#include "codec/generated/api_keys.h"
#include "codec/request_header.h"
#include "codec/response_header.h"
#include "proxy/broker_address_rewrite.h"
#include "proxy/counters.h"
#include "proxy/proxy.h"
#include "proxy/request_fields.h"
#include "proxy/tls/tls_session.h"
#include "proxy/worker.h"

namespace kproxy::proxy {

namespace {
const char* api_label(int16_t api_key) {
  const char* name = codec::api_name(api_key);
  return name ? name : "unknown-api";
}
}  // namespace

ClientConnection::ClientConnection(Worker& worker, const ListenerSpec& listener, std::shared_ptr<const config::Config> config,
                                   uint64_t id)
    : worker_(worker),
      listener_(listener),
      config_(std::move(config)),
      rewrite_(worker.proxy().rewrite(listener.listener_index)),
      id_(id),
      client_(worker.loop(), *this, "client"),
      upstream_(worker.loop(), *this, *this),
      requests_(config_->limits.max_request_frame_bytes),
      responses_(config_->limits.max_response_frame_bytes),
      pipeline_(worker.loop(), worker.proxy().chaos(), ConnectionInfo{id, listener.name, listener.listener_index, "", "", ""},
                Pipeline::Sink{
                    [this](codec::Bytes f, const codec::RequestHeader& h, bool expects) { forward_request(f, h, expects); },
                    [this](codec::Bytes b) { pass_on(client_, b, responses_, upstream_piece_); },
                    [this] {
                      if (closing_) return;
                      if (!upstream_.stream().flush() || !client_.flush() || closing_) return;
                      // A shaper released bytes (or a held request went out): re-check both ways.
                      apply_backpressure(client_, upstream_.stream());
                      apply_backpressure(upstream_.stream(), client_);
                    },
                    [this](const std::string& reason) { close(reason); },
                    [this](codec::Bytes b) { pass_on(upstream_.stream(), b, requests_, client_piece_); },
                    [this] {
                      // SO_LINGER 0: close() sends RST (a reset_after_bytes fault rule).
                      uv_os_fd_t fd;
                      if (uv_fileno(reinterpret_cast<uv_handle_t*>(client_.handle()), &fd) == 0) {
                        struct linger l{1, 0};
                        setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
                      }
                    }}),
      tls_handshake_deadline_(worker.loop(), [this] {
        on_stream_tls_failed(client_, "handshake not finished within " + std::to_string(config_->limits.tls_handshake_timeout.count()) +
                                          " ms (limits.tls_handshake_timeout)");
      }) {}

ClientConnection::~ClientConnection() {
  worker_.proxy().release_connection();
}

void ClientConnection::start(const config::HostPort& upstream) {
  opened_at_ = std::chrono::steady_clock::now();
  peer_ = client_.peer_address();
  client_.set_connected();
  metrics_.opened();
  uv_tcp_nodelay(client_.handle(), 1);
  spdlog::info("conn={} accepted from {} on {} port {}, upstream {}", id_, peer_, listener_.label(), listener_.port, upstream.to_string());
  // TLS contexts as of now: a reload with renewed certificates applies to later connections.
  // The upstream session verifies the broker's certificate against the host it is reached by:
  // the bootstrap host, or the host the broker advertises.
  tls::ListenerTls tls = worker_.proxy().listener_tls(listener_.listener_index);
  if (tls.clients) {
    client_.use_tls(std::make_unique<tls::TlsSession>(*tls.clients, ""));
    tls_handshake_deadline_.arm(opened_at_ + config_->limits.tls_handshake_timeout);
  }
  if (tls.upstream) upstream_.stream().use_tls(std::make_unique<tls::TlsSession>(*tls.upstream, upstream.host));
  client_.start_reading();
  upstream_.connect(upstream, config_->limits.connect_timeout);
}

void ClientConnection::close(std::string_view reason) {
  if (closing_) return;
  closing_ = true;
  tls_handshake_deadline_.cancel();
  auto lived = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - opened_at_);
  spdlog::info("conn={} closed: {} (client {}, {} requests forwarded, {} in flight, {} bytes in, {} bytes out, open {} ms)", id_, reason,
               peer_, requests_forwarded_, inflight_.size(), metrics_.bytes_in(), metrics_.bytes_out(), lived.count());
  metrics_.closed(reason, pipeline_.info().client_software_name, pipeline_.info().client_software_version);
  pipeline_.shutdown();
  client_.close();
  upstream_.close(/*flush_first=*/false);
}

void ClientConnection::finish(std::string_view reason) {
  if (closing_) return;
  closing_ = true;
  tls_handshake_deadline_.cancel();
  auto lived = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - opened_at_);
  spdlog::info("conn={} closing after queued responses: {} (client {}, {} requests forwarded, {} in flight, {} bytes in, {} bytes out, open {} ms)",
               id_, reason, peer_, requests_forwarded_, inflight_.size(), metrics_.bytes_in(), metrics_.bytes_out(), lived.count());
  metrics_.closed(reason, pipeline_.info().client_software_name, pipeline_.info().client_software_version);
  upstream_.close(/*flush_first=*/true);
  client_.shutdown_and_close();
}

void ClientConnection::drain() {
  if (closing_ || draining_) return;
  draining_ = true;
  client_.stop_reading();
  if (inflight_.empty()) finish("kproxy is shutting down (nothing in flight)");
}

void ClientConnection::on_stream_read(TcpStream& s, codec::Bytes data) {
  if (closing_) return;
  // Views into `data` queued with append_borrowed must be written or copied before it is reused.
  struct NothingBorrowedAfter {
    ClientConnection& c;
    ~NothingBorrowedAfter() { assert(!c.client_.holds_borrowed() && !c.upstream_.stream().holds_borrowed()); }
  } check{*this};
  if (&s == &client_) {
    bump(counters().request_bytes, data.size());
    metrics_.bytes_in(data.size());
    // Views into the loop's read buffer may be borrowed; bytes read in place into a frame's own
    // buffer may not (that buffer goes when its frame is out, unless the frame is moved on).
    client_piece_ = requests_.is_read_space(data) ? codec::Bytes{} : data;
    bool ok = requests_.feed(data, [this](codec::Bytes frame) { return on_request_frame(frame); });
    client_piece_ = {};
    if (closing_) return;
    if (!ok) {
      if (requests_.looks_like_tls()) bump(counters().tls_on_plaintext);
      else bump(counters().framing_errors);
      close("bad request framing: " + requests_.error());
      return;
    }
    // Frames of `data` queued as views are written (or copied) here, before `data` is reused.
    if (!upstream_.stream().flush()) return;
    if (!client_.flush()) return;  // answers kproxy gave itself (fault rules, ApiVersions)
    apply_backpressure(client_, upstream_.stream());
  } else {
    bump(counters().response_bytes, data.size());
    metrics_.bytes_out(data.size());
    upstream_piece_ = responses_.is_read_space(data) ? codec::Bytes{} : data;
    bool ok = responses_.feed(data, [this](codec::Bytes frame) { return on_response_frame(frame); });
    upstream_piece_ = {};
    if (closing_) return;
    if (!ok) {
      bump(counters().framing_errors);
      // The first bytes a TLS listener sends a plaintext client are a TLS record (an alert,
      // content type 21, or a handshake, 22; RFC 8446 5.1), read as a size of ~350 MB.
      bool first_bytes = metrics_.bytes_out() == data.size();
      if (first_bytes && data.size() >= 2 && (data[0] == 0x15 || data[0] == 0x16) && data[1] == 0x03) {
        close("protocol mismatch: broker " + upstream_peer() + " answered with TLS (a TLS listener? set upstream_tls): " +
              responses_.error());
        return;
      }
      close("bad response framing from broker: " + responses_.error());
      return;
    }
    if (!client_.flush()) return;
    if (draining_ && inflight_.empty()) {
      finish("kproxy is shutting down (in-flight requests answered)");
      return;
    }
    apply_backpressure(upstream_.stream(), client_);
  }
}

std::span<uint8_t> ClientConnection::read_space(TcpStream& s) {
  if (closing_) return {};
  return &s == &client_ ? requests_.read_space() : responses_.read_space();
}

void ClientConnection::pass_on(TcpStream& to, codec::Bytes bytes, codec::FrameReader& reader, codec::Bytes piece) {
  if (reader.holds(bytes)) {
    to.append(reader.take_frame());
  } else if (!piece.empty() && bytes.data() >= piece.data() && bytes.data() + bytes.size() <= piece.data() + piece.size()) {
    to.append_borrowed(bytes);
  } else {
    to.append(bytes);
  }
}

bool ClientConnection::on_request_frame(codec::Bytes frame) {
  codec::Bytes message = frame.subspan(codec::kFrameSizePrefix);
  TcpStream& upstream = upstream_.stream();
  if (sasl_.active()) {
    codec::RequestHeader probe;
    bool parses = codec::read_request_header(message, probe, nullptr) && probe.header_version >= 0;
    if (sasl_.is_raw_token(parses)) {
      bump(counters().sasl_raw_tokens);
      if (sasl_.tokens_are_answered()) {
        inflight_.push(InflightRequest{InflightRequest::Kind::kSaslToken, -1, -1, 0, -1, std::chrono::steady_clock::now()});
      } else {
        unanswered_sasl_tokens_ = true;
      }
      pass_on(upstream, frame, requests_, client_piece_);
      return true;
    }
  }
  codec::RequestHeader header;
  std::string error;
  if (!codec::read_request_header(message, header, &error)) {
    bump(counters().malformed_requests);
    close("malformed request header: " + error);
    return false;
  }
  unanswered_sasl_tokens_ = false;
  counters().count_request(header.api_key);
  if (header.header_version < 0) {
    bump(counters().requests_unknown_version);
    spdlog::debug("conn={} forwarding api key {} ({}) v{} untouched: unknown to kproxy", id_, header.api_key, api_label(header.api_key),
                  header.api_version);
  }
  bool expects_response = true;
  if (header.header_version >= 0) {
    codec::Bytes body = message.subspan(header.size);
    if (header.api_key == kProduceApiKey) {
      auto acks = produce_request_acks(body, header.api_version);
      if (!acks) {
        bump(counters().malformed_requests);
        close("malformed ProduceRequest v" + std::to_string(header.api_version) + ": body too short for TransactionalId and Acks");
        return false;
      }
      if (*acks == 0) {
        expects_response = false;  // the broker sends nothing back (PROTOCOL.md 13)
        bump(counters().requests_without_response);
      }
    } else if (header.api_key == kSaslHandshakeApiKey && header.api_version == 0) {
      auto mechanism = sasl_handshake_mechanism(body);
      if (!mechanism) {
        bump(counters().malformed_requests);
        close("malformed SaslHandshakeRequest v0");
        return false;
      }
      spdlog::debug("conn={} SaslHandshake v0 ({}): raw SASL tokens follow", id_, *mechanism);
      sasl_.begin(*mechanism);
    }
  }
  switch (pipeline_.on_request(header, frame, expects_response)) {
    case RequestVerdict::kForward: break;
    case RequestVerdict::kHeld:
    case RequestVerdict::kAnswered: return true;
    case RequestVerdict::kClose: close(pipeline_.close_reason()); return false;
  }
  forward_request(frame, header, expects_response);
  return true;
}

void ClientConnection::forward_request(codec::Bytes frame, const codec::RequestHeader& header, bool expects_response) {
  if (expects_response) {
    inflight_.push(InflightRequest{InflightRequest::Kind::kKafka, header.api_key, header.api_version, header.correlation_id,
                                   static_cast<int8_t>(codec::response_header_version(header.api_key, header.api_version)),
                                   std::chrono::steady_clock::now()});
    metrics_.request_pushed();
  }
  pipeline_.send_broker(frame);  // transport fault rules may shape it (proxy/chaos/transport_shaper.h)
  ++requests_forwarded_;
}

bool ClientConnection::on_response_frame(codec::Bytes frame) {
  codec::Bytes message = frame.subspan(codec::kFrameSizePrefix);
  if (inflight_.empty()) {
    if (unanswered_sasl_tokens_) {
      pass_on(client_, frame, responses_, upstream_piece_);
      return true;
    }
    bump(counters().unexpected_responses);
    close("broker sent a response with no request in flight");
    return false;
  }
  InflightRequest request = inflight_.pop();
  metrics_.response_popped();
  if (request.kind == InflightRequest::Kind::kSaslToken) {
    pass_on(client_, frame, responses_, upstream_piece_);
    return true;
  }
  if (message.size() < 4) {
    bump(counters().malformed_responses);
    close("response of " + std::to_string(message.size()) + " bytes to " + api_label(request.api_key) + " has no correlation id");
    return false;
  }
  int32_t correlation_id = codec::peek_response_correlation_id(message);
  if (correlation_id != request.correlation_id) {
    bump(counters().correlation_mismatches);
    close("correlation id mismatch: expected " + std::to_string(request.correlation_id) + " (" + api_label(request.api_key) + " v" +
          std::to_string(request.api_version) + "), broker sent " + std::to_string(correlation_id));
    return false;
  }
  bump(counters().responses);
  codec::Bytes forwarded = frame;
  std::vector<uint8_t> rewritten;
  std::optional<codec::ResponseScan> scanned;  // the body walked once by the rewrite, for the pipeline's stages too
  if (BrokerAddressRewrite::applies_to(request.api_key)) {
    if (request.response_header_version < 0) {
      close(std::string("cannot rewrite broker addresses in a ") + api_label(request.api_key) + " v" + std::to_string(request.api_version) +
            " response: version unknown to kproxy");
      return false;
    }
    std::vector<BrokerAddressRewrite::NewBrokerPort> added;
    std::string error;
    auto outcome =
        rewrite_.rewrite(request.api_key, request.api_version, request.response_header_version, frame, rewritten, added, error, &scanned);
    for (const auto& a : added) worker_.proxy().open_broker_port(worker_, listener_.listener_index, a.node_id, a.port);
    if (outcome == BrokerAddressRewrite::Outcome::kFailed) {
      bump(counters().malformed_responses);
      close(std::string("cannot rewrite broker addresses in a ") + api_label(request.api_key) + " v" + std::to_string(request.api_version) +
            " response: " + error);
      return false;
    }
    if (outcome == BrokerAddressRewrite::Outcome::kRewritten) {
      bump(counters().responses_rewritten);
      forwarded = rewritten;
      scanned.reset();  // it describes the original bytes
    }
  }
  pipeline_.on_response(request.api_key, request.api_version, request.response_header_version, forwarded, request.sent_at,
                        scanned ? &*scanned : nullptr);
  return !closing_;
}

void ClientConnection::apply_backpressure(TcpStream& from, TcpStream& to) {
  size_t held = &to == &client_ ? pipeline_.held_bytes_to_client() : pipeline_.held_bytes_to_broker();
  if (to.queued_bytes() + held > kWriteQueueHighWater) {
    from.stop_reading();
  } else if (!from.reading() && held < kWriteQueueLowWater && !(draining_ && &from == &client_) &&
             (&from == &client_ || upstream_.stream().connected())) {
    from.start_reading();
  }
}

void ClientConnection::on_stream_error(TcpStream& s, int status, const char* during) {
  if (closing_) {
    s.close();
    return;
  }
  if (&s == &client_) {
    if (status == UV_EOF) close("client closed the connection");
    else close(std::string("client ") + during + " failed: " + uv_strerror(status));
    return;
  }
  bump(counters().upstream_disconnects);
  std::string reason = status == UV_EOF ? "broker " + upstream_.target().to_string() + " closed the connection"
                                        : "broker " + upstream_.target().to_string() + " " + during + " failed: " + uv_strerror(status);
  if (!inflight_.empty()) reason += " with " + std::to_string(inflight_.size()) + " requests in flight";
  // The client gets the responses already received, then sees the disconnect: nothing in flight
  // is silently lost.
  finish(reason);
}

void ClientConnection::on_stream_writable(TcpStream& s) {
  if (closing_) return;
  if (&s == &client_) apply_backpressure(upstream_.stream(), client_);
  else apply_backpressure(client_, upstream_.stream());
}

void ClientConnection::on_stream_closed(TcpStream&) { maybe_destroy(); }

std::string ClientConnection::upstream_peer() {
  std::string resolved = upstream_.stream().peer_address();
  std::string target = upstream_.target().to_string();
  return resolved.empty() || resolved == target ? target : target + " (" + resolved + ")";
}

void ClientConnection::on_stream_tls_failed(TcpStream& s, const std::string& reason) {
  if (closing_) {
    s.close();
    return;
  }
  bump(counters().tls_failures);
  if (&s == &client_) {
    close("TLS with client " + peer_ + " failed: " + reason);
    return;
  }
  bump(counters().upstream_connect_failures);
  close("TLS with broker " + upstream_peer() + " failed: " + reason);
}

void ClientConnection::on_stream_tls_established(TcpStream& s) {
  bool client = &s == &client_;
  if (client) tls_handshake_deadline_.cancel();
  else upstream_.handshake_done();
  std::string sni = s.tls()->requested_server_name();
  spdlog::debug("conn={} TLS with {}: {}{}", id_, client ? "client " + peer_ : "broker " + upstream_peer(), s.tls()->protocol_and_cipher(),
                sni.empty() ? "" : ", SNI " + sni);
}

void ClientConnection::on_upstream_connected() {
  if (closing_) return;
  spdlog::debug("conn={} connected to {}", id_, upstream_.target().to_string());
  metrics_.upstream_connected();
  if (!upstream_.stream().flush()) return;
  upstream_.stream().start_reading();
  apply_backpressure(client_, upstream_.stream());
}

void ClientConnection::on_upstream_connect_failed(const std::string& reason) {
  bump(counters().upstream_connect_failures);
  if (!listener_.is_broker_port()) worker_.proxy().bootstrap_unreachable(listener_.listener_index, upstream_.target());
  close("upstream unavailable: " + reason);
}

void ClientConnection::on_upstream_part_released() { maybe_destroy(); }

void ClientConnection::maybe_destroy() {
  if (destroyed_ || !client_.closed() || !upstream_.released()) return;
  destroyed_ = true;
  worker_.forget(this);
  delete this;
}

}  // namespace kproxy::proxy
