#include "proxy/chaos/fault_rule.h"

#include <cmath>
#include <set>

#include "codec/generated/api_keys.h"
#include "codec/generated/error_code.h"
#include "proxy/chaos/answer_builder.h"
#include "proxy/chaos/error_translation.h"

namespace kproxy::chaos {

// ---- names ----

const char* action_name(ActionKind k) {
  switch (k) {
    case ActionKind::kError: return "error";
    case ActionKind::kAnswer: return "answer";
    case ActionKind::kDelay: return "delay";
    case ActionKind::kDropResponse: return "drop_response";
    case ActionKind::kClose: return "close";
    case ActionKind::kThrottle: return "throttle";
    case ActionKind::kResetAfterBytes: return "reset_after_bytes";
    case ActionKind::kBandwidth: return "bandwidth";
    case ActionKind::kSlice: return "slice";
    case ActionKind::kDuplicateRequest: return "duplicate_request";
  }
  return "?";
}

/// A JSON integer as JSON Schema reads one (9 and 9.0 alike), if it fits an int64; a number past
/// INT64_MAX (nlohmann keeps it unsigned) is not one, rather than wrapping to a negative.
std::optional<int64_t> as_int64(const nlohmann::json& v) {
  if (v.is_number_unsigned()) {
    auto u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(INT64_MAX)) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && d >= -9.2e18 && d <= 9.2e18) return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

// Durations in rules (delay, jitter, throttle, windows) are at most a day: a longer one is a typo,
// and bounding it keeps float-to-integer conversion and the unit multiplications defined.
constexpr int64_t kMaxDurationMs = 24LL * 3600 * 1000;

std::optional<std::chrono::milliseconds> parse_duration(const nlohmann::json& v) {
  int64_t ms = -1;
  if (v.is_number_integer()) {
    auto i = as_int64(v);
    if (!i) return std::nullopt;
    ms = *i;
  } else if (v.is_number_float()) {
    double d = v.get<double>();
    if (!(d >= 0 && d <= static_cast<double>(kMaxDurationMs))) return std::nullopt;  // also NaN
    ms = static_cast<int64_t>(d);
  } else if (v.is_string()) {
    std::string s = v.get<std::string>();
    size_t i = 0;
    while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
    if (i == 0 || i > 12) return std::nullopt;
    int64_t n = std::stoll(s.substr(0, i));
    std::string unit = s.substr(i);
    if (unit == "ms" || unit.empty()) ms = n;
    else if (unit == "s") ms = n * 1000;
    else if (unit == "m") ms = n * 60000;
    else return std::nullopt;
  }
  if (ms < 0 || ms > kMaxDurationMs) return std::nullopt;
  return std::chrono::milliseconds(ms);
}

// ---- matching and triggers ----

bool FaultRule::matches_header(int16_t api_key, int16_t version, std::string_view listener,
                               std::optional<std::string_view> client_id) const {
  if (!match.apis.empty()) {
    bool any = false;
    for (int16_t a : match.apis) any = any || a == api_key;
    if (!any) return false;
  }
  if (!match.versions.contains(version)) return false;
  if (match.listener && !glob_match(*match.listener, listener)) return false;
  if (match.client_id && !glob_match(*match.client_id, client_id.value_or(""))) return false;
  return true;
}

namespace {
uint64_t splitmix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}
}  // namespace

bool FaultRule::decide(uint64_t n) const {
  if (n <= trigger.after) return false;
  uint64_t k = n - trigger.after;
  switch (trigger.kind) {
    case RuleTrigger::Kind::kAlways: break;
    case RuleTrigger::Kind::kOnce:
      if (k != 1) return false;
      break;
    case RuleTrigger::Kind::kNth:
      if (k != trigger.n) return false;
      break;
    case RuleTrigger::Kind::kTimes:
      if (k > trigger.n) return false;
      break;
  }
  if (trigger.probability) {
    // Deterministic per hit number: the same seed injects on the same hits in every run.
    double u = static_cast<double>(splitmix64(trigger.seed ^ splitmix64(n)) >> 11) * 0x1.0p-53;
    if (u >= *trigger.probability) return false;
  }
  return true;
}

