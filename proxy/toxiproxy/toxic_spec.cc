#include "proxy/toxiproxy/toxic_spec.h"

#include "proxy/chaos/fault_rule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kproxy::toxiproxy {

namespace {

/// The numeric attributes of Toxiproxy's toxic types, each 0 unless given (Toxiproxy's docs,
/// "Toxics"): latency and jitter in ms, rate in KB/s, delay in ms (slicer: µs), timeout in ms,
/// sizes and limits in bytes.
struct TypeAttributes {
  const char* type;
  std::vector<const char*> numbers;
};

const std::vector<TypeAttributes>& toxiproxy_types() {
  static const std::vector<TypeAttributes> types = {
      {"latency", {"latency", "jitter"}}, {"bandwidth", {"rate"}},     {"slow_close", {"delay"}},
      {"timeout", {"timeout"}},           {"reset_peer", {"timeout"}}, {"slicer", {"average_size", "size_variation", "delay"}},
      {"limit_data", {"bytes"}},
  };
  return types;
}

/// kproxy's Kafka toxics and the attributes each takes (docs/toxiproxy.md "Kafka toxics"): the
/// selectors of a fault rule (docs/faults.md "match") and what the rule does.
struct KafkaAttributes {
  const char* type;
  std::vector<const char*> keys;
};

const std::vector<KafkaAttributes>& kafka_types() {
  static const std::vector<KafkaAttributes> types = {
      {"kafka_error", {"api", "error", "trigger", "client_id", "transactional_id", "topic"}},
      {"kafka_delay", {"api", "delay", "jitter", "trigger", "client_id", "transactional_id", "topic"}},
      {"kafka_drop_response", {"api", "trigger", "client_id", "transactional_id", "topic"}},
      {"kafka_close", {"api", "trigger", "client_id", "transactional_id", "topic"}},
  };
  return types;
}

/// Applies the attributes object `given` onto `toxic` (whose attributes hold the current values).
bool apply_attributes(ToxicSpec& toxic, const nlohmann::json& given, ApiError& error) {
  if (given.is_null()) return true;
  if (!given.is_object()) {
    error = {400, "bad request body: attributes must be an object"};
    return false;
  }
  for (const auto& t : toxiproxy_types()) {
    if (toxic.type != t.type) continue;
    for (const char* key : t.numbers) {
      auto it = given.find(key);
      if (it == given.end() || it->is_null()) continue;
      // Toxiproxy reads these into 64-bit integers: a fraction, a string or a negative number is a bad body.
      if (!it->is_number_integer() && !it->is_number_unsigned()) {
        error = {400, std::string("bad request body: attributes.") + key + " must be an integer"};
        return false;
      }
      if (it->is_number_integer() && it->get<int64_t>() < 0) {
        error = {400, std::string("bad request body: attributes.") + key + " must not be negative"};
        return false;
      }
      if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        error = {400, std::string("bad request body: attributes.") + key + " is too large"};
        return false;
      }
      toxic.attributes[key] = it->get<int64_t>();
    }
    return true;
  }
  for (const auto& t : kafka_types()) {
    if (toxic.type != t.type) continue;
    for (auto it = given.begin(); it != given.end(); ++it) {
      if (std::find_if(t.keys.begin(), t.keys.end(), [&](const char* k) { return it.key() == k; }) == t.keys.end()) {
        std::string known;
        for (const char* k : t.keys) known += (known.empty() ? "" : ", ") + std::string(k);
        error = {400, "bad request body: attributes." + it.key() + ": not an attribute of " + toxic.type + " (" + known + ")"};
        return false;
      }
      toxic.attributes[it.key()] = *it;
    }
    return true;
  }
  error = {400, "invalid toxic type"};
  return false;
}

/// A Kafka toxic whose fault rule does not parse is a bad body (the parser's message says where).
bool check_kafka_rule(const ToxicSpec& toxic, ApiError& error) {
  if (!is_kafka_toxic(toxic.type)) return true;
  std::string why;
  if (!chaos::parse_fault_rule(kafka_toxic_rule(toxic, "toxic-check"), why)) {
    error = {400, "bad request body: attributes: " + why};
    return false;
  }
  return true;
}

