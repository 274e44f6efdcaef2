// ProxyTable: the proxies of Toxiproxy's HTTP API and their toxics, with Toxiproxy v2's rules
// for creating, replacing, updating and resetting them (docs/toxiproxy.md "Endpoints").
//
//   toxiproxy_routes ──► ProxyTable ──► ProxyHost (what listens and forwards; one per daemon)
//      (HTTP)           (names, fields,   open(name, listen, upstream) → bound address | error
//                        toxics, limits)  close(name), toxics(name, list)
//
// Every operation answers with a status and a JSON body in Toxiproxy's shapes, so the routes
// only translate; the table takes one lock per call, and calls its host under that lock (the
// host must not call back into the table). The table never listens itself: a host that fails to
// open a proxy's address fails the request (nothing changed).
//
// Kafka or not (an extension): when a proxy is created or its upstream changes, the host's
// probe_kafka sends the upstream an ApiVersions request; `"kafka": true|false` in the body
// overrides it. GET shows the verdict and its reason as the extension fields `kafka` and
// `kafka_reason`, and `relay` ("kafka": opened by open_kafka, "tcp": by open). An upstream that
// could not be connected to is probed again at the proxy's first connection (issue #34): the
// proxy opens as plain TCP and holds that connection (on_first_connection); a thread of the
// table probes, and a Kafka answer reopens the proxy by open_kafka at the same address (the held
// connection is closed: the client connects again), anything else releases it.
//
// Toxiproxy's facts kept here (its README "HTTP API"): a new proxy is enabled unless the body
// says `"enabled": false`; `listen` is rewritten to the address actually bound (port 0: the
// kernel's pick); a disabled proxy keeps its fields but listens nowhere; POST /populate replaces
// a proxy of the same name only when its listen or upstream differs (an identical one is kept,
// toxics and all), and checks every entry before changing anything; POST /reset enables every
// proxy and removes every toxic.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "proxy/toxiproxy/toxic_spec.h"

namespace kproxy::toxiproxy {

/// A Kafka-aware proxy's extension fields (docs/toxiproxy.md "Kafka-aware proxies").
struct KafkaOptions {
  std::string advertise;     ///< the host (or host:port per node, "1=h:p,2=h:p") clients are given for brokers
  std::string broker_ports;  ///< "" (a single broker at the proxy's port), "0" (the kernel picks), a base, or "first-last"
};

/// The data plane behind the table. Each function may be empty (then: always succeeds, `listen`
/// kept as given).
struct ProxyHost {
  /// Starts listening on `listen` and forwarding to `upstream` for proxy `name`; sets `bound` to
  /// the address it listens on. False with `error` set when it cannot (400: a bad address, 409:
  /// the address is taken).
  std::function<bool(const std::string& name, const std::string& listen, const std::string& upstream, std::string& bound, ApiError& error)>
      open;
  /// Opens a Kafka-aware proxy (the upstream answered ApiVersions, or `"kafka": true`): a kproxy
  /// listener added at run time (proxy/runtime/proxy.h add_listener). `options` holds the
  /// extension fields `advertise` and `broker_ports` ("" when not given). Empty: such proxies
  /// are opened with `open` too (plain TCP).
  std::function<bool(const std::string& name, const KafkaOptions& options, const std::string& listen, const std::string& upstream,
                     std::string& bound, ApiError& error)>
      open_kafka;
  /// Stops listening and closes the proxy's connections.
  std::function<void(const std::string& name)> close;
  /// The proxy's toxics changed (applies to new data; toxicity is decided per new connection).
  std::function<void(const std::string& name, const std::vector<ToxicSpec>& toxics)> toxics;
  /// Holds the new connections of proxy `name` (open on `open`): they are accepted but not
  /// passed on until release(name); `callback` is called once, at the first (from the data
  /// plane's thread: it must not call back into the table). Empty: no probe at first connection.
  std::function<void(const std::string& name, std::function<void()> callback)> on_first_connection;
  /// The connections held for proxy `name` go on to its upstream; later ones are not held.
  std::function<void(const std::string& name)> release;
  /// Asks `upstream` whether it speaks Kafka (an ApiVersions request, proxy/admin/health.h
  /// probe_kafka): "" when a Kafka answer came back, else what happened instead.
  std::function<std::string(const std::string& upstream)> probe_kafka;
};

/// What an operation answers: an HTTP status and its JSON body (null: no body, 204).
struct ApiAnswer {
  int status = 200;
  nlohmann::ordered_json body;
};

/// Toxiproxy's error answer: {"error": message, "status": status}.
ApiAnswer error_answer(const ApiError& error);

class ProxyTable {
 public:
  /// `max_proxies`: proxies that may exist at once (toxiproxy.max_proxies).
  explicit ProxyTable(ProxyHost host, uint32_t max_proxies = 64);
  ~ProxyTable();  ///< closes every proxy
  ProxyTable(const ProxyTable&) = delete;
  ProxyTable& operator=(const ProxyTable&) = delete;