bool FaultRule::fire(std::chrono::steady_clock::time_point now) const {
  auto since = std::chrono::duration_cast<std::chrono::milliseconds>(now - installed_at);
  if (since < trigger.window_after) return false;
  if (trigger.window_for && since >= trigger.window_after + *trigger.window_for) return false;
  uint64_t n = stats->hits.fetch_add(1, std::memory_order_relaxed) + 1;
  if (!decide(n)) return false;
  stats->injected.fetch_add(1, std::memory_order_relaxed);
  return true;
}

nlohmann::json FaultRule::to_json() const {
  nlohmann::json j = spec;
  j["hits"] = stats->hits.load(std::memory_order_relaxed);
  j["injected"] = stats->injected.load(std::memory_order_relaxed);
  if (!notes.empty()) j["notes"] = notes;
  return j;
}

// ---- parsing ----

namespace {

struct Parser {
  std::string& error;
  Refusal kind = Refusal::kNone;
  bool fail(const std::string& path, const std::string& why) {
    if (error.empty()) {
      error = path + ": " + why;
      kind = Refusal::kMalformed;
    }
    return false;
  }
  /// Well formed (the OpenAPI schema accepts it), but not applicable to the APIs it names.
  bool unprocessable(const std::string& path, const std::string& why) {
    bool was_empty = error.empty();
    fail(path, why);
    if (was_empty) kind = Refusal::kUnprocessable;
    return false;
  }

  bool only_keys(const nlohmann::json& obj, const std::string& path, std::initializer_list<const char*> keys) {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (const char* k : keys) known = known || it.key() == k;
      if (!known) {
        std::string list;
        for (const char* k : keys) list += std::string(list.empty() ? "" : ", ") + k;
        return fail(path + (path.empty() ? "" : ".") + it.key(), "unknown key (expected one of: " + list + ")");
      }
    }
    return true;
  }

  bool api(const nlohmann::json& v, const std::string& path, int16_t& out) {
    if (v.is_number()) {
      auto key = as_int64(v);
      if (!key) return fail(path, "expected an API name or key");
      int64_t k = *key;
      if (k < 0 || k > 0x7fff || !codec::api_name(static_cast<int16_t>(k))) return fail(path, "unknown API key " + std::to_string(k));
      out = static_cast<int16_t>(k);
      return true;
    }
    if (!v.is_string()) return fail(path, "expected an API name or key");
    auto k = codec::api_key_for_name(v.get<std::string>());
    if (!k) return fail(path, "unknown API '" + v.get<std::string>() + "' (use Kafka's name, e.g. EndTxn)");
    out = *k;
    return true;
  }

  bool glob(const nlohmann::json& m, const char* key, std::optional<std::string>& out) {
    if (!m.contains(key)) return true;
    const auto& v = m[key];
    std::string path = std::string("match.") + key;
    if (!v.is_string()) return fail(path, "expected a glob string");
    std::string g = v.get<std::string>();
    if (auto e = glob_error(g); !e.empty()) return fail(path, e);
    out = g;
    return true;
  }

  bool count(const nlohmann::json& v, const std::string& path, uint64_t& out, bool allow_zero) {
    auto n = as_int64(v);
    if (!n || *n < (allow_zero ? 0 : 1)) return fail(path, allow_zero ? "expected an integer >= 0" : "expected an integer >= 1");
    out = static_cast<uint64_t>(*n);
    return true;
  }

  bool error_code(const nlohmann::json& v, const std::string& path, int16_t& out) {
    if (v.is_number()) {
      auto code = as_int64(v);
      if (!code) return fail(path, "expected an error name (e.g. NOT_COORDINATOR) or code");
      int64_t c = *code;
      if (c < -1 || c > 0x7fff || !codec::error_name(static_cast<int16_t>(c))) return fail(path, "unknown error code " + std::to_string(c));
      out = static_cast<int16_t>(c);
      return true;
    }
    if (!v.is_string()) return fail(path, "expected an error name (e.g. NOT_COORDINATOR) or code");
    auto c = codec::error_code_for_name(v.get<std::string>());
    if (!c) return fail(path, "unknown error '" + v.get<std::string>() + "' (use Kafka's Errors name, e.g. CONCURRENT_TRANSACTIONS)");
    out = *c;
    return true;
  }

