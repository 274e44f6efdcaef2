// Frame contexts: what a pipeline stage (proxy/pipeline/stage.h) sees of one request or response, and
// where it records what it decided.
//
// Bodies are decoded lazily, once: message() decodes on first use (codec make_request /
// make_response) and keeps a shared_ptr that observers may keep too. A stage that changes a
// response body calls mark_dirty(its id); the frame then leaves re-encoded with a patched size
// prefix. A frame nobody changed leaves as its original bytes. Stages that only need a response's
// error codes use scan() (codec::scan_response: no decode, no allocation), made once per frame.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "codec/generated/api_keys.h"
#include "codec/generated/response_scan.h"
#include "codec/message.h"
#include "codec/request_header.h"
#include "proxy/chaos/transport_shaper.h"
#include "proxy/net/close_reason.h"
#include "proxy/pipeline/stage.h"

namespace kproxy::chaos {
struct FaultRule;
}

namespace kproxy::proxy {

/// Kafka's name of `api_key` for logs ("Metadata"), or "unknown-api".
inline const char* api_label(int16_t api_key) {
  const char* name = codec::api_name(api_key);
  return name ? name : "unknown-api";
}

/// Why message() returned nullptr.
enum class DecodeFailure : uint8_t {
  kNone,            ///< decoded (or not tried yet)
  kUnknownApi,      ///< an api key kproxy's codec does not have
  kUnknownVersion,  ///< a version kproxy's codec does not have
  kMalformed,       ///< the bytes do not decode at their version
};

/// KIP-511: the software a client announced in ApiVersions v3+.
struct ClientSoftware {
  std::string name;
  std::string version;
};

/// What the pipeline knows of its connection; stages and observers see it with every frame.
/// Every connection holds one, idle or not: kept small (40 bytes).
struct ConnectionInfo {
  uint64_t id = 0;
  /// The listener's name. It views the connection's ListenerSpec (or a literal in tests), which
  /// lives as long as the connection.
  std::string_view listener;
  /// The listener's position in the config (metrics slots), resolved once per connection.
  size_t listener_index = 0;
  /// Null until the client announced its software (on the heap: an idle pair holds no strings).
  std::unique_ptr<ClientSoftware> client_software;
  /// "ip:port" of the client (the one a PROXY header named, behind a load balancer); "" in tests.
  std::string client_address;

  std::string_view client_software_name() const { return client_software ? std::string_view(client_software->name) : std::string_view(); }
  std::string_view client_software_version() const {
    return client_software ? std::string_view(client_software->version) : std::string_view();
  }
};

/// What the stages decided about one request/response exchange beyond its bytes: kept with the
/// request until its response arrives (fault rules decide at request time what happens to the
/// response).
struct ExchangeActions {
  std::vector<std::shared_ptr<const chaos::FaultRule>> error_rules;  ///< set these errors in the response
  std::optional<int32_t> throttle_ms;                                ///< set the response's throttle time
  std::chrono::milliseconds request_delay{0};                        ///< hold the request this long
  std::chrono::milliseconds response_delay{0};                       ///< hold the response this long
  bool drop_response = false;                                        ///< swallow it and every later one
  bool close_after = false;                                          ///< swallow it and close the client
  std::string close_after_rule;                                      ///< the rule that asked (for the close log line)
  std::string answer_rule;                    ///< the rule whose answer kproxy sent instead of the broker's (observers: who injected it)
  std::optional<uint64_t> reset_after_bytes;  ///< RST after this many more bytes
  bool duplicate_request = false;             ///< send the request twice; the second answer is swallowed
  bool discard_response = false;              ///< (the duplicate's slot) the broker's answer goes nowhere
  std::optional<chaos::TransportToxic> to_client;  ///< bandwidth / slice of the response
  std::optional<chaos::TransportToxic> to_broker;  ///< bandwidth / slice of the request
  /// True when anything must happen to the response (it cannot take the fast path).
  bool affect_response() const {
    return !error_rules.empty() || throttle_ms || response_delay.count() > 0 || drop_response || close_after || reset_after_bytes ||
           to_client || discard_response;
  }
};

/// A request frame in flight through the stages.
class RequestContext {
 public:
  RequestContext(const codec::RequestHeader& header, codec::Bytes frame, ConnectionInfo& connection, bool expects_response = true)
      : header_(header), frame_(frame), connection_(connection), expects_response_(expects_response) {}

  const codec::RequestHeader& header() const { return header_; }
  /// The original frame, size prefix included.
  codec::Bytes frame() const { return frame_; }
  const ConnectionInfo& connection() const { return connection_; }
  /// False for Produce acks=0: the broker will not answer.
  bool expects_response() const { return expects_response_; }
  /// The decoded body (decoded on first call), or nullptr when the version is unknown or the body
  /// does not decode (then decode_error() says why). Views point into frame().
  std::shared_ptr<codec::Message> message() const;
  const std::string& decode_error() const { return decode_error_; }

  /// KIP-511: the client announced its software (ApiVersions v3+).
  void set_client_software(std::string name, std::string version) {
    connection_.client_software = std::make_unique<ClientSoftware>(ClientSoftware{std::move(name), std::move(version)});
  }

  /// kproxy answers the request itself with `frame` (a whole response frame); it is not forwarded.
  void answer(std::vector<uint8_t> frame) {
    answer_ = std::move(frame);
    answered_ = true;
  }
  bool answered() const { return answered_; }
  std::vector<uint8_t>& answer_frame() { return answer_; }

  /// Closes the connection instead of forwarding; later stages still see the request.
  void close(CloseReason reason) { close_ = std::move(reason); }
  bool closing() const { return close_.has_value(); }
  std::optional<CloseReason>& close_reason() { return close_; }

