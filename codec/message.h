// Message: the interface every generated Kafka request and response body implements.
//
// The proxy handles bodies through this interface (decode lazily, change a field, re-encode),
// without a switch over API keys. Concrete types (e.g. `MetadataResponse`) are generated from
// Kafka's message definitions into the build directory: see codec/gen/ and "codec/generated/messages.h".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include <nlohmann/json_fwd.hpp>

#include "codec/reader.h"
#include "codec/writer.h"

namespace kproxy::codec {

/// Where an error code sits in a response: the field's name and the keys that scope it.
struct ErrorScope {
  std::string_view field;                            // e.g. "ErrorCode", "PartitionErrorCode"
  std::optional<std::string_view> topic;             // enclosing topic name, if any
  std::optional<int32_t> partition;                  // enclosing partition index, if any
  std::optional<std::string_view> transactional_id;  // enclosing transactional id, if any
  std::optional<std::string_view> group_id;          // enclosing group id, if any
  int depth = 0;                                     // 0 = top level of the body
  std::optional<Uuid> topic_id;                      // enclosing topic id (KIP-516), if any
};

/// Called for each error-code field present at the decoded version; may change the code.
using ErrorCodeVisitor = std::function<void(int16_t& code, const ErrorScope& scope)>;

/// What an entity field of a request names (from the schema's entityType; kTopicId: a uuid field
/// "TopicId", how Produce v13+, Fetch v13+ and others name topics since KIP-516).
enum class EntityKind : uint8_t { kTopicName, kTransactionalId, kProducerId, kGroupId, kPartition, kTopicId };

/// Called for each entity-typed value a request carries (for fault-rule matching).
/// String entities arrive in `text`, numeric ones (producer id, partition) in `number`; a topic id
/// arrives as its 16 raw bytes in `text`.
using EntityVisitor = std::function<void(EntityKind kind, std::string_view text, int64_t number)>;

class Message {
 public:
  virtual ~Message() = default;

  virtual int16_t api_key() const = 0;
  virtual bool is_request() const = 0;
  /// Kafka's name, e.g. "MetadataResponse".
  virtual const char* name() const = 0;

  /// Decodes a body (no header) at `version`. Check `r.ok()` afterwards.
  virtual void read(Reader& r, int16_t version) = 0;
  /// Appends the body at `version`.
  virtual void write(Writer& w, int16_t version) const = 0;
  /// Exact number of bytes `write` appends at `version`.
  virtual size_t size(int16_t version) const = 0;
  /// Every field present at `version`, by Kafka's field name; `records` as a byte count.
  virtual void to_json(nlohmann::json& out, int16_t version) const = 0;

  /// Kafka's write-time checks, which `write` does not enforce: the name ("Struct.Field") of the
  /// first field that Java would refuse to write at `version` — a non-ignorable field absent at
  /// that version holding a non-default value (UnsupportedVersionException), or a null where the
  /// version does not allow one — or nullptr when the message can be written as Kafka would.
  virtual const char* unsupported_field(int16_t version) const = 0;

  /// Visits every error-code field present at `version` (responses; requests have none).
  virtual void for_each_error_code(int16_t version, const ErrorCodeVisitor& visit) = 0;
  /// Visits every entity-typed value present at `version`.
  virtual void for_each_entity(int16_t version, const EntityVisitor& visit) const = 0;
  /// The response's top-level ThrottleTimeMs when it has one at `version`, else nullptr (also
  /// for every request).
  virtual int32_t* throttle_time(int16_t /*version*/) { return nullptr; }
};

/// A fresh, default-valued body for `api_key`, or nullptr if the key is unknown.
std::unique_ptr<Message> make_request(int16_t api_key);
std::unique_ptr<Message> make_response(int16_t api_key);

}  // namespace kproxy::codec