  bool match(const nlohmann::json& m, RuleMatch& out) {
    if (!m.is_object()) return fail("match", "expected an object");
    if (!only_keys(m, "match",
                   {"api", "versions", "listener", "client_id", "transactional_id", "topic", "partition", "producer_id", "group_id"}))
      return false;
    if (m.contains("api")) {
      const auto& a = m["api"];
      if (a.is_array()) {
        for (size_t i = 0; i < a.size(); ++i) {
          int16_t k;
          if (!api(a[i], "match.api[" + std::to_string(i) + "]", k)) return false;
          out.apis.push_back(k);
        }
      } else {
        int16_t k;
        if (!api(a, "match.api", k)) return false;
        out.apis.push_back(k);
      }
    }
    if (m.contains("versions")) {
      const auto& v = m["versions"];
      // A version is an integer 0-32767: anything else (a float, a string in {min, max}, digits
      // followed by junk, 70000) is refused rather than converted.
      auto number = [](const nlohmann::json& n, int16_t& to) {
        auto i = as_int64(n);
        if (!i || *i < 0 || *i > 0x7fff) return false;
        to = static_cast<int16_t>(*i);
        return true;
      };
      auto digits = [](std::string_view text, int16_t& to) {
        if (text.empty() || text.size() > 5) return false;
        int32_t n = 0;
        for (char c : text) {
          if (c < '0' || c > '9') return false;
          n = n * 10 + (c - '0');
        }
        if (n > 0x7fff) return false;
        to = static_cast<int16_t>(n);
        return true;
      };
      if (v.is_number()) {
        if (!number(v, out.versions.min)) return fail("match.versions", "expected a version 0-32767");
        out.versions.max = out.versions.min;
      } else if (v.is_string()) {
        std::string s = v.get<std::string>();
        auto dash = s.find('-');
        bool ok;
        if (dash == std::string::npos) {
          ok = digits(s, out.versions.min);
          out.versions.max = out.versions.min;
        } else {
          std::string_view lo = std::string_view(s).substr(0, dash), hi = std::string_view(s).substr(dash + 1);
          ok = (lo.empty() || digits(lo, out.versions.min)) && (hi.empty() || digits(hi, out.versions.max));
        }
        if (!ok) return fail("match.versions", "expected 'N', 'A-B', 'A-' or '-B' (versions 0-32767), got '" + s + "'");
      } else if (v.is_object()) {
        if (!only_keys(v, "match.versions", {"min", "max"})) return false;
        if (v.contains("min") && !number(v["min"], out.versions.min)) return fail("match.versions.min", "expected a version 0-32767");
        if (v.contains("max") && !number(v["max"], out.versions.max)) return fail("match.versions.max", "expected a version 0-32767");
      } else {
        return fail("match.versions", "expected 'A-B' or {min, max}");
      }
      if (out.versions.min < 0 || out.versions.min > out.versions.max)
        return unprocessable("match.versions", "empty or negative version range");
      for (int16_t k : out.apis) {
        auto r = codec::request_versions(k);
        if (out.versions.max < r.min || out.versions.min > r.max)
          return unprocessable("match.versions", std::string(codec::api_name(k)) + " has versions " + std::to_string(r.min) + "-" +
                                                     std::to_string(r.max) + ", none in " + std::to_string(out.versions.min) + "-" +
                                                     std::to_string(out.versions.max));
      }
    }
    if (!glob(m, "listener", out.listener) || !glob(m, "client_id", out.client_id) || !glob(m, "transactional_id", out.transactional_id) ||
        !glob(m, "topic", out.topic) || !glob(m, "group_id", out.group_id))
      return false;
    if (m.contains("partition")) {
      const auto& p = m["partition"];
      auto one = [&](const nlohmann::json& v) {
        auto i = as_int64(v);
        if (!i || *i < 0 || *i > INT32_MAX) return fail("match.partition", "expected a partition index >= 0");
        out.partitions.push_back(static_cast<int32_t>(*i));
        return true;
      };
      if (p.is_array()) {
        for (const auto& e : p)
          if (!one(e)) return false;
      } else if (!one(p)) {
        return false;
      }
    }
    if (m.contains("producer_id")) {
      auto id = as_int64(m["producer_id"]);
      if (!id) return fail("match.producer_id", "expected an integer from -2^63 to 2^63-1");
      out.producer_id = *id;
    }
    return true;
  }

