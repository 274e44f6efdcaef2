// Frame contexts: what a pipeline stage (proxy/stage/stage.h) sees of one request or response, and
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
#include "proxy/net/close_reason.h"
#include "proxy/stage/byte_shaper.h"
#include "proxy/stage/stage.h"

namespace kproxy::stage {

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

/// What becomes of an exchange's response.
enum class ResponseFate : uint8_t {
  kDeliver,       ///< to the client, in request order
  kSwallow,       ///< never sent; later responses still are (and keep their order)
  kCloseInstead,  ///< when it is next to leave, the connection closes instead (close_reason says why)
};

/// A stage's own memory of one exchange, from its request to its response (the fault stage's
/// error and throttle rules). The framework only keeps it with the request.
struct ExchangeNote {
  virtual ~ExchangeNote() = default;
};

/// The pipeline's generic results: what the stages decided about one request/response exchange
/// beyond its bytes (answering a request is RequestContext::answer, closing before forwarding
/// RequestContext::close, changing or replacing a response ResponseContext::mark_dirty /
/// replace_frame). Kept with the request until its response arrives: stages decide at request
/// time what happens to the response. docs/architecture.md lists them.
struct ExchangeActions {
  std::chrono::milliseconds request_delay{0};   ///< hold the request this long (and every later one: order holds)
  std::chrono::milliseconds response_delay{0};  ///< hold the response this long
  ResponseFate fate = ResponseFate::kDeliver;
  std::string close_reason;  ///< kCloseInstead: the close's reason, for the log line
  uint8_t copies = 1;        ///< the request goes to the broker this many times; answers after the first are discarded
  /// Shaping of this exchange's bytes by the direction's installed shaper (byte_shaper.h).
  std::shared_ptr<const ShapeSpec> to_client, to_broker;
  std::shared_ptr<const ExchangeNote> note;  ///< kept for the stage that set it
  /// Who changed or answered the exchange, for observers (a fault rule's name); "" for nobody.
  std::string injected_by;
  /// True when the response cannot take the fast path or a stage must see this exchange again.
  bool affect_response() const { return fate != ResponseFate::kDeliver || response_delay.count() > 0 || to_client || note; }
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
  void close(net::CloseReason reason) { close_ = std::move(reason); }
  bool closing() const { return close_.has_value(); }
  std::optional<net::CloseReason>& close_reason() { return close_; }

  ExchangeActions& actions() { return actions_; }
  const ExchangeActions& actions() const { return actions_; }

 private:
  const codec::RequestHeader& header_;
  codec::Bytes frame_;
  ConnectionInfo& connection_;
  bool expects_response_;
  bool answered_ = false;
  std::vector<uint8_t> answer_;
  std::optional<net::CloseReason> close_;
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
  /// True when the response will not reach the client: swallowed, or the connection closes in its
  /// place (its own fate or an earlier one's), or a shaper resets the connection before its last
  /// byte. Set by the pipeline before the stages see the response (a stage that knows more, the
  /// fault stage's reset, sets it too); observers read it to tell what the broker did from what
  /// the client saw.
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
  void close(net::CloseReason reason) { close_ = std::move(reason); }
  bool closing() const { return close_.has_value(); }
  std::optional<net::CloseReason>& close_reason() { return close_; }

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
  std::optional<net::CloseReason> close_;
  mutable bool scanned_ = false;
  mutable std::optional<codec::ResponseScan> own_scan_;
  mutable std::shared_ptr<codec::Message> message_;
  mutable bool decoded_ = false;
  mutable std::string decode_error_;
  mutable DecodeFailure decode_failure_ = DecodeFailure::kNone;
};

}  // namespace kproxy::stage
