#include "proxy/toxiproxy/proxy_table.h"

#include <optional>
#include <set>
#include <utility>

#include "config/host_port.h"

namespace kproxy::toxiproxy {

/// One proxy as a request body gives it; a field not given keeps `fallback`'s value.
struct ProxyTable::Input {
  std::string name;
  std::string listen;
  std::string upstream;
  bool enabled = true;
  std::optional<bool> kafka;   ///< the extension field `kafka`, when given
  KafkaOptions kafka_options;  ///< the extension fields `advertise`, `broker_ports`

  static std::optional<Input> read(const nlohmann::json& in, const Input& fallback, ApiError& error) {
    if (!in.is_object()) {
      error = {400, "bad request body: a JSON object is expected"};
      return std::nullopt;
    }
    Input out = fallback;
    for (auto [key, field] :
         {std::pair<const char*, std::string*>{"name", &out.name}, {"listen", &out.listen}, {"upstream", &out.upstream}}) {
      auto it = in.find(key);
      if (it == in.end() || it->is_null()) continue;
      if (!it->is_string()) {
        error = {400, std::string("bad request body: ") + key + " must be a string"};
        return std::nullopt;
      }
      *field = it->get<std::string>();
    }
    if (auto it = in.find("enabled"); it != in.end() && !it->is_null()) {
      if (!it->is_boolean()) {
        error = {400, "bad request body: enabled must be true or false"};
        return std::nullopt;
      }
      out.enabled = it->get<bool>();
    }
    for (auto [key, field] : {std::pair<const char*, std::string*>{"advertise", &out.kafka_options.advertise},
                              {"broker_ports", &out.kafka_options.broker_ports}}) {
      auto it = in.find(key);
      if (it == in.end() || it->is_null()) continue;
      if (it->is_number_unsigned()) {
        *field = std::to_string(it->get<uint64_t>());
      } else if (it->is_string()) {
        *field = it->get<std::string>();
      } else {
        error = {400, std::string("bad request body: ") + key + " must be a string"};
        return std::nullopt;
      }
    }
    if (!out.kafka_options.advertise.empty()) {
      std::string why;
      if (!config::parse_advertise(out.kafka_options.advertise, &why)) {
        error = {400, "advertise: " + why};
        return std::nullopt;
      }
    }
    if (auto it = in.find("kafka"); it != in.end() && !it->is_null()) {
      if (!it->is_boolean()) {
        error = {400, "bad request body: kafka must be true or false"};
        return std::nullopt;
      }
      out.kafka = it->get<bool>();
    }
    return out;
  }

  /// Toxiproxy's required fields; `where` names the entry of a /populate list ("" otherwise).
  bool complete(const std::string& where, ApiError& error) const {
    if (name.empty()) {
      error = {400, "missing required field: name" + where};
      return false;
    }
    if (auto why = name_refusal(name); !why.empty()) {
      error = {400, "bad request body: name " + why + where};
      return false;
    }
    if (upstream.empty()) {
      error = {400, "missing required field: upstream" + where};
      return false;
    }
    return addresses(where, error);
  }

  /// A disabled proxy's addresses are opened only later (by an update or POST /reset), where a
  /// malformed one could no longer be refused: their form is checked now, by the parser
  /// ToxicRelay's open uses (proxy/toxiproxy/toxic_relay.cc). An enabled proxy's are checked by
  /// opening it.
  bool addresses(const std::string& where, ApiError& error) const {
    if (enabled) return true;
    std::string why;
    if (!listen.empty() && !config::parse_host_port(listen, &why, /*allow_port_zero=*/true)) {
      error = {400, "listen: " + why + where};
      return false;
    }
    if (!config::parse_host_port(upstream, &why)) {
      error = {400, "upstream: " + why + where};
      return false;
    }
    return true;
  }
};

namespace {

/// Where a proxy listens when the body gives no `listen`: loopback, a port the kernel picks.
constexpr const char* kDefaultListen = "127.0.0.1:0";

std::optional<nlohmann::json> parse_body(std::string_view body, ApiError& error) {
  auto in = nlohmann::json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded()) {
    error = {400, "bad request body: not JSON"};
    return std::nullopt;
  }
  return in;
}

const ApiError kProxyNotFound{404, "proxy not found"};
const ApiError kToxicNotFound{404, "toxic not found"};

}  // namespace