  bool action(const nlohmann::json& a, const RuleMatch& m, RuleAction& out, std::vector<std::string>& notes) {
    if (!a.is_object()) return fail("action", "expected an object");
    static const char* kinds[] = {
        "error", "answer", "delay", "drop_response", "close", "throttle", "reset_after_bytes", "bandwidth", "slice", "duplicate_request"};
    int found = 0;
    for (const char* k : kinds) found += a.contains(k) ? 1 : 0;
    if (found != 1)
      return fail("action",
                  "expected exactly one of error, answer, delay, drop_response, close, throttle, reset_after_bytes, bandwidth, slice, "
                  "duplicate_request");
    if (a.contains("error") || a.contains("answer")) {
      bool is_error = a.contains("error");
      const char* key = is_error ? "error" : "answer";
      if (!only_keys(a, "action", {key, "scope"})) return false;
      out.kind = is_error ? ActionKind::kError : ActionKind::kAnswer;
      if (!error_code(a[key], std::string("action.") + key, out.error_code)) return false;
      if (a.contains("scope")) {
        std::string s = a["scope"].is_string() ? a["scope"].get<std::string>() : "";
        if (s == "all") out.scope = ErrorScopeKind::kAll;
        else if (s == "top") out.scope = ErrorScopeKind::kTop;
        else if (s == "matched") out.scope = ErrorScopeKind::kMatched;
        else return fail("action.scope", "expected all, top or matched");
      } else if (m.topic || !m.partitions.empty()) {
        out.scope = ErrorScopeKind::kMatched;
      }
      if (m.apis.empty()) return fail("match.api", std::string("an '") + key + "' action needs the API(s) it applies to");
      for (int16_t k : m.apis) {
        if (auto why = refuse_error(k, out.error_code); !why.empty()) return fail(std::string("action.") + key, why);
        auto r = codec::request_versions(k);
        int16_t lo = std::max(r.min, m.versions.min), hi = std::min(r.max, m.versions.max);
        for (int16_t v = lo; v <= hi; ++v) {
          int16_t sent = translate_error(k, v, out.error_code);
          if (sent != out.error_code) {
            int16_t first = v;
            while (v + 1 <= hi && translate_error(k, static_cast<int16_t>(v + 1), out.error_code) == sent) ++v;
            notes.push_back(std::string(codec::error_name(out.error_code)) + " is sent as " + codec::error_name(sent) + " to " +
                            codec::api_name(k) + " v" + std::to_string(first) + "-" + std::to_string(v) + " (as the broker does)");
          }
        }
        if (!is_error) {
          for (int16_t v = lo; v <= hi; ++v) {
            if (auto why = answer_refusal(k, v); !why.empty()) return unprocessable("action.answer", why);
          }
        }
      }
      return true;
    }
    if (a.contains("delay")) {
      if (!only_keys(a, "action", {"delay", "jitter", "side"})) return false;
      out.kind = ActionKind::kDelay;
      auto d = parse_duration(a["delay"]);
      if (!d) return fail("action.delay", "expected a duration (250, \"250ms\", \"2s\")");
      out.delay = *d;
      if (a.contains("jitter")) {
        auto j = parse_duration(a["jitter"]);
        if (!j) return fail("action.jitter", "expected a duration");
        out.jitter = *j;
      }
      if (a.contains("side")) {
        std::string s = a["side"].is_string() ? a["side"].get<std::string>() : "";
        if (s != "request" && s != "response") return fail("action.side", "expected request or response");
        out.on_request = s == "request";
      }
      return true;
    }
    if (a.contains("duplicate_request")) {
      // What a client's retry after a lost answer looks like to the broker: the same request
      // again, same correlation id, producer id, epoch and sequence (KIP-98: an idempotent
      // producer's duplicate batch is acknowledged, not appended again).
      if (!only_keys(a, "action", {"duplicate_request"})) return false;
      if (a["duplicate_request"] != true) return fail("action.duplicate_request", "expected true");
      out.kind = ActionKind::kDuplicateRequest;
      return true;
    }
    if (a.contains("drop_response")) {
      if (!only_keys(a, "action", {"drop_response"})) return false;
      if (a["drop_response"] != true) return fail("action.drop_response", "expected true");
      out.kind = ActionKind::kDropResponse;
      return true;
    }
    if (a.contains("close")) {
      if (!only_keys(a, "action", {"close"})) return false;
      std::string s = a["close"].is_string() ? a["close"].get<std::string>() : "";
      if (s != "before" && s != "after")
        return fail("action.close", "expected before (the broker never sees the request) or after (forwarded, answer lost)");
      out.kind = ActionKind::kClose;
      out.on_request = s == "before";
      return true;
    }
    if (a.contains("throttle")) {
      if (!only_keys(a, "action", {"throttle"})) return false;
      auto d = parse_duration(a["throttle"]);
      if (!d || d->count() > INT32_MAX) return fail("action.throttle", "expected a duration");
      out.kind = ActionKind::kThrottle;
      out.throttle = *d;
      return true;
    }
    if (a.contains("bandwidth") || a.contains("slice")) {
      bool bandwidth = a.contains("bandwidth");
      if (bandwidth ? !only_keys(a, "action", {"bandwidth", "direction"}) : !only_keys(a, "action", {"slice", "slice_delay", "direction"}))
        return false;
      out.kind = bandwidth ? ActionKind::kBandwidth : ActionKind::kSlice;
      const char* key = bandwidth ? "bandwidth" : "slice";
      if (!count(a[key], std::string("action.") + key, out.bytes, false)) return false;
      if (a.contains("slice_delay")) {
        auto d = parse_duration(a["slice_delay"]);
        if (!d) return fail("action.slice_delay", "expected a duration (5, \"5ms\", \"1s\")");
        out.slice_delay = *d;
      }
      if (a.contains("direction")) {
        std::string s = a["direction"].is_string() ? a["direction"].get<std::string>() : "";
        if (s != "to_client" && s != "to_broker" && s != "both")
          return fail("action.direction", "expected to_client (responses), to_broker (requests) or both");
        out.to_client = s != "to_broker";
        out.to_broker = s != "to_client";
      }
      return true;
    }
    if (!only_keys(a, "action", {"reset_after_bytes"})) return false;
    out.kind = ActionKind::kResetAfterBytes;
    return count(a["reset_after_bytes"], "action.reset_after_bytes", out.bytes, true);
  }