  ApiAnswer list() const;                                                ///< GET /proxies: {name: proxy, ...}
  ApiAnswer create(std::string_view body);                               ///< POST /proxies: 201
  ApiAnswer populate(std::string_view body);                             ///< POST /populate: 201 {"proxies": [...]}
  ApiAnswer show(const std::string& name) const;                         ///< GET /proxies/{proxy}
  ApiAnswer update(const std::string& name, std::string_view body);      ///< PATCH (or POST) /proxies/{proxy}
  ApiAnswer remove(const std::string& name);                             ///< DELETE /proxies/{proxy}: 204
  ApiAnswer list_toxics(const std::string& proxy) const;                 ///< GET /proxies/{proxy}/toxics: [...]
  ApiAnswer add_toxic(const std::string& proxy, std::string_view body);  ///< POST /proxies/{proxy}/toxics: 200
  ApiAnswer show_toxic(const std::string& proxy, const std::string& toxic) const;
  ApiAnswer update_toxic(const std::string& proxy, const std::string& toxic, std::string_view body);
  ApiAnswer remove_toxic(const std::string& proxy, const std::string& toxic);  ///< 204
  ApiAnswer reset();                                                           ///< POST /reset: 204

  /// Proxies now (tests, metrics).
  size_t size() const;

 private:
  struct Entry {
    std::string name;
    std::string listen;  ///< as bound while enabled, else as last given or bound
    std::string upstream;
    bool enabled = true;
    std::vector<ToxicSpec> toxics;  ///< upstream ones first, then downstream, each in order of addition
    bool kafka = false;             ///< the upstream answered ApiVersions, or the body said `"kafka": true`
    std::string kafka_reason;       ///< why `kafka` is what it is (GET shows it)
    KafkaOptions kafka_options;     ///< the extension fields `advertise`, `broker_ports`
    std::string relay = "tcp";      ///< "kafka" while opened by open_kafka, else "tcp"
    bool probe_pending = false;     ///< the upstream could not be reached: probed again at the first connection
  };
  static Entry entry(std::string name, std::string listen, std::string upstream, bool enabled);
  /// `kafka` and `kafka_reason` of `e` from `forced` (the body's `kafka` field) or the probe.
  void classify(Entry& e, std::optional<bool> forced) const;
  struct Input;  // one proxy as a request body gives it (proxy_table.cc)

  static nlohmann::ordered_json to_json(const Entry& e);
  Entry* find(const std::string& name);
  const Entry* find(const std::string& name) const;
  /// Opens `e` on the host when enabled. False with `error` set when the host refuses.
  bool start(Entry& e, ApiError& error);
  void stop(Entry& e);
  void publish_toxics(const Entry& e);

  /// Has the host hold proxy `name`'s next connection and queue it for probe_again (the prober
  /// thread starts with the first).
  void arm_probe(const std::string& name);
  /// The probe at first connection: on the prober thread, for proxy `name`.
  void probe_again(const std::string& name);
  void prober_loop();

  ProxyHost host_;
  uint32_t max_proxies_;
  mutable std::mutex mutex_;
  std::map<std::string, Entry> proxies_;

  std::mutex probe_mutex_;
  std::condition_variable probe_wake_;
  std::deque<std::string> to_probe_;  ///< under probe_mutex_: proxies whose first connection came
  bool probe_stop_ = false;           ///< under probe_mutex_
  std::thread prober_;                ///< started with the first proxy that waits for a connection
};

}  // namespace kproxy::toxiproxy