  ExchangeActions& actions() { return actions_; }
  const ExchangeActions& actions() const { return actions_; }

 private:
  const codec::RequestHeader& header_;
  codec::Bytes frame_;
  ConnectionInfo& connection_;
  bool expects_response_;
  bool answered_ = false;
  std::vector<uint8_t> answer_;
  std::optional<CloseReason> close_;
  ExchangeActions actions_;
  mutable std::shared_ptr<codec::Message> message_;
  mutable bool decoded_ = false;
  mutable std::string decode_error_;
  mutable DecodeFailure decode_failure_ = DecodeFailure::kNone;
};

/// A response frame on its way through the stages to the client.
class ResponseContext {
 public:
  /// `actions`: what the stages decided for this exchange when its request passed.
  ResponseContext(int16_t api_key, int16_t api_version, int header_version, codec::Bytes frame, ConnectionInfo& connection,
                  ExchangeActions& actions, bool synthetic, std::chrono::nanoseconds latency)
      : api_key_(api_key), api_version_(api_version), header_version_(header_version), frame_(frame), connection_(connection),
        actions_(&actions), synthetic_(synthetic), latency_(latency) {}
  /// A broker response with no actions recorded (observers' tests and benchmarks).
  ResponseContext(int16_t api_key, int16_t api_version, int header_version, codec::Bytes frame, ConnectionInfo& connection)
      : api_key_(api_key), api_version_(api_version), header_version_(header_version), frame_(frame), connection_(connection),
        actions_(&own_actions_), synthetic_(false), latency_(0) {}
  ResponseContext(const ResponseContext&) = delete;
  ResponseContext& operator=(const ResponseContext&) = delete;

  int16_t api_key() const { return api_key_; }
  int16_t api_version() const { return api_version_; }
  /// The version the body decodes at (ApiVersions' v0 fallback may differ from api_version()).
  int16_t body_version() const { return body_version_; }
  /// The response header version (codec tables), -1 for APIs or versions kproxy does not know.
  int header_version() const { return header_version_; }
  /// The frame as it stands now: the broker's bytes, or what a stage put in their place.
  codec::Bytes frame() const { return frame_; }
  const ConnectionInfo& connection() const { return connection_; }
  /// True for answers kproxy built itself (the broker never saw the request).
  bool synthetic() const { return synthetic_; }
  /// The broker round trip seen by kproxy (0 for synthetic answers).
  std::chrono::nanoseconds latency() const { return latency_; }
  ExchangeActions& actions() { return *actions_; }
  const ExchangeActions& actions() const { return *actions_; }
  /// True when the response will not reach the client: a rule drops it (or dropped an earlier
  /// one: the connection is blackholed), closes the connection in its place, or resets the
  /// connection before its last byte. Set by the pipeline before the stages see the response;
  /// observers read it to tell what the broker did from what the client saw.
  bool withheld() const { return withheld_; }
  void set_withheld(bool withheld) { withheld_ = withheld; }

  std::shared_ptr<codec::Message> message() const;
  const std::string& decode_error() const { return decode_error_; }
  DecodeFailure decode_failure() const { return decode_failure_; }
  /// The body's error codes (with their offsets) and top-level tags, scanned without decoding on
  /// first call, or nullptr when the body does not scan. Describes frame() as it was before any
  /// mark_dirty(): once a stage has changed the body (dirty()), use message() instead.
  const codec::ResponseScan* scan() const;
  /// Storage for a scan an earlier stage makes of frame() while it walks the body anyway; call
  /// scan_stored() once it is filled, and scan() returns it.
  std::optional<codec::ResponseScan>* scan_storage() { return &own_scan_; }
  void scan_stored() { scanned_ = own_scan_.has_value(); }

  /// Stage `by` changed the decoded body (message()): it is re-encoded on the way out.
  void mark_dirty(StageId by) {
    dirty_ = true;
    changed_by_ |= bit(by);
  }
  /// Stage `by` replaces the whole frame (size prefix included) with `frame`; decode and scan
  /// state start over from the new bytes.
  void replace_frame(std::vector<uint8_t> frame, StageId by);
  bool dirty() const { return dirty_; }
  /// True when any stage changed the frame (replaced or dirty).
  /// One bit per StageId that changed the frame.
  uint32_t changed_by() const { return changed_by_; }
  static constexpr uint32_t bit(StageId id) { return 1u << static_cast<uint32_t>(id); }

  /// Closes the connection instead of delivering the response.
  void close(CloseReason reason) { close_ = std::move(reason); }
  bool closing() const { return close_.has_value(); }
  std::optional<CloseReason>& close_reason() { return close_; }

  /// The frame to send: the current bytes, or the re-encoded body with a patched size prefix.
  std::vector<uint8_t> encode() const;

 private:
  int16_t api_key_, api_version_;
  mutable int16_t body_version_ = -1;
  int header_version_;
  codec::Bytes frame_;
  std::vector<uint8_t> replaced_;
  ConnectionInfo& connection_;
  ExchangeActions* actions_;
  ExchangeActions own_actions_;
  bool synthetic_;
  std::chrono::nanoseconds latency_;
  bool withheld_ = false;
  bool dirty_ = false;
  uint32_t changed_by_ = 0;
  std::optional<CloseReason> close_;
  mutable bool scanned_ = false;
  mutable std::optional<codec::ResponseScan> own_scan_;
  mutable std::shared_ptr<codec::Message> message_;
  mutable bool decoded_ = false;
  mutable std::string decode_error_;
  mutable DecodeFailure decode_failure_ = DecodeFailure::kNone;
};

}  // namespace kproxy::proxy