  bool trigger(const nlohmann::json& t, RuleTrigger& out) {
    if (t.is_string()) {  // shorthand: "once" | "always"
      std::string s = t.get<std::string>();
      if (s == "once") out.kind = RuleTrigger::Kind::kOnce;
      else if (s == "always") out.kind = RuleTrigger::Kind::kAlways;
      else return fail("trigger", "expected once, always or an object");
      return true;
    }
    if (!t.is_object()) return fail("trigger", "expected an object");
    if (!only_keys(t, "trigger", {"once", "always", "nth", "times", "after", "probability", "seed"})) return false;
    int kinds = (t.contains("once") ? 1 : 0) + (t.contains("always") ? 1 : 0) + (t.contains("nth") ? 1 : 0) + (t.contains("times") ? 1 : 0);
    if (kinds > 1) return fail("trigger", "once, always, nth and times exclude each other");
    if (t.contains("once")) {
      if (t["once"] != true) return fail("trigger.once", "expected true");
      out.kind = RuleTrigger::Kind::kOnce;
    }
    if (t.contains("always") && t["always"] != true) return fail("trigger.always", "expected true");
    if (t.contains("nth")) {
      out.kind = RuleTrigger::Kind::kNth;
      if (!count(t["nth"], "trigger.nth", out.n, false)) return false;
    }
    if (t.contains("times")) {
      out.kind = RuleTrigger::Kind::kTimes;
      if (!count(t["times"], "trigger.times", out.n, false)) return false;
    }
    if (t.contains("after") && !count(t["after"], "trigger.after", out.after, true)) return false;
    if (t.contains("probability")) {
      const auto& p = t["probability"];
      if (!p.is_number() || p.get<double>() < 0 || p.get<double>() > 1) return fail("trigger.probability", "expected a number in [0, 1]");
      out.probability = p.get<double>();
      if (!t.contains("seed")) return fail("trigger.seed", "a probability needs a seed (runs must be reproducible)");
    }
    if (t.contains("seed") && !count(t["seed"], "trigger.seed", out.seed, true)) return false;
    return true;
  }