ApiAnswer error_answer(const ApiError& error) {
  nlohmann::ordered_json body;
  body["error"] = error.message;
  body["status"] = error.status;
  return {error.status, std::move(body)};
}

ProxyTable::ProxyTable(ProxyHost host, uint32_t max_proxies) : host_(std::move(host)), max_proxies_(max_proxies) {}

ProxyTable::~ProxyTable() {
  {
    std::lock_guard lock(probe_mutex_);
    probe_stop_ = true;
  }
  probe_wake_.notify_all();
  if (prober_.joinable()) prober_.join();
  std::lock_guard lock(mutex_);
  for (auto& [name, e] : proxies_) stop(e);
}

nlohmann::ordered_json ProxyTable::to_json(const Entry& e) {
  nlohmann::ordered_json out;
  out["name"] = e.name;
  out["listen"] = e.listen;
  out["upstream"] = e.upstream;
  out["enabled"] = e.enabled;
  out["kafka"] = e.kafka;
  out["kafka_reason"] = e.kafka_reason;
  out["relay"] = e.relay;
  if (!e.kafka_options.advertise.empty()) out["advertise"] = e.kafka_options.advertise;
  if (!e.kafka_options.broker_ports.empty()) out["broker_ports"] = e.kafka_options.broker_ports;
  nlohmann::ordered_json toxics = nlohmann::ordered_json::array();
  for (const auto& t : e.toxics) toxics.push_back(t.to_json());
  out["toxics"] = std::move(toxics);
  return out;
}

ProxyTable::Entry* ProxyTable::find(const std::string& name) {
  auto it = proxies_.find(name);
  return it == proxies_.end() ? nullptr : &it->second;
}

const ProxyTable::Entry* ProxyTable::find(const std::string& name) const {
  auto it = proxies_.find(name);
  return it == proxies_.end() ? nullptr : &it->second;
}

ProxyTable::Entry ProxyTable::entry(std::string name, std::string listen, std::string upstream, bool enabled) {
  Entry e;
  e.name = std::move(name);
  e.listen = std::move(listen);
  e.upstream = std::move(upstream);
  e.enabled = enabled;
  return e;
}

void ProxyTable::classify(Entry& e, std::optional<bool> forced) const {
  e.probe_pending = false;
  if (forced) {
    e.kafka = *forced;
    e.kafka_reason = std::string("set by the request's kafka field (") + (*forced ? "true" : "false") + ")";
    return;
  }
  if (!host_.probe_kafka) {
    e.kafka = false;
    e.kafka_reason = "not probed";
    return;
  }
  std::string why = host_.probe_kafka(e.upstream);
  e.kafka = why.empty();
  if (e.kafka) {
    e.kafka_reason = "the upstream answered an ApiVersions request";
  } else if (why.rfind("connect", 0) == 0 && host_.on_first_connection) {
    // "connect: Connection refused", "connect timed out" (proxy/admin/health.cc probe_kafka): not up yet.
    e.probe_pending = true;
    e.kafka_reason = "the upstream was not up when probed (" + why + "): probed again at the first connection";
  } else {
    e.kafka_reason = "the upstream did not answer ApiVersions: " + why;
  }
}

void ProxyTable::arm_probe(const std::string& name) {
  if (!host_.on_first_connection) return;
  {
    std::lock_guard lock(probe_mutex_);
    if (probe_stop_) return;
    if (!prober_.joinable()) prober_ = std::thread([this] { prober_loop(); });
  }
  host_.on_first_connection(name, [this, name] {
    {
      std::lock_guard lock(probe_mutex_);
      to_probe_.push_back(name);
    }
    probe_wake_.notify_one();
  });
}