bool read_toxicity(const nlohmann::json& body, double& toxicity, ApiError& error) {
  auto it = body.find("toxicity");
  if (it == body.end() || it->is_null()) return true;
  if (!it->is_number()) {
    error = {400, "bad request body: toxicity must be a number"};
    return false;
  }
  double t = it->get<double>();
  if (!std::isfinite(t) || t < 0.0 || t > 1.0) {
    error = {400, "bad request body: toxicity must be between 0 and 1"};
    return false;
  }
  toxicity = t;
  return true;
}

bool parse_object(std::string_view body, nlohmann::json& out, ApiError& error) {
  out = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (out.is_discarded()) {
    error = {400, "bad request body: not JSON"};
    return false;
  }
  if (!out.is_object()) {
    error = {400, "bad request body: a JSON object is expected"};
    return false;
  }
  return true;
}

}  // namespace

std::string name_refusal(std::string_view name) {
  if (name.empty()) return "is empty";
  if (name == "." || name == "..") return "cannot be . or ..";
  for (unsigned char c : name) {
    if (c == '/') return "has a /";
    if (c < 0x20 || c == 0x7f) return "has a control character";
  }
  return "";
}

std::string_view stream_name(Stream stream) { return stream == Stream::kUpstream ? "upstream" : "downstream"; }

nlohmann::ordered_json ToxicSpec::to_json() const {
  nlohmann::ordered_json out;
  out["attributes"] = attributes;
  out["name"] = name;
  out["type"] = type;
  out["stream"] = stream_name(stream);
  out["toxicity"] = toxicity;
  return out;
}

int64_t ToxicSpec::attribute(std::string_view key) const {
  auto it = attributes.find(std::string(key));
  if (it == attributes.end() || !it->is_number_integer()) return 0;
  return it->get<int64_t>();
}

const std::vector<std::string>& toxic_types() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> out;
    for (const auto& t : toxiproxy_types()) out.emplace_back(t.type);
    for (const auto& t : kafka_types()) out.emplace_back(t.type);
    return out;
  }();
  return names;
}

bool is_kafka_toxic(std::string_view type) {
  return std::any_of(kafka_types().begin(), kafka_types().end(), [&](const KafkaAttributes& t) { return type == t.type; });
}

nlohmann::json kafka_toxic_rule(const ToxicSpec& toxic, const std::string& rule_name) {
  if (!is_kafka_toxic(toxic.type)) return nullptr;
  const auto& a = toxic.attributes;
  nlohmann::json match = nlohmann::json::object();
  for (const char* key : {"api", "client_id", "transactional_id", "topic"}) {
    if (a.contains(key)) match[key] = nlohmann::json::parse(a[key].dump());
  }
  nlohmann::json action = nlohmann::json::object();
  if (toxic.type == "kafka_error") {
    action["error"] = a.contains("error") ? nlohmann::json::parse(a["error"].dump()) : nlohmann::json();
  } else if (toxic.type == "kafka_delay") {
    action["delay"] = a.contains("delay") ? nlohmann::json::parse(a["delay"].dump()) : nlohmann::json(0);
    if (a.contains("jitter")) action["jitter"] = nlohmann::json::parse(a["jitter"].dump());
    action["side"] = toxic.stream == Stream::kUpstream ? "request" : "response";
  } else if (toxic.type == "kafka_drop_response") {
    action["drop_response"] = true;
  } else {
    action["close"] = "before";
  }
  nlohmann::json trigger;
  if (a.contains("trigger")) {
    trigger = nlohmann::json::parse(a["trigger"].dump());
  } else if (toxic.toxicity < 1.0) {
    // kproxy's probabilities are seeded (docs/faults.md "Trigger"): the seed is the toxic's name,
    // hashed (FNV-1a), so a suite that names its toxics gets the same hits on every run.
    uint32_t seed = 2166136261u;
    for (unsigned char c : toxic.name) seed = (seed ^ c) * 16777619u;
    trigger = {{"probability", toxic.toxicity}, {"seed", seed & 0x7fffffff}};
  } else {
    trigger = {{"always", true}};
  }
  return {{"name", rule_name}, {"match", std::move(match)}, {"action", std::move(action)}, {"trigger", std::move(trigger)}};
}