  bool window(const nlohmann::json& w, RuleTrigger& out) {
    if (!w.is_object()) return fail("window", "expected {after, for}");
    if (!only_keys(w, "window", {"after", "for"})) return false;
    if (w.contains("after")) {
      auto d = parse_duration(w["after"]);
      if (!d) return fail("window.after", "expected a duration");
      out.window_after = *d;
    }
    if (w.contains("for")) {
      auto d = parse_duration(w["for"]);
      if (!d) return fail("window.for", "expected a duration");
      out.window_for = *d;
    }
    return true;
  }
};

bool valid_name(std::string_view n) {
  // "." and ".." would be dot segments in /faults/{name}: no HTTP client could address them.
  if (n.empty() || n.size() > 128 || n == "." || n == "..") return false;
  for (char c : n) {
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' || c == '.')) return false;
  }
  return true;
}

}  // namespace

std::shared_ptr<FaultRule> parse_fault_rule(const nlohmann::json& spec_in, std::string& error, std::string_view name, Refusal* refusal) {
  error.clear();
  Parser p{error};
  struct ReportKind {  // every return below reports what kind of refusal it was, if any
    const Parser& parser;
    Refusal* to;
    ~ReportKind() {
      if (to) *to = parser.kind;
    }
  } report{p, refusal};
  if (!spec_in.is_object()) {
    p.fail("rule", "expected an object with match, action, trigger");
    return nullptr;
  }
  if (!p.only_keys(spec_in, "", {"name", "match", "action", "trigger", "window"})) return nullptr;
  auto rule = std::make_shared<FaultRule>();
  rule->spec = spec_in;
  if (!name.empty()) {
    rule->name = std::string(name);
    rule->spec["name"] = rule->name;
  } else if (spec_in.contains("name") && spec_in["name"].is_string()) {
    rule->name = spec_in["name"].get<std::string>();
  } else {
    p.fail("name", "every rule needs a name");
    return nullptr;
  }
  if (!valid_name(rule->name)) {
    p.fail("name", "'" + rule->name + "' is not a valid rule name (1-128 of A-Z a-z 0-9 - _ ., not . or ..)");
    return nullptr;
  }
  if (!spec_in.contains("action")) {
    p.fail("action",
           "missing (error, answer, delay, drop_response, close, throttle, reset_after_bytes, bandwidth, slice or duplicate_request)");
    return nullptr;
  }
  if (spec_in.contains("match") && !p.match(spec_in["match"], rule->match)) return nullptr;
  if (!p.action(spec_in["action"], rule->match, rule->action, rule->notes)) return nullptr;
  if (spec_in.contains("trigger") && !p.trigger(spec_in["trigger"], rule->trigger)) return nullptr;
  if (spec_in.contains("window") && !p.window(spec_in["window"], rule->trigger)) return nullptr;
  return rule;
}

}  // namespace kproxy::chaos