void ProxyTable::prober_loop() {
  for (;;) {
    std::string name;
    {
      std::unique_lock lock(probe_mutex_);
      probe_wake_.wait(lock, [this] { return probe_stop_ || !to_probe_.empty(); });
      if (probe_stop_) return;
      name = std::move(to_probe_.front());
      to_probe_.pop_front();
    }
    probe_again(name);
  }
}

void ProxyTable::probe_again(const std::string& name) {
  std::string upstream;
  {
    std::lock_guard lock(mutex_);
    Entry* e = find(name);
    if (!e || !e->probe_pending || !e->enabled) return;
    upstream = e->upstream;
  }
  std::string why = host_.probe_kafka(upstream);  // without the lock: it may wait for the upstream
  std::lock_guard lock(mutex_);
  Entry* e = find(name);
  if (!e || !e->probe_pending || !e->enabled || e->upstream != upstream) return;  // changed meanwhile: that change decided
  if (!why.empty()) {
    e->kafka_reason = "probe at first connection: the upstream did not answer ApiVersions: " + why;
    e->probe_pending = why.rfind("connect", 0) == 0;
    if (e->probe_pending) e->kafka_reason = "the upstream was not up at the first connection (" + why + "): probed again at the next";
    if (host_.release) host_.release(name);  // the held connections go on (and are closed if the upstream refuses)
    if (e->probe_pending) arm_probe(name);
    return;
  }
  e->probe_pending = false;
  e->kafka = true;
  e->kafka_reason = "probe at first connection: the upstream answered an ApiVersions request";
  if (!host_.open_kafka) {
    if (host_.release) host_.release(name);
    return;
  }
  // Reopened as a kproxy listener at the address the relay had (its held connections close).
  Entry before = *e;
  before.kafka = false;
  stop(before);
  ApiError error;
  if (!start(*e, error)) {
    e->kafka = false;
    e->kafka_reason += "; opening it as a kproxy listener failed (" + error.message + "): relayed as plain TCP";
    ApiError again;
    if (!start(*e, again)) e->enabled = false;
  }
}

bool ProxyTable::start(Entry& e, ApiError& error) {
  std::string bound;
  if (e.enabled && e.kafka && host_.open_kafka) {
    if (!host_.open_kafka(e.name, e.kafka_options, e.listen, e.upstream, bound, error)) return false;
    e.relay = "kafka";
  } else {
    if (!e.enabled || !host_.open) return true;
    if (!host_.open(e.name, e.listen, e.upstream, bound, error)) return false;
    e.relay = "tcp";
    if (e.probe_pending) arm_probe(e.name);
  }
  e.listen = bound;
  publish_toxics(e);
  return true;
}

void ProxyTable::stop(Entry& e) {
  if (e.enabled && host_.close) host_.close(e.name);
}

void ProxyTable::publish_toxics(const Entry& e) {
  if (e.enabled && host_.toxics) host_.toxics(e.name, e.toxics);
}

size_t ProxyTable::size() const {
  std::lock_guard lock(mutex_);
  return proxies_.size();
}

ApiAnswer ProxyTable::list() const {
  std::lock_guard lock(mutex_);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [name, e] : proxies_) out[name] = to_json(e);
  return {200, std::move(out)};
}

ApiAnswer ProxyTable::create(std::string_view body) {
  ApiError error;
  auto json = parse_body(body, error);
  if (!json) return error_answer(error);
  Input defaults;
  auto input = Input::read(*json, defaults, error);
  if (!input || !input->complete("", error)) return error_answer(error);
  Entry e = entry(input->name, input->listen.empty() ? kDefaultListen : input->listen, input->upstream, input->enabled);
  e.kafka_options = input->kafka_options;
  classify(e, input->kafka);  // before the lock: the probe may wait for the upstream
  std::lock_guard lock(mutex_);
  if (find(input->name)) return error_answer({409, "proxy already exists"});
  if (proxies_.size() >= max_proxies_) {
    return error_answer({409, "too many proxies: toxiproxy.max_proxies is " + std::to_string(max_proxies_)});
  }
  if (!start(e, error)) return error_answer(error);
  auto& stored = proxies_[e.name] = std::move(e);
  return {201, to_json(stored)};
}