nlohmann::json proxy_toxic_rule(const ToxicSpec& toxic, const std::string& rule_name, const std::string& listener_glob) {
  nlohmann::json rule;
  const bool up = toxic.stream == Stream::kUpstream;
  if (is_kafka_toxic(toxic.type)) {
    rule = kafka_toxic_rule(toxic, rule_name);
  } else {
    nlohmann::json action;
    if (toxic.type == "latency") {
      if (toxic.attribute("latency") <= 0 && toxic.attribute("jitter") <= 0) return nullptr;
      action = {{"delay", std::max<int64_t>(0, toxic.attribute("latency"))}, {"side", up ? "request" : "response"}};
      if (toxic.attribute("jitter") > 0) action["jitter"] = toxic.attribute("jitter");
    } else if (toxic.type == "bandwidth") {
      // Toxiproxy's rate is KB/s, 1000 bytes to the KB (its bandwidth toxic; the relay's pace too).
      if (toxic.attribute("rate") <= 0) return nullptr;
      action = {{"bandwidth", toxic.attribute("rate") * 1000}, {"direction", up ? "to_broker" : "to_client"}};
    } else if (toxic.type == "slicer") {
      if (toxic.attribute("average_size") <= 0) return nullptr;
      action = {{"slice", toxic.attribute("average_size")},
                {"slice_delay", toxic.attribute("delay") / 1000},
                {"direction", up ? "to_broker" : "to_client"}};
    } else if (toxic.type == "reset_peer") {
      action = {{"reset_after_bytes", 0}};
    } else if (toxic.type == "timeout") {
      action = {{"drop_response", true}};
    } else if (toxic.type == "limit_data") {
      action = {{"reset_after_bytes", std::max<int64_t>(0, toxic.attribute("bytes"))}};
    } else {
      return nullptr;  // slow_close: a Kafka connection's close is passed on at once
    }
    ToxicSpec shape = toxic;  // the trigger as a Kafka toxic's: toxicity → seeded probability
    shape.type = "kafka_close";
    shape.attributes = nlohmann::ordered_json::object();
    rule = kafka_toxic_rule(shape, rule_name);
    rule["action"] = std::move(action);
  }
  if (rule.is_null()) return rule;
  rule["match"]["listener"] = listener_glob;
  return rule;
}

std::optional<ToxicSpec> parse_toxic(std::string_view body, ApiError& error) {
  nlohmann::json in;
  if (!parse_object(body, in, error)) return std::nullopt;
  ToxicSpec toxic;
  for (const char* key : {"name", "type", "stream"}) {
    if (auto it = in.find(key); it != in.end() && !it->is_null() && !it->is_string()) {
      error = {400, std::string("bad request body: ") + key + " must be a string"};
      return std::nullopt;
    }
  }
  // Absent or null: "" (checked above to be a string otherwise; nlohmann's value() throws on null).
  auto text = [&in](const char* key) {
    auto it = in.find(key);
    return it == in.end() || it->is_null() ? std::string() : it->get<std::string>();
  };
  std::string stream = text("stream");
  if (stream.empty() || stream == "downstream") {
    toxic.stream = Stream::kDownstream;
  } else if (stream == "upstream") {
    toxic.stream = Stream::kUpstream;
  } else {
    error = {400, "stream was invalid, can be either upstream or downstream"};
    return std::nullopt;
  }
  toxic.type = text("type");
  toxic.name = text("name");
  if (toxic.name.empty()) toxic.name = toxic.type + "_" + std::string(stream_name(toxic.stream));
  if (auto why = name_refusal(toxic.name); !why.empty()) {
    error = {400, "bad request body: name " + why};
    return std::nullopt;
  }
  const auto& types = toxic_types();
  if (std::find(types.begin(), types.end(), toxic.type) == types.end()) {
    error = {400, "invalid toxic type"};
    return std::nullopt;
  }
  for (const auto& t : toxiproxy_types()) {
    if (toxic.type == t.type) {
      for (const char* key : t.numbers) toxic.attributes[key] = 0;
    }
  }
  if (!read_toxicity(in, toxic.toxicity, error)) return std::nullopt;
  if (!apply_attributes(toxic, in.contains("attributes") ? in["attributes"] : nlohmann::json(), error)) return std::nullopt;
  if (!check_kafka_rule(toxic, error)) return std::nullopt;
  return toxic;
}

bool update_toxic(ToxicSpec& toxic, std::string_view body, ApiError& error) {
  nlohmann::json in;
  if (!parse_object(body, in, error)) return false;
  ToxicSpec next = toxic;
  if (!read_toxicity(in, next.toxicity, error)) return false;
  if (!apply_attributes(next, in.contains("attributes") ? in["attributes"] : nlohmann::json(), error)) return false;
  if (!check_kafka_rule(next, error)) return false;
  toxic = std::move(next);
  return true;
}

}  // namespace kproxy::toxiproxy