ApiAnswer ProxyTable::populate(std::string_view body) {
  ApiError error;
  auto json = parse_body(body, error);
  if (!json) return error_answer(error);
  if (!json->is_array()) return error_answer({400, "bad request body: a JSON array of proxies is expected"});
  // Every entry is checked before anything changes (Toxiproxy does the same).
  std::vector<Input> inputs;
  std::vector<Entry> entries;  ///< what each input becomes, classified before the lock
  std::set<std::string> names;
  for (size_t i = 0; i < json->size(); ++i) {
    auto input = Input::read((*json)[i], Input{}, error);
    if (!input || !input->complete(" at proxy " + std::to_string(i + 1), error)) return error_answer(error);
    if (!names.insert(input->name).second) return error_answer({400, "duplicate proxy name \"" + input->name + "\""});
    if (input->listen.empty()) input->listen = kDefaultListen;
    inputs.push_back(std::move(*input));
  }
  for (const auto& in : inputs) {
    Entry e = entry(in.name, in.listen, in.upstream, in.enabled);
    e.kafka_options = in.kafka_options;
    classify(e, in.kafka);
    entries.push_back(std::move(e));
  }
  std::lock_guard lock(mutex_);
  size_t added = 0;
  for (const auto& in : inputs) added += find(in.name) ? 0 : 1;
  if (proxies_.size() + added > max_proxies_) {
    return error_answer({409, "too many proxies: toxiproxy.max_proxies is " + std::to_string(max_proxies_)});
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (auto& e : entries) {
    if (Entry* existing = find(e.name)) {
      if (existing->listen == e.listen && existing->upstream == e.upstream) {
        out.push_back(to_json(*existing));  // the same proxy: kept, toxics and all
        continue;
      }
      stop(*existing);
      proxies_.erase(e.name);
    }
    if (!start(e, error)) return error_answer(error);
    out.push_back(to_json(proxies_[e.name] = std::move(e)));
  }
  nlohmann::ordered_json answer;
  answer["proxies"] = std::move(out);
  return {201, std::move(answer)};
}

ApiAnswer ProxyTable::show(const std::string& name) const {
  std::lock_guard lock(mutex_);
  const Entry* e = find(name);
  return e ? ApiAnswer{200, to_json(*e)} : error_answer(kProxyNotFound);
}

ApiAnswer ProxyTable::update(const std::string& name, std::string_view body) {
  ApiError error;
  std::lock_guard lock(mutex_);
  Entry* e = find(name);
  if (!e) return error_answer(kProxyNotFound);
  auto json = parse_body(body, error);
  if (!json) return error_answer(error);
  Input current;
  current.name = e->name;
  current.listen = e->listen;
  current.upstream = e->upstream;
  current.enabled = e->enabled;
  current.kafka_options = e->kafka_options;
  auto input = Input::read(*json, current, error);
  if (!input || !input->addresses("", error)) return error_answer(error);
  if (input->listen.empty()) return error_answer({400, "listen: empty"});  // a disabled proxy would keep it
  // The name is the proxy's key: a body that names another is not a rename (Toxiproxy ignores it too).
  const bool was_kafka = e->kafka;
  const bool reshaped =
      input->kafka_options.advertise != e->kafka_options.advertise || input->kafka_options.broker_ports != e->kafka_options.broker_ports;
  if (input->upstream != e->upstream || input->kafka) {
    Entry probed = *e;
    probed.upstream = input->upstream;
    classify(probed, input->kafka);
    e->kafka = probed.kafka;
    e->kafka_reason = probed.kafka_reason;
    e->probe_pending = probed.probe_pending;
  }
  // A proxy that became (or stopped being) Kafka-aware opens again on the other data plane.
  const bool moved = input->listen != e->listen || input->upstream != e->upstream || e->kafka != was_kafka || reshaped;
  if (!moved && input->enabled == e->enabled) return {200, to_json(*e)};
  Entry before = *e;
  before.kafka = was_kafka;
  stop(before);
  e->kafka_options = input->kafka_options;
  e->listen = input->listen;
  e->upstream = input->upstream;
  e->enabled = input->enabled;
  if (!start(*e, error)) {
    *e = before;  // back to where it listened (or stays closed if even that fails now)
    ApiError again;
    if (!start(*e, again)) e->enabled = false;
    return error_answer(error);
  }
  return {200, to_json(*e)};
}

ApiAnswer ProxyTable::remove(const std::string& name) {
  std::lock_guard lock(mutex_);
  Entry* e = find(name);
  if (!e) return error_answer(kProxyNotFound);
  stop(*e);
  proxies_.erase(name);
  return {204, nullptr};
}

ApiAnswer ProxyTable::list_toxics(const std::string& proxy) const {
  std::lock_guard lock(mutex_);
  const Entry* e = find(proxy);
  if (!e) return error_answer(kProxyNotFound);
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& t : e->toxics) out.push_back(t.to_json());
  return {200, std::move(out)};
}

ApiAnswer ProxyTable::add_toxic(const std::string& proxy, std::string_view body) {
  std::lock_guard lock(mutex_);
  Entry* e = find(proxy);
  if (!e) return error_answer(kProxyNotFound);
  ApiError error;
  auto toxic = parse_toxic(body, error);
  if (!toxic) return error_answer(error);
  for (const auto& t : e->toxics) {
    if (t.name == toxic->name) return error_answer({409, "toxic already exists"});
  }
  // Upstream toxics first, then downstream ones, each in the order they were added.
  auto at = e->toxics.end();
  if (toxic->stream == Stream::kUpstream) {
    at = e->toxics.begin();
    while (at != e->toxics.end() && at->stream == Stream::kUpstream) ++at;
  }
  auto added = e->toxics.insert(at, std::move(*toxic));
  auto answer = ApiAnswer{200, added->to_json()};
  publish_toxics(*e);
  return answer;
}

ApiAnswer ProxyTable::show_toxic(const std::string& proxy, const std::string& toxic) const {
  std::lock_guard lock(mutex_);
  const Entry* e = find(proxy);
  if (!e) return error_answer(kProxyNotFound);
  for (const auto& t : e->toxics) {
    if (t.name == toxic) return {200, t.to_json()};
  }
  return error_answer(kToxicNotFound);
}

ApiAnswer ProxyTable::update_toxic(const std::string& proxy, const std::string& toxic, std::string_view body) {
  std::lock_guard lock(mutex_);
  Entry* e = find(proxy);
  if (!e) return error_answer(kProxyNotFound);
  for (auto& t : e->toxics) {
    if (t.name != toxic) continue;
    ApiError error;
    if (!toxiproxy::update_toxic(t, body, error)) return error_answer(error);
    auto answer = ApiAnswer{200, t.to_json()};
    publish_toxics(*e);
    return answer;
  }
  return error_answer(kToxicNotFound);
}

ApiAnswer ProxyTable::remove_toxic(const std::string& proxy, const std::string& toxic) {
  std::lock_guard lock(mutex_);
  Entry* e = find(proxy);
  if (!e) return error_answer(kProxyNotFound);
  for (auto it = e->toxics.begin(); it != e->toxics.end(); ++it) {
    if (it->name != toxic) continue;
    e->toxics.erase(it);
    publish_toxics(*e);
    return {204, nullptr};
  }
  return error_answer(kToxicNotFound);
}

ApiAnswer ProxyTable::reset() {
  std::lock_guard lock(mutex_);
  ApiError first;
  for (auto& [name, e] : proxies_) {
    e.toxics.clear();
    if (e.enabled) {
      publish_toxics(e);
      continue;
    }
    e.enabled = true;
    ApiError error;
    if (!start(e, error)) {
      e.enabled = false;
      if (first.message.empty()) first = error;
    }
  }
  if (!first.message.empty()) return error_answer(first);
  return {204, nullptr};
}

}  // namespace kproxy::toxiproxy
