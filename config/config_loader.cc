#include "config/config_loader.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <thread>
#include <tuple>
#include <type_traits>
#include <variant>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "config/admin_token.h"
#include "config/config_keys.h"

namespace kproxy::config {

std::string ConfigError::to_string() const {
  std::string out = file;
  if (line > 0) out += ":" + std::to_string(line) + ":" + std::to_string(column);
  return out + ": " + reason;
}

std::string LoadResult::error_text() const {
  std::string out;
  for (const auto& e : errors) out += e.to_string() + "\n";
  return out;
}

unsigned Config::worker_count() const {
  if (workers > 0) return workers;
  unsigned cores = std::thread::hardware_concurrency();
  return cores > 0 ? cores : 1;
}

namespace {

// The keys of a `listeners:` entry a listener added at run time does not take (certificates are
// read at start and reload only, proxy/runtime/startup_check.h); it takes every other one.
constexpr std::string_view kStartOnlyListenerKeys[] = {"tls", "upstream_tls", "sni"};

bool start_only_listener_key(std::string_view key) {
  return std::find(std::begin(kStartOnlyListenerKeys), std::end(kStartOnlyListenerKeys), key) != std::end(kStartOnlyListenerKeys);
}

std::optional<uint64_t> parse_unsigned(std::string_view text) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// Splits "123unit" into the number and the unit.
std::optional<std::pair<uint64_t, std::string_view>> number_and_unit(std::string_view text) {
  size_t digits = 0;
  while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
  auto n = parse_unsigned(text.substr(0, digits));
  if (!n) return std::nullopt;
  std::string_view unit = text.substr(digits);
  while (!unit.empty() && unit.front() == ' ') unit.remove_prefix(1);
  return std::make_pair(*n, unit);
}

// The offset of the first byte of `text` that is not part of well-formed UTF-8 (RFC 3629: no
// overlong forms, no surrogates, nothing past U+10FFFF), or npos.
size_t invalid_utf8_at(std::string_view text) {
  size_t i = 0;
  while (i < text.size()) {
    auto c = static_cast<unsigned char>(text[i]);
    size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xe ? 3 : (c >> 3) == 0x1e ? 4 : 0;
    if (len == 0 || i + len > text.size()) return i;
    uint32_t cp = len == 1 ? c : len == 2 ? (c & 0x1f) : len == 3 ? (c & 0x0f) : (c & 0x07);
    for (size_t k = 1; k < len; ++k) {
      auto cc = static_cast<unsigned char>(text[i + k]);
      if ((cc >> 6) != 0x2) return i;
      cp = (cp << 6) | (cc & 0x3f);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[len] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return i;
    i += len;
  }
  return std::string_view::npos;
}

// "http://host[:port][/path]" into `t` (host, port, path); false with `why` when it is not one.
bool parse_http_endpoint(std::string_view url, TracingConfig& t, std::string& why) {
  constexpr std::string_view kScheme = "http://";
  if (url.starts_with("https://")) {
    why = "https is not supported (kproxy's exporter speaks plain HTTP: send to a collector on this host or network)";
    return false;
  }
  if (!url.starts_with(kScheme)) {
    why = "not an http:// URL (e.g. http://127.0.0.1:4318/v1/traces)";
    return false;
  }
  std::string_view rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view() : rest.substr(slash);
  if (authority.find('@') != std::string_view::npos || path.find_first_of("?# ") != std::string_view::npos) {
    why = "user info, a query, a fragment or a space are not supported";
    return false;
  }
  std::string host_port(authority);
  // No port: HTTP's 80.
  bool has_port = !authority.empty() && (authority.back() != ']' && authority.find(':') != std::string_view::npos);
  if (!has_port) host_port += ":80";
  std::string error;
  auto hp = parse_host_port(host_port, &error);
  if (!hp || hp->host.empty()) {
    why = hp ? "no host" : error;
    return false;
  }
  t.endpoint = std::string(url);
  t.host = hp->host;
  t.port = hp->port;
  t.path = path.empty() || path == "/" ? std::string("/v1/traces") : std::string(path);
  return true;
}

// Walks one YAML document, collecting errors with positions.
class Loader {
 public:
  Loader(std::string source, const LoadOptions& options) : source_(std::move(source)), options_(options) {}

  LoadResult load(const YAML::Node& root) {
    auto config = std::make_shared<Config>();
    config->source = source_;
    if (root && !walk(root, 0, "")) {
      // Too big or too deep to read further: nothing else is looked at.
    } else if (!root || root.IsNull()) {
      error(root, "the config is empty: it needs at least one listener");
    } else if (!root.IsMap()) {
      error(root, "the top level must be a mapping (listeners:, admin:, limits:, ...)");
    } else {
      load_root(root, *config);
    }
    LoadResult result;
    if (errors_.empty()) result.config = std::move(config);
    result.errors = std::move(errors_);
    result.warnings = std::move(warnings_);
    return result;
  }

  void error(const YAML::Node& at, std::string reason) { error(at.IsDefined() ? at.Mark() : YAML::Mark::null_mark(), std::move(reason)); }
  void error(const YAML::Mark& m, std::string reason) {
    ConfigError e;
    e.file = source_;
    if (!m.is_null()) {
      e.line = m.line + 1;
      e.column = m.column + 1;
    }
    e.reason = std::move(reason);
    errors_.push_back(std::move(e));
  }
  void warn(const YAML::Mark& m, std::string reason) {
    error(m, std::move(reason));
    warnings_.push_back(std::move(errors_.back()));
    errors_.pop_back();
  }

 private:
  // The one walk over the whole document, aliases expanded (config_loader.h): counts nodes,
  // bounds the depth, and reports every key given twice in one mapping at its second occurrence.
  // False when the document is too big or too deep to be read further. `path` names where the
  // walk starts ("" for the top level).
  bool walk(const YAML::Node& node, int depth, const std::string& path) {
    walk_base_ = path;
    walk_path_.clear();
    walked_.clear();
    deepest_ = 0;
    return walk_node(node, depth);
  }

  // One step of the walk's path: a mapping key (pointing into the document, which outlives the
  // walk) or a sequence index.
  struct WalkStep {
    const std::string* key = nullptr;
    size_t index = 0;
  };

  // The dotted path of the node being walked, built only when an error names it: an alias-heavy
  // document walks up to kMaxConfigNodes nodes, and building every node's path string made the
  // walk cost more than the parse.
  std::string walk_path() const {
    std::string out = walk_base_;
    for (const WalkStep& step : walk_path_) {
      if (step.key) {
        if (!out.empty()) out += '.';
        out += *step.key;
      } else {
        out += "[" + std::to_string(step.index) + "]";
      }
    }
    return out;
  }

  // A collection walked before (an alias used again: yaml-cpp hands out the same node, at the
  // same position in the text) is not walked again: its nodes are counted again and its height
  // checked against the depth bound, and what it could report (a duplicate key, a stray byte) was
  // reported at its first walk. The walk then costs the size of the text, not of its expansion.
  struct WalkedSubtree {
    size_t nodes = 0;  ///< the collection and everything under it, aliases expanded
    int height = 0;    ///< levels below the collection
  };
  using WalkKey = std::tuple<int, int, int>;  // line, column, node type

  bool walk_node(const YAML::Node& node, int depth) {
    const bool collection = node.IsMap() || node.IsSequence();
    const YAML::Mark mark = node.Mark();
    const WalkKey key{mark.line, mark.column, static_cast<int>(node.Type())};
    if (collection && !mark.is_null()) {
      if (auto it = walked_.find(key); it != walked_.end()) {
        if (nodes_ + it->second.nodes > kMaxConfigNodes) {
          nodes_ = kMaxConfigNodes;
        } else if (depth + it->second.height > kMaxConfigDepth) {
          depth = kMaxConfigDepth;
        } else {
          nodes_ += it->second.nodes;
          deepest_ = std::max(deepest_, depth + it->second.height);
          return true;
        }
      }
    }
    const size_t nodes_before = nodes_;
    const int deepest_before = deepest_;
    deepest_ = depth;
    const bool ok = walk_one(node, depth);
    if (ok && collection && !mark.is_null()) walked_.emplace(key, WalkedSubtree{nodes_ - nodes_before, deepest_ - depth});
    deepest_ = std::max(deepest_before, deepest_);
    return ok;
  }

  bool walk_one(const YAML::Node& node, int depth) {
    if (++nodes_ > kMaxConfigNodes) {
      const std::string path = walk_path();
      error(node, "the config expands to more than " + std::to_string(kMaxConfigNodes) +
                      " YAML nodes (each use of an alias counts again; reached at " + (path.empty() ? "the top level" : path) +
                      "): refused");
      return false;
    }
    if (depth > kMaxConfigDepth) {
      const std::string path = walk_path();
      error(node,
            (path.empty() ? "the top level" : path) + ": nested more than " + std::to_string(kMaxConfigDepth) + " levels deep: refused");
      return false;
    }
    if (node.IsScalar()) {
      // YAML text is Unicode (YAML 1.2 §5.1) and so is everything kproxy builds from it (JSON
      // rules, log lines, metric labels): a stray byte is refused here, with its position,
      // rather than failing later where no position is known.
      if (size_t at = invalid_utf8_at(node.Scalar()); at != std::string_view::npos && reported_encoding_.insert(mark_of(node)).second) {
        char byte[8];
        std::snprintf(byte, sizeof byte, "0x%02X", static_cast<unsigned char>(node.Scalar()[at]));
        const std::string path = walk_path();
        error(node, (path.empty() ? "the top level" : path) + ": not valid UTF-8 (byte " + byte + " at offset " + std::to_string(at) +
                        " of the value)");
      }
    } else if (node.IsSequence()) {
      size_t i = 0;
      for (const auto& item : node) {
        walk_path_.push_back({nullptr, i++});
        const bool ok = walk_node(item, depth + 1);
        walk_path_.pop_back();
        if (!ok) return false;
      }
    } else if (node.IsMap()) {
      std::map<std::string_view, YAML::Mark> seen;
      static const std::string kNonScalarKey = "?";
      for (const auto& kv : node) {
        const std::string& key = kv.first.IsScalar() ? kv.first.Scalar() : kNonScalarKey;
        walk_path_.push_back({&key, 0});
        if (kv.first.IsScalar()) {
          if (invalid_utf8_at(key) != std::string_view::npos && reported_encoding_.insert(mark_of(kv.first)).second) {
            walk_path_.pop_back();
            const std::string path = walk_path();
            walk_path_.push_back({&key, 0});
            error(kv.first, (path.empty() ? std::string("a key") : path + ": a key") + " is not valid UTF-8");
          }
          auto [first, fresh] = seen.emplace(key, kv.first.Mark());
          // An aliased mapping is walked once per use: report each duplicate once.
          auto at = std::make_pair(kv.first.Mark().line, kv.first.Mark().column);
          if (!fresh && reported_duplicates_.insert(at).second) {
            error(kv.first, walk_path() + ": duplicate key (first given at line " + std::to_string(first->second.line + 1) + ", column " +
                                std::to_string(first->second.column + 1) + "; YAML would silently keep only one)");
          }
        } else if (!walk_node(kv.first, depth + 1)) {
          walk_path_.pop_back();
          return false;
        }
        const bool ok = walk_node(kv.second, depth + 1);
        walk_path_.pop_back();
        if (!ok) return false;
      }
    }
    return true;
  }

  // Checks that `node` is a map whose keys are all children of `spec` in config_keys() (e.g.
  // "listeners[].tls" for the mapping at `path` "listeners[2].tls"); returns false if not a map.
  bool check_map(const YAML::Node& node, const std::string& path, std::string_view spec) {
    if (!node.IsMap()) {
      error(node, path + ": expected a mapping");
      return false;
    }
    const std::vector<std::string_view> known = child_keys(spec);
    for (const auto& kv : node) {
      auto key = kv.first.as<std::string>("");
      if (key == "<<") {
        // YAML 1.1 merge keys are not part of YAML 1.2, and yaml-cpp reads "<<" as a plain key.
        error(kv.first, path + (path.empty() ? "" : ".") +
                            "<<: merge keys are not supported: write the keys out (anchors and aliases of whole values work)");
      } else if (std::find(known.begin(), known.end(), key) == known.end()) {
        std::string list;
        for (auto k : known) list += (list.empty() ? "" : ", ") + std::string(k);
        error(kv.first, path + (path.empty() ? "" : ".") + key + ": unknown key (known: " + list + ")");
      }
    }
    return true;
  }

  // A value of a config_keys() row, parsed and checked against the row's kind and bounds.
  struct KeyValue {
    bool flag = false;
    uint64_t number = 0;  ///< kCount, kByteSize; kChoice: the index of the choice
    std::chrono::milliseconds duration{0};
    std::string text;  ///< kString, kChoice
    HostPort address;  ///< kHostPort
  };

  // The value of row `k` at `node` (`path` names it in errors), or nullopt after an error.
  std::optional<KeyValue> key_value(const KeySpec& k, const YAML::Node& node, const std::string& path) {
    KeyValue out;
    switch (k.kind) {
      case KeyKind::kFlag: {
        auto b = boolean(node, path);
        if (!b) return std::nullopt;
        out.flag = *b;
        return out;
      }
      case KeyKind::kCount: {
        auto text = scalar(node, path);
        if (!text) return std::nullopt;
        auto v = parse_unsigned(*text);
        if (!v || *v < k.min || *v > k.max) {
          const std::string bad =
              k.bad.empty() ? "a number from " + std::to_string(k.min) + " to " + std::to_string(k.max) : std::string(k.bad);
          error(node, path + ": '" + *text + "' is not " + bad);
          return std::nullopt;
        }
        out.number = *v;
        return out;
      }
      case KeyKind::kByteSize: {
        auto b = byte_size(node, path);
        if (!b) return std::nullopt;
        if (*b < k.min || *b > k.max) {
          error(node, path + ": " + std::string(k.bad));
          return std::nullopt;
        }
        out.number = *b;
        return out;
      }
      case KeyKind::kDuration: {
        auto d = duration(node, path);
        if (!d) return std::nullopt;
        if (static_cast<uint64_t>(d->count()) < k.min || static_cast<uint64_t>(d->count()) > k.max) {
          error(node, path + ": " + std::string(k.bad));
          return std::nullopt;
        }
        out.duration = *d;
        return out;
      }
      case KeyKind::kString: {
        auto text = scalar(node, path);
        if (!text) return std::nullopt;
        if (text->empty() && k.min > 0) {
          error(node, path + ": must not be empty");
          return std::nullopt;
        }
        out.text = *text;
        return out;
      }
      case KeyKind::kHostPort: {
        auto hp = host_port(node, path, /*allow_port_zero=*/true);
        if (!hp) return std::nullopt;
        out.address = *hp;
        return out;
      }
      case KeyKind::kChoice: {
        auto text = scalar(node, path);
        if (!text) return std::nullopt;
        std::string_view rest = k.choices;
        for (size_t i = 0; !rest.empty(); ++i) {
          size_t comma = rest.find(", ");
          if (rest.substr(0, comma) == *text) {
            out.number = i;
            out.text = *text;
            return out;
          }
          rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 2);
        }
        error(node, path + ": '" + *text + "' is not " + (k.bad.empty() ? "one of " + std::string(k.choices) : std::string(k.bad)));
        return std::nullopt;
      }
      case KeyKind::kBespoke: break;
    }
    return std::nullopt;
  }

  // The value of the row `key` (a bespoke reader's key with a declared kind and bounds).
  std::optional<KeyValue> key_value(std::string_view key, const YAML::Node& node, const std::string& path) {
    const KeySpec* k = find_key(key);
    if (!k) throw std::logic_error("config_keys() has no row " + std::string(key));
    return key_value(*k, node, path);
  }

  // Reads every row below `section` that has a target from the mapping `n` into `c`, in table
  // order; a key not given keeps Config's default. Below a section (not at the top level), a
  // mapping with no row of its own (tracing.batch) is entered where its first row comes: its keys
  // are checked then (check_map), and its rows read if it is a mapping.
  void read_keys(const YAML::Node& n, std::string_view section, Config& c) {
    std::map<std::string_view, bool> entered;  // a nested mapping's path -> it is a mapping
    for (const KeySpec& k : config_keys()) {
      if (std::holds_alternative<std::monostate>(k.target)) continue;
      const std::string_view parent = k.parent();
      const bool nested = parent != section;
      if (nested) {
        if (section.empty() || !parent.starts_with(section) || parent.size() <= section.size() || parent[section.size()] != '.' ||
            parent.find('.', section.size() + 1) != std::string_view::npos || find_key(parent) != nullptr)
          continue;  // not below `section`, more than one level down, or a section with a reader of its own
      }
      // (YAML::Node's operator= writes into the node it refers to: a node is made here, never assigned.)
      const YAML::Node at = nested ? n[std::string(parent.substr(section.size() + 1))] : n;
      if (nested) {
        if (!at) continue;
        auto [it, first] = entered.emplace(parent, false);
        if (first) it->second = check_map(at, std::string(parent), parent);
        if (!it->second) continue;
      }
      auto v = at[std::string(k.name())];
      if (!v) continue;
      auto value = key_value(k, v, std::string(k.key));
      if (!value) continue;
      std::visit(
          [&](auto field) {
            using Field = decltype(field);
            if constexpr (std::is_same_v<Field, bool& (*)(Config&)>) field(c) = value->flag;
            else if constexpr (std::is_same_v<Field, uint32_t& (*)(Config&)>) field(c) = static_cast<uint32_t>(value->number);
            else if constexpr (std::is_same_v<Field, size_t& (*)(Config&)>) field(c) = static_cast<size_t>(value->number);
            else if constexpr (std::is_same_v<Field, std::chrono::milliseconds& (*)(Config&)>) field(c) = value->duration;
            else if constexpr (std::is_same_v<Field, std::string& (*)(Config&)>) field(c) = value->text;
            else if constexpr (std::is_same_v<Field, std::optional<HostPort>& (*)(Config&)>) field(c) = value->address;
            else if constexpr (std::is_same_v<Field, void (*)(Config&, size_t)>) field(c, static_cast<size_t>(value->number));
          },
          k.target);
    }
  }

  std::optional<std::string> scalar(const YAML::Node& node, const std::string& path) {
    if (!node.IsScalar()) {
      error(node, path + ": expected a single value");
      return std::nullopt;
    }
    return node.Scalar();
  }

  // `allow_port_zero`: a listening address, where port 0 lets the kernel pick (reported at start).
  std::optional<HostPort> host_port(const YAML::Node& node, const std::string& path, bool allow_port_zero = false) {
    auto text = scalar(node, path);
    if (!text) return std::nullopt;
    std::string why;
    auto hp = parse_host_port(*text, &why, allow_port_zero);
    if (!hp) error(node, path + ": " + why);
    return hp;
  }

  // "host:port", "a:1,b:2" or a YAML list of "host:port".
  std::vector<HostPort> upstream_list(const YAML::Node& node, const std::string& path) {
    std::vector<HostPort> out;
    auto add = [&](const YAML::Node& at, std::string_view text, const std::string& where) {
      std::string why;
      if (auto hp = parse_host_port(text, &why)) out.push_back(*hp);
      else error(at, where + ": " + why);
    };
    if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        std::string where = path + "[" + std::to_string(i) + "]";
        if (auto s = scalar(node[i], where)) add(node[i], *s, where);
      }
    } else if (auto s = scalar(node, path)) {
      std::string_view rest = *s;
      while (!rest.empty()) {
        size_t comma = rest.find(',');
        std::string_view one = rest.substr(0, comma);
        while (!one.empty() && one.front() == ' ') one.remove_prefix(1);
        while (!one.empty() && one.back() == ' ') one.remove_suffix(1);
        add(node, one, path);
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
      }
    }
    if (out.empty() && errors_.empty()) error(node, path + ": no bootstrap server given");
    return out;
  }

  std::optional<uint16_t> port(const YAML::Node& node, const std::string& path) {
    auto text = scalar(node, path);
    if (!text) return std::nullopt;
    auto n = parse_unsigned(*text);
    if (!n || *n == 0 || *n > 65535) {
      error(node, path + ": '" + *text + "' is not a port (1 to 65535)");
      return std::nullopt;
    }
    return static_cast<uint16_t>(*n);
  }

  // The top level and its sections. The sections' scalar keys are read by read_keys from their
  // config_keys() rows; what is left here is what a row cannot say (port claims, the admin
  // token, checks across keys).
  void load_root(const YAML::Node& root, Config& c) {
    check_map(root, "", "");
    if (auto n = root["listeners"]) {
      load_listeners(n, c);
    } else {
      error(root, "listeners: missing (at least one listener is needed)");
    }
    if (auto n = root["admin"]; n && check_map(n, "admin", "admin")) {
      read_keys(n, "admin", c);
      if (c.admin.listen && c.admin.listen->port != 0) {
        claims_.push_back(
            {c.admin.listen->port, c.admin.listen->port, "admin.listen", "the admin API", n["listen"].Mark(), -1, ClaimKind::kAdmin});
      }
      load_admin_token(n, c.admin);
    }
    if (auto n = root["toxiproxy"]; n && check_map(n, "toxiproxy", "toxiproxy")) {
      read_keys(n, "toxiproxy", c);
      if (c.toxiproxy.listen && c.toxiproxy.listen->port != 0) {
        claims_.push_back({c.toxiproxy.listen->port, c.toxiproxy.listen->port, "toxiproxy.listen", "the Toxiproxy API", n["listen"].Mark(),
                           -1, ClaimKind::kAdmin});
      }
    }
    check_port_claims();
    if (auto n = root["metrics"]; n && check_map(n, "metrics", "metrics")) read_keys(n, "metrics", c);
    if (auto n = root["tap"]; n && check_map(n, "tap", "tap")) read_keys(n, "tap", c);
    if (auto n = root["limits"]) load_limits(n, c);
    read_keys(root, "", c);  // workers, drain_timeout
    if (auto n = root["log"]; n && check_map(n, "log", "log")) read_keys(n, "log", c);
    if (auto n = root["tracing"]) load_tracing(n, c);
    for (const auto& kv : root) {
      auto key = kv.first.as<std::string>("");
      if (key == "api_versions") pass_through(kv.first, kv.second, key, c.api_versions);
      if (key == "faults") pass_through(kv.first, kv.second, key, c.faults);
    }
  }

  void pass_through(const YAML::Node& key, const YAML::Node& n, const std::string& path, PassThroughSection& out) {
    if (!n.IsSequence() && !n.IsNull()) {
      error(n, path + ": expected a list");
      return;
    }
    YAML::Emitter emitter;
    emitter << n;
    out.yaml = emitter.c_str();
    out.line = key.Mark().line + 1;
  }

  // listeners[].sni (config/sni_config.h). Names are matched lower case, without a trailing dot.
  std::optional<SniConfig> sni_section(const YAML::Node& n, const std::string& path, const std::string& listener_name,
                                       const std::optional<HostPort>& listen) {
    if (!check_map(n, path, "listeners[].sni")) return std::nullopt;
    SniConfig sni;
    bool ok = true;
    auto host_name = [&](const YAML::Node& v, const std::string& key) -> std::optional<std::string> {
      auto text = scalar(v, key);
      if (!text) return std::nullopt;
      std::string name = replace_listener_placeholder(*text, listener_name);
      std::transform(name.begin(), name.end(), name.begin(), [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
      if (!name.empty() && name.back() == '.') name.pop_back();
      // Placeholders keep their spelling (only host name letters are matched without case).
      for (size_t at; (at = name.find("$(nodeid)")) != std::string::npos;) name.replace(at, 9, "$(nodeId)");
      bool valid = !name.empty() && name.size() <= 253 && name.front() != '.' && name.find("..") == std::string::npos;
      for (char ch : name) {
        if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '.' || ch == '_' || ch == '$' || ch == '(' || ch == ')'))
          valid = false;
      }
      if (!valid) {
        error(v, key + ": '" + *text + "' is not a DNS host name");
        return std::nullopt;
      }
      return name;
    };
    if (auto v = n["bootstrap"]) {
      if (auto name = host_name(v, path + ".bootstrap")) {
        sni.bootstrap = *name;
        if (sni.bootstrap.find("$(") != std::string::npos) {
          error(v, path + ".bootstrap: '" + sni.bootstrap + "' has a placeholder (only $(listener) is replaced here)");
          ok = false;
        } else if (is_address_literal(sni.bootstrap)) {
          warn(v.Mark(), path + ".bootstrap: '" + sni.bootstrap +
                             "' is an IP address: a client connecting by IP address sends no SNI (RFC 6066 section 3), so it reaches "
                             "the unknown-name policy, never this name");
        }
      } else {
        ok = false;
      }
    } else {
      error(n, path + ".bootstrap: missing (the host name clients bootstrap with)");
      ok = false;
    }
    if (auto v = n["broker"]) {
      if (auto name = host_name(v, path + ".broker")) {
        std::string why;
        if (auto pattern = BrokerHostPattern::make(*name, &why)) {
          sni.broker = *pattern;
          // Any node id renders to an address literal if these do ("10.0.0.$(nodeId)").
          for (int32_t id : {0, 1, 255}) {
            if (is_address_literal(pattern->render(id))) {
              warn(v.Mark(), path + ".broker: '" + pattern->text() + "' gives node " + std::to_string(id) + " the name '" +
                                 pattern->render(id) +
                                 "', an IP address: clients connecting by IP address send no SNI (RFC 6066 section 3), so they "
                                 "would never reach that broker");
              break;
            }
          }
          if (!sni.bootstrap.empty() && pattern->match(sni.bootstrap)) {
            error(v, path + ".broker: '" + pattern->text() + "' matches the bootstrap name '" + sni.bootstrap + "'");
            ok = false;
          }
        } else {
          error(v, path + ".broker: " + why);
          ok = false;
        }
      } else {
        ok = false;
      }
    } else {
      error(n, path + ".broker: missing (the broker host name pattern, e.g. broker-$(nodeId).kafka.example.com)");
      ok = false;
    }
    if (auto v = n["advertised_port"]) {
      if (auto p = key_value("listeners[].sni.advertised_port", v, path + ".advertised_port"))
        sni.advertised_port = static_cast<uint16_t>(p->number);
      else ok = false;
    } else if (listen && listen->port != 0) {
      sni.advertised_port = listen->port;
    } else if (listen) {
      error(n, path + ".advertised_port: missing (required when the listen port is 0: clients are told this port for every broker)");
      ok = false;
    }
    if (auto v = n["unknown"]) {
      // Choices in the row's order: refuse, bootstrap.
      if (auto u = key_value("listeners[].sni.unknown", v, path + ".unknown")) {
        sni.unknown = u->number == 0 ? UnknownServerName::kRefuse : UnknownServerName::kBootstrap;
      } else if (v.IsScalar()) {
        ok = false;
      }
    }
    if (auto v = n["client_hello_timeout"]) {
      if (auto d = key_value("listeners[].sni.client_hello_timeout", v, path + ".client_hello_timeout"))
        sni.client_hello_timeout = d->duration;
    }
    if (auto v = n["max_client_hello_bytes"]) {
      if (auto b = key_value("listeners[].sni.max_client_hello_bytes", v, path + ".max_client_hello_bytes"))
        sni.max_client_hello_bytes = b->number;
    }
    if (!ok) return std::nullopt;
    return sni;
  }

  std::optional<std::chrono::milliseconds> duration(const YAML::Node& n, const std::string& path) {
    auto text = scalar(n, path);
    if (!text) return std::nullopt;
    auto d = parse_duration(*text);
    if (!d) error(n, path + ": '" + *text + "' is not a duration (e.g. 500ms, 30s, 2m)");
    return d;
  }

  std::optional<size_t> byte_size(const YAML::Node& n, const std::string& path) {
    auto text = scalar(n, path);
    if (!text) return std::nullopt;
    auto b = parse_byte_size(*text);
    if (!b || *b == 0) {
      error(n, path + ": '" + *text + "' is not a size (e.g. 1048576, 64KiB, 100MiB)");
      return std::nullopt;
    }
    return b;
  }

  // tracing: the OTLP/HTTP endpoint (split into host, port and path here) and the exporter's
  // bounds (read_keys).
  void load_tracing(const YAML::Node& n, Config& c) {
    if (!check_map(n, "tracing", "tracing")) return;
    TracingConfig& t = c.tracing.emplace();
    if (auto v = n["endpoint"]) {
      auto text = scalar(v, "tracing.endpoint");
      std::string why;
      if (text && !parse_http_endpoint(*text, t, why)) error(v, "tracing.endpoint: '" + *text + "': " + why);
    } else {
      error(n, "tracing.endpoint: missing (the collector's OTLP/HTTP traces URL, e.g. http://127.0.0.1:4318/v1/traces)");
    }
    read_keys(n, "tracing", c);  // and tracing.batch
    // A transaction's spans (its requests and its root span) go into the queue together.
    if (t.max_spans_per_transaction + 1 > t.max_queue_spans) {
      auto at = n["max_spans_per_transaction"] ? n["max_spans_per_transaction"] : n;
      error(at, "tracing.max_spans_per_transaction: " + std::to_string(t.max_spans_per_transaction) +
                    " and the root span do not fit in tracing.max_queue_spans (" + std::to_string(t.max_queue_spans) +
                    "): no transaction that long could ever be exported");
    }
  }

  // limits: every key is a row (read_keys); the checks across keys are here.
  void load_limits(const YAML::Node& n, Config& c) {
    if (!check_map(n, "limits", "limits")) return;
    read_keys(n, "limits", c);
    Limits& limits = c.limits;
    if (limits.max_buffered_frame_bytes < std::max(limits.max_request_frame_bytes, limits.max_response_frame_bytes)) {
      auto at = n["max_buffered_frame_bytes"] ? n["max_buffered_frame_bytes"] : n;
      error(at, "limits.max_buffered_frame_bytes: " + std::to_string(limits.max_buffered_frame_bytes) +
                    " is less than the largest frame allowed (max_request_frame_bytes " + std::to_string(limits.max_request_frame_bytes) +
                    ", max_response_frame_bytes " + std::to_string(limits.max_response_frame_bytes) + "): such a frame could never arrive");
    }
    // Set in the file: the start warns when the open-file limit is too low instead of lowering it.
    if (n["max_connections"]) limits.max_connections_default = false;
  }

  void load_listeners(const YAML::Node& n, Config& c) {
    if (!n.IsSequence() || n.size() == 0) {
      error(n, "listeners: expected a non-empty list of listeners");
      return;
    }
    std::set<std::string> names;
    for (size_t i = 0; i < n.size(); ++i) load_listener(n[i], "listeners[" + std::to_string(i) + "]", i, names, c);
    // Two listeners on one port would split clients between them.
    for (size_t i = 0; i < c.listeners.size(); ++i) {
      for (size_t j = 0; j < i; ++j) {
        if (c.listeners[i].listen.port != 0 && c.listeners[i].listen.port == c.listeners[j].listen.port) {
          error(n[i]["listen"] ? n[i]["listen"] : n[i],
                same_port_text("listeners[" + std::to_string(i) + "]", c.listeners[i], c.listeners[j]));
        }
      }
    }
  }

  static std::string same_port_text(const std::string& path, const ListenerConfig& later, const ListenerConfig& earlier) {
    return path + ".listen: port " + std::to_string(later.listen.port) + " is also used by listener '" + earlier.name + "'";
  }

 public:
  /// Runs the checks of the config's listeners on one more listener `item` (the admin API's PUT
  /// /listeners/{name}, config_loader.h load_listener_entry): `running` (the config and the
  /// listeners added at run time) claims its ports and names first.
  ListenerEntry load_entry(const YAML::Node& item, const std::string& name, const Config& running,
                           const std::vector<ListenerConfig>& added) {
    ListenerEntry out;
    std::set<std::string> names;
    std::vector<const ListenerConfig*> all;
    for (const auto& l : running.listeners) all.push_back(&l);
    for (const auto& l : added) all.push_back(&l);
    for (size_t i = 0; i < all.size(); ++i) {
      const auto& l = *all[i];
      names.insert(l.name);
      const std::string path = "listeners[" + std::to_string(i) + "]";
      const std::string owner = "listener '" + l.name + "'";
      const int index = static_cast<int>(i);
      if (l.listen.port != 0)
        claims_.push_back(
            {l.listen.port, l.listen.port, path + ".listen", "the bootstrap port of " + owner, {}, index, ClaimKind::kListen});
      if (l.broker_ports.scheme == BrokerPorts::Scheme::kNodeIdOffset)
        claims_.push_back(
            {l.broker_ports.base, l.broker_ports.base, path + ".broker_ports", "broker node 0 of " + owner, {}, index, ClaimKind::kBase});
      if (l.broker_ports.scheme == BrokerPorts::Scheme::kInOrder)
        claims_.push_back({l.broker_ports.first,
                           l.broker_ports.last,
                           path + ".broker_port_range",
                           "the broker ports of " + owner,
                           {},
                           index,
                           ClaimKind::kRange});
      max_ports_.push_back(l.broker_ports.max_ports);
    }
    if (running.admin.listen && running.admin.listen->port != 0)
      claims_.push_back(
          {running.admin.listen->port, running.admin.listen->port, "admin.listen", "the admin API", {}, -1, ClaimKind::kAdmin});
    if (running.toxiproxy.listen && running.toxiproxy.listen->port != 0)
      claims_.push_back({running.toxiproxy.listen->port,
                         running.toxiproxy.listen->port,
                         "toxiproxy.listen",
                         "the Toxiproxy API",
                         {},
                         -1,
                         ClaimKind::kAdmin});
    first_new_claim_ = claims_.size();
    Config c;
    const size_t index = all.size();
    const std::string path = "listeners[" + std::to_string(index) + "]";
    if (walk(item, 1, path)) {
      if (item.IsMap() && item["name"] && item["name"].IsScalar() && item["name"].Scalar() != name) {
        error(item["name"], path + ".name: '" + item["name"].Scalar() + "' differs from the name in the path ('" + name + "')");
      }
      YAML::Node named = YAML::Clone(item);
      if (named.IsMap()) named["name"] = name;
      load_listener(named, path, index, names, c);
      if (!c.listeners.empty()) {
        const ListenerConfig& l = c.listeners.front();
        for (std::string_view key : kStartOnlyListenerKeys) {
          if (auto v = named[std::string(key)]) {
            error(v, path + "." + std::string(key) + ": not taken for a listener added at run time: put it in the config file");
          }
        }
        // What is left to refuse is a port another part of the running config claims.
        const size_t before_claims = errors_.size();
        for (const auto* other : all) {
          if (l.listen.port != 0 && l.listen.port == other->listen.port) error(named["listen"], same_port_text(path, l, *other));
        }
        check_port_claims();
        out.port_conflict = before_claims == 0 && errors_.size() > before_claims;
      }
    }
    if (errors_.empty() && !c.listeners.empty()) out.listener = std::move(c.listeners.front());
    out.errors = std::move(errors_);
    out.warnings = std::move(warnings_);
    return out;
  }

 private:
  void load_listener(const YAML::Node& item, const std::string& path, size_t i, std::set<std::string>& names, Config& c) {
    {
      if (!check_map(item, path, "listeners[]")) {
        return;
      }
      ListenerConfig l;
      if (auto v = item["name"]) {
        if (auto s = scalar(v, path + ".name")) {
          l.name = *s;
          if (l.name.empty()) error(v, path + ".name: must not be empty");
          else if (!names.insert(l.name).second) error(v, path + ".name: '" + l.name + "' is used by another listener");
        }
      } else {
        l.name = "listener-" + std::to_string(i);
      }
      auto required_host_port = [&](const char* key) -> std::optional<HostPort> {
        if (auto v = item[key]) return host_port(v, path + "." + key, /*allow_port_zero=*/true);
        error(item, path + "." + key + ": missing");
        return std::nullopt;
      };
      auto listen = required_host_port("listen");
      if (listen) l.listen = *listen;
      const int index = static_cast<int>(i);
      const std::string owner = "listener '" + l.name + "'";
      if (listen && listen->port != 0) {  // port 0: the kernel's pick claims nothing of the config's
        claims_.push_back({listen->port, listen->port, path + ".listen", "the bootstrap port of " + owner, item["listen"].Mark(), index,
                           ClaimKind::kListen});
      }
      if (auto v = item["max_broker_ports"]) {
        if (auto k = key_value("listeners[].max_broker_ports", v, path + ".max_broker_ports"))
          l.broker_ports.max_ports = static_cast<uint32_t>(k->number);
      }
      if (auto v = item["upstream"]) {
        l.upstreams = upstream_list(v, path + ".upstream");
        if (!l.upstreams.empty()) l.upstream = l.upstreams.front();
      } else {
        error(item, path + ".upstream: missing");
      }
      if (auto v = item["sni"]) l.sni = sni_section(v, path + ".sni", l.name, listen);
      if (auto v = item["advertise"]) {
        if (auto s = scalar(v, path + ".advertise")) {
          std::string why;
          if (auto spec = parse_advertise(*s, &why); !spec) {
            error(v, path + ".advertise: " + why);
          } else if (!spec->nodes.empty() && item["sni"]) {
            error(v, path + ".advertise: node=host:port items are not taken on an SNI listener (brokers are named by sni.broker)");
          } else {
            l.advertise_nodes = std::move(spec->nodes);
            l.advertise = spec->host;
            // Brokers not listed (and masked controller endpoints) get the listen host, else the
            // host of the first node listed.
            if (l.advertise.empty() && listen && !is_wildcard_host(listen->host)) l.advertise = listen->host;
            if (l.advertise.empty() && !l.advertise_nodes.empty()) l.advertise = l.advertise_nodes.begin()->second.host;
          }
        }
      } else if (l.sni) {
        l.advertise = l.sni->bootstrap;  // brokers are advertised by the sni.broker pattern
      } else if (listen) {
        if (is_wildcard_host(listen->host)) {
          error(item, path + ".advertise: missing (required when listen is a wildcard address: clients need a host to connect to)");
        } else {
          l.advertise = listen->host;
        }
      }
      auto ports = item["broker_ports"];
      auto range = item["broker_port_range"];
      if (item["sni"]) {
        if (ports || range) {
          error(ports ? ports : range, path +
                                           ": an SNI listener serves every broker on its one port (sni.advertised_port): remove "
                                           "broker_ports / broker_port_range");
        }
        l.broker_ports.scheme = BrokerPorts::Scheme::kSni;
        if (l.sni) l.broker_ports.base = l.sni->advertised_port;
      } else if (ports && range) {
        error(range, path + ": give either broker_ports (base + node id) or broker_port_range (assigned in order), not both");
      } else if (ports && ports.IsScalar() && ports.Scalar() == "0") {
        l.broker_ports.scheme = BrokerPorts::Scheme::kKernel;  // each broker a port the kernel picks
      } else if (ports && ports.IsScalar() && ports.Scalar() == "listen") {
        l.broker_ports.scheme = BrokerPorts::Scheme::kListenPort;  // a single broker at the listen port
        l.broker_ports.max_ports = 1;
      } else if (ports) {
        if (auto base = port(ports, path + ".broker_ports")) {
          l.broker_ports.scheme = BrokerPorts::Scheme::kNodeIdOffset;
          l.broker_ports.base = *base;
          if (listen && *base == listen->port)
            error(ports, path + ".broker_ports: base " + std::to_string(*base) + " would give node 0 the bootstrap port");
          claims_.push_back({*base, *base, path + ".broker_ports", "broker node 0 of " + owner, ports.Mark(), index, ClaimKind::kBase});
          // The nodes advertise names are known before any response: their ports are checked now
          // too, instead of at discovery (issue #46: a base + node id on another listener's port
          // passed check-config and was refused only at run time).
          for (const auto& [node, _] : l.advertise_nodes) {
            if (node <= 0) continue;  // node 0 is the base itself
            uint32_t at = uint32_t{*base} + static_cast<uint32_t>(node);
            std::string what = "base " + std::to_string(*base) + " + node " + std::to_string(node) + " (named in advertise)";
            if (at > 65535) {
              error(ports, path + ".broker_ports: " + what + " is past port 65535");
            } else if (listen && at == listen->port) {
              error(ports, path + ".broker_ports: " + what + " would give node " + std::to_string(node) + " the bootstrap port " +
                               std::to_string(at));
            } else {
              claims_.push_back({static_cast<uint16_t>(at), static_cast<uint16_t>(at), path + ".broker_ports",
                                 "broker node " + std::to_string(node) + " of " + owner + ", " + what, ports.Mark(), index,
                                 ClaimKind::kBase});
            }
          }
        }
      } else if (range) {
        load_port_range(range, path + ".broker_port_range", listen, l.broker_ports);
        if (l.broker_ports.scheme == BrokerPorts::Scheme::kInOrder) {
          claims_.push_back({l.broker_ports.first, l.broker_ports.last, path + ".broker_port_range", "the broker ports of " + owner,
                             range.Mark(), index, ClaimKind::kRange});
        }
      } else {
        error(item,
              path +
                  ": missing broker_ports (base port: node N at base + N; 0: a port the kernel picks per broker; listen: a single broker "
                  "at the listen port) or "
                  "broker_port_range (first-last, assigned in order)");
      }
      if (auto v = item["tls"]) l.tls = server_tls(v, path + ".tls");
      if (auto v = item["upstream_tls"]) l.upstream_tls = upstream_tls(v, path + ".upstream_tls");
      if (auto v = item["proxy_protocol"]) {
        // Choices in the row's order: v2, off.
        if (auto p = key_value("listeners[].proxy_protocol", v, path + ".proxy_protocol")) l.proxy_protocol = p->number == 0;
      }
      if (l.sni && !l.tls && !l.proxy_protocol) {
        error(item["sni"], path +
                               ".sni: needs tls: on the listener (the server name is read from the client's TLS ClientHello), or "
                               "proxy_protocol: v2 when TLS ends at the load balancer (its header's authority names the host)");
      }
      max_ports_.resize(i + 1, kDefaultMaxBrokerPorts);
      max_ports_[i] = l.broker_ports.max_ports;
      c.listeners.push_back(std::move(l));
    }
  }

  TlsFile tls_file(const YAML::Node& node, const std::string& key_path) {
    TlsFile f;
    f.key_path = key_path;
    f.line = node.Mark().line + 1;
    f.column = node.Mark().column + 1;
    if (auto s = scalar(node, key_path)) {
      f.path = *s;
      if (f.path.empty()) error(node, key_path + ": must name a PEM file");
    }
    return f;
  }

  // listeners[].tls.min_version and listeners[].upstream_tls.min_version (one row each, the same
  // choices in the same order: 1.2, TLSv1.2, 1.3, TLSv1.3).
  std::optional<TlsVersion> tls_version(std::string_view key, const YAML::Node& node, const std::string& path) {
    auto v = key_value(key, node, path);
    if (!v) return std::nullopt;
    return v->number < 2 ? TlsVersion::kTls12 : TlsVersion::kTls13;
  }

  // admin.token_file / admin.token_env: the bearer token, resolved now so that a missing or empty
  // secret stops the start (or the reload) instead of leaving the admin API open.
  void load_admin_token(const YAML::Node& n, AdminConfig& admin) {
    auto file = n["token_file"];
    auto env = n["token_env"];
    if (file && env) {
      error(env, "admin.token_env: give admin.token_file or admin.token_env, not both");
      return;
    }
    std::string token;
    const YAML::Node& at = file ? file : env ? env : n;
    if (file) {
      auto path = scalar(file, "admin.token_file");
      if (!path) return;
      auto read = read_admin_token_file(*path);
      if (!read) {
        error(file, "admin.token_file: cannot read '" + *path + "'");
        return;
      }
      token = std::move(*read);
      admin.token_origin = "file " + *path;
    } else if (env) {
      auto name = scalar(env, "admin.token_env");
      if (!name) return;
      const char* value = name->empty() ? nullptr : std::getenv(name->c_str());
      if (!value) {
        error(env, "admin.token_env: the environment variable '" + *name + "' is not set");
        return;
      }
      token = strip_token(value);
      admin.token_origin = "env " + *name;
    } else if (const char* value = std::getenv("KPROXY_ADMIN_TOKEN"); value && *value) {
      // Neither key: $KPROXY_ADMIN_TOKEN, the older way (deploy/k8s sets it from a Secret).
      token = strip_token(value);
      admin.token_origin = "env KPROXY_ADMIN_TOKEN";
    } else {
      return;
    }
    const std::string what = file ? "admin.token_file" : env ? "admin.token_env" : "admin: $KPROXY_ADMIN_TOKEN";
    if (token.empty()) {
      error(at, what + ": the token is empty");
      return;
    }
    if (token.size() > 4096) {
      error(at, what + ": the token is longer than 4096 bytes");
      return;
    }
    // An HTTP Authorization header carries it: no spaces or control characters (RFC 6750 b64token).
    if (std::any_of(token.begin(), token.end(), [](unsigned char ch) { return ch <= ' ' || ch == 0x7f; })) {
      error(at, what + ": the token contains spaces or control characters");
      return;
    }
    admin.token = std::move(token);
  }

  std::optional<bool> boolean(const YAML::Node& node, const std::string& path) {
    auto text = scalar(node, path);
    if (!text) return std::nullopt;
    if (*text == "true" || *text == "yes" || *text == "on") return true;
    if (*text == "false" || *text == "no" || *text == "off") return false;
    error(node, path + ": '" + *text + "' is not true or false");
    return std::nullopt;
  }

  ServerTlsConfig server_tls(const YAML::Node& n, const std::string& path) {
    ServerTlsConfig t;
    if (!check_map(n, path, "listeners[].tls")) return t;
    if (auto v = n["cert"]) t.cert = tls_file(v, path + ".cert");
    else error(n, path + ".cert: missing (the PEM certificate kproxy presents to clients)");
    if (auto v = n["key"]) t.key = tls_file(v, path + ".key");
    else error(n, path + ".key: missing (the PEM private key of " + path + ".cert)");
    if (auto v = n["client_ca"]) {
      t.client_ca = tls_file(v, path + ".client_ca");
      t.client_auth = ClientAuth::kRequired;
    }
    if (auto v = n["client_auth"]) {
      // Choices in the row's order: none, requested, required.
      if (auto a = key_value("listeners[].tls.client_auth", v, path + ".client_auth")) {
        t.client_auth = a->number == 0 ? ClientAuth::kNone : a->number == 1 ? ClientAuth::kRequested : ClientAuth::kRequired;
      }
      if (t.client_auth != ClientAuth::kNone && !t.client_ca.given()) {
        error(v, path + ".client_auth: verifying client certificates needs " + path + ".client_ca");
      }
    }
    if (auto v = n["min_version"]) {
      if (auto ver = tls_version("listeners[].tls.min_version", v, path + ".min_version")) t.min_version = *ver;
    }
    if (auto v = n["certificates"]) {
      if (!v.IsSequence()) error(v, path + ".certificates: expected a list of {cert, key}");
      for (size_t i = 0; v.IsSequence() && i < v.size(); ++i) {
        std::string at = path + ".certificates[" + std::to_string(i) + "]";
        if (!check_map(v[i], at, "listeners[].tls.certificates[]")) continue;
        CertificateFiles files;
        if (auto c = v[i]["cert"]) files.cert = tls_file(c, at + ".cert");
        else error(v[i], at + ".cert: missing");
        if (auto k = v[i]["key"]) files.key = tls_file(k, at + ".key");
        else error(v[i], at + ".key: missing");
        t.certificates.push_back(std::move(files));
      }
    }
    return t;
  }

  UpstreamTlsConfig upstream_tls(const YAML::Node& n, const std::string& path) {
    UpstreamTlsConfig t;
    if (n.IsNull()) return t;  // `upstream_tls:` alone: TLS with the system trust store
    if (!check_map(n, path, "listeners[].upstream_tls")) return t;
    if (auto v = n["ca"]) t.ca = tls_file(v, path + ".ca");
    if (auto v = n["cert"]) t.cert = tls_file(v, path + ".cert");
    if (auto v = n["key"]) t.key = tls_file(v, path + ".key");
    if (t.cert.given() != t.key.given()) {
      error(n, path + ": give both cert and key (a client certificate for mTLS), or neither");
    }
    if (auto v = n["verify_hostname"]) {
      if (auto f = key_value("listeners[].upstream_tls.verify_hostname", v, path + ".verify_hostname")) t.verify_hostname = f->flag;
    }
    if (auto v = n["min_version"]) {
      if (auto ver = tls_version("listeners[].upstream_tls.min_version", v, path + ".min_version")) t.min_version = *ver;
    }
    return t;
  }

  void load_port_range(const YAML::Node& v, const std::string& path, const std::optional<HostPort>& listen, BrokerPorts& out) {
    auto text = scalar(v, path);
    if (!text) return;
    size_t dash = text->find('-');
    auto first = dash == std::string::npos ? std::nullopt : parse_unsigned(std::string_view(*text).substr(0, dash));
    auto last = dash == std::string::npos ? std::nullopt : parse_unsigned(std::string_view(*text).substr(dash + 1));
    if (!first || !last || *first == 0 || *last > 65535 || *first > *last) {
      error(v, path + ": '" + *text + "' is not a port range 'first-last' (1 to 65535, first <= last)");
      return;
    }
    if (listen && listen->port >= *first && listen->port <= *last) {
      error(v, path + ": the range contains the listener's own port " + std::to_string(listen->port));
      return;
    }
    out.scheme = BrokerPorts::Scheme::kInOrder;
    out.first = static_cast<uint16_t>(*first);
    out.last = static_cast<uint16_t>(*last);
  }

  // A port or range of ports one part of the config will listen on.
  enum class ClaimKind : uint8_t { kListen, kRange, kBase, kAdmin };
  struct PortClaim {
    uint16_t first = 0;
    uint16_t last = 0;
    std::string key;    ///< "listeners[1].broker_port_range"
    std::string owner;  ///< "the broker ports of listener 'west'"
    YAML::Mark mark;
    int listener = -1;  ///< -1: the admin API or the Toxiproxy API
    ClaimKind kind = ClaimKind::kListen;
  };

  static std::string ports_text(const PortClaim& c) {
    return c.first == c.last ? "port " + std::to_string(c.first) : "ports " + std::to_string(c.first) + "-" + std::to_string(c.last);
  }

  // No port may be claimed twice (issue #15 bug 4: two listeners sharing broker ports send one
  // cluster's clients to the other). A broker_ports base is checked here as its node 0 port and
  // the ports of the node ids `advertise` names; the ports of other node ids are only known at
  // discovery, where BrokerPortClaims refuses them (proxy/cluster/broker_directory.h). Each conflict is reported at the later of the two
  // keys.
  void check_port_claims() {
    for (size_t j = 0; j < claims_.size(); ++j) {
      for (size_t i = 0; i < j; ++i) {
        const PortClaim& a = claims_[i];
        const PortClaim& b = claims_[j];
        if (!PortRange{a.first, a.last}.overlaps(b.first, b.last)) continue;
        // Within one listener the loader reports these itself; two listens already are too.
        if (a.listener == b.listener && a.listener >= 0) continue;
        if (a.kind == ClaimKind::kListen && b.kind == ClaimKind::kListen) continue;
        uint16_t shared = std::max(a.first, b.first);
        error(b.mark, b.key + ": " + ports_text(b) + " overlaps " + a.key + " (" + a.owner + ", " + ports_text(a) + "): port " +
                          std::to_string(shared) + " would be claimed by both, and clients of one would reach the other");
      }
    }
    if (!errors_.empty() || !options_.ephemeral_ports) return;
    auto ephemeral = options_.ephemeral_ports();
    if (!ephemeral) return;
    for (size_t k = first_new_claim_; k < claims_.size(); ++k) {
      const PortClaim& c = claims_[k];
      PortClaim window = c;
      std::string note;
      if (c.kind == ClaimKind::kBase) {
        // Node ids are known only at discovery: the window of the first max_broker_ports ids.
        window.last = static_cast<uint16_t>(std::min<uint32_t>(65535, uint32_t{c.first} + max_ports_of(c.listener) - 1));
        note = " (base + node ids 0-" + std::to_string(window.last - window.first) + ")";
      }
      if (!ephemeral->overlaps(window.first, window.last)) continue;
      warn(c.mark, c.key + ": " + ports_text(window) + note + (window.first == window.last ? " overlaps" : " overlap") +
                       " the kernel's ephemeral port range " + std::to_string(ephemeral->first) + "-" + std::to_string(ephemeral->last) +
                       " (net.ipv4.ip_local_port_range): any outgoing connection on this host may take such a port before kproxy opens "
                       "it; choose ports outside that range or reserve them (net.ipv4.ip_local_reserved_ports), see config/README.md");
    }
  }

  uint32_t max_ports_of(int listener) const {
    if (listener < 0 || static_cast<size_t>(listener) >= max_ports_.size()) return kDefaultMaxBrokerPorts;
    return max_ports_[static_cast<size_t>(listener)];
  }

  std::string source_;
  const LoadOptions& options_;
  std::vector<ConfigError> errors_;
  std::vector<ConfigError> warnings_;
  size_t nodes_ = 0;
  std::string walk_base_;                    ///< where the current walk started (walk())
  std::vector<WalkStep> walk_path_;          ///< the steps from there to the node being walked
  std::map<WalkKey, WalkedSubtree> walked_;  ///< collections walked once (walk_node)
  int deepest_ = 0;                          ///< the deepest level the current subtree's walk reached
  std::set<std::pair<int, int>> reported_duplicates_;
  std::set<std::pair<int, int>> reported_encoding_;  ///< an aliased value is walked once per use: one error
  static std::pair<int, int> mark_of(const YAML::Node& n) { return {n.Mark().line, n.Mark().column}; }
  std::vector<PortClaim> claims_;
  size_t first_new_claim_ = 0;       ///< claims before it are the running listeners' (load_entry): no warning for them again
  std::vector<uint32_t> max_ports_;  ///< per listener index, for the ephemeral-range window
};

/// A text yaml-cpp could not parse, as a ConfigError with its position.
ConfigError invalid_yaml(const YAML::Exception& e, const std::string& source) {
  ConfigError err;
  err.file = source;
  if (!e.mark.is_null()) {
    err.line = e.mark.line + 1;
    err.column = e.mark.column + 1;
  }
  err.reason = "invalid YAML: " + e.msg;
  return err;
}

LoadResult parse_and_load(const std::function<YAML::Node()>& parse, const std::string& source, const LoadOptions& options) {
  Loader loader(source, options);
  YAML::Node root;
  try {
    root = parse();
  } catch (const YAML::Exception& e) {
    LoadResult r;
    r.errors.push_back(invalid_yaml(e, source));
    return r;
  }
  try {
    return loader.load(root);
  } catch (const YAML::Exception& e) {
    LoadResult r;
    ConfigError err;
    err.file = source;
    err.line = e.mark.is_null() ? 0 : e.mark.line + 1;
    err.column = e.mark.is_null() ? 0 : e.mark.column + 1;
    err.reason = e.msg;
    r.errors.push_back(std::move(err));
    return r;
  }
}

}  // namespace

LoadResult load_config_file(const std::string& path, const LoadOptions& options) {
  std::ifstream in(path);
  if (!in) {
    LoadResult r;
    r.errors.push_back(ConfigError{path, 0, 0, "cannot open the config file"});
    return r;
  }
  std::stringstream text;
  text << in.rdbuf();
  std::string yaml = text.str();
  return parse_and_load([&] { return YAML::Load(yaml); }, path, options);
}

namespace {
// ListenerEntry::well_formed.
bool listener_body_well_formed(const YAML::Node& item) {
  // A `listeners:` entry's keys (config_keys()) but the start-only ones.
  static const std::vector<std::string_view> kKeys = [] {
    std::vector<std::string_view> keys = child_keys("listeners[]");
    std::erase_if(keys, start_only_listener_key);
    return keys;
  }();
  if (!item.IsMap()) return false;
  for (const auto& kv : item) {
    if (!kv.first.IsScalar() || std::find(kKeys.begin(), kKeys.end(), kv.first.Scalar()) == kKeys.end()) return false;
    if (kv.second.IsScalar()) continue;
    if (kv.first.Scalar() != "upstream" || !kv.second.IsSequence()) return false;
    for (const auto& one : kv.second) {
      if (!one.IsScalar()) return false;
    }
  }
  return true;
}
}  // namespace

ListenerEntry load_listener_entry(std::string_view body, const std::string& name, const Config& running,
                                  const std::vector<ListenerConfig>& added, const std::string& source, const LoadOptions& options) {
  Loader loader(source, options);
  ListenerEntry out;
  try {
    YAML::Node item = YAML::Load(std::string(body));
    const bool well_formed = listener_body_well_formed(item);
    out = loader.load_entry(item, name, running, added);
    out.well_formed = well_formed;
    return out;
  } catch (const YAML::Exception& e) {
    out.errors.push_back(invalid_yaml(e, source));
  }
  return out;
}

std::string ListenerEntry::error_text() const {
  std::string out;
  for (const auto& e : errors) out += (out.empty() ? "" : "\n") + e.to_string();
  return out;
}

LoadResult load_config_string(std::string_view yaml, const std::string& source, const LoadOptions& options) {
  std::string text(yaml);
  return parse_and_load([&] { return YAML::Load(text); }, source, options);
}

std::optional<PortRange> parse_ephemeral_ports(std::string_view text) {
  auto skip_space = [&] {
    while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\n')) text.remove_prefix(1);
  };
  auto number = [&]() -> std::optional<uint64_t> {
    skip_space();
    size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    auto n = parse_unsigned(text.substr(0, digits));
    text.remove_prefix(digits);
    return n;
  };
  auto first = number();
  auto last = number();
  skip_space();
  if (!first || !last || !text.empty() || *first == 0 || *last > 65535 || *first > *last) return std::nullopt;
  return PortRange{static_cast<uint16_t>(*first), static_cast<uint16_t>(*last)};
}

std::optional<PortRange> kernel_ephemeral_ports() {
  std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_ephemeral_ports(text.str());
}

std::optional<std::chrono::milliseconds> parse_duration(std::string_view text) {
  auto nu = number_and_unit(text);
  if (!nu) return std::nullopt;
  auto [n, unit] = *nu;
  if (unit == "ms") return std::chrono::milliseconds(n);
  if (unit == "s" || unit.empty()) return std::chrono::milliseconds(n * 1000);
  if (unit == "m") return std::chrono::milliseconds(n * 60'000);
  if (unit == "h") return std::chrono::milliseconds(n * 3'600'000);
  return std::nullopt;
}

std::optional<size_t> parse_byte_size(std::string_view text) {
  auto nu = number_and_unit(text);
  if (!nu) return std::nullopt;
  auto [n, unit] = *nu;
  uint64_t mult = 0;
  if (unit.empty() || unit == "B") mult = 1;
  else if (unit == "KiB") mult = 1ull << 10;
  else if (unit == "MiB") mult = 1ull << 20;
  else if (unit == "GiB") mult = 1ull << 30;
  else if (unit == "KB" || unit == "kB") mult = 1000;
  else if (unit == "MB") mult = 1000 * 1000;
  else if (unit == "GB") mult = 1000 * 1000 * 1000;
  else return std::nullopt;
  if (n > (uint64_t{1} << 40) / mult) return std::nullopt;
  return static_cast<size_t>(n * mult);
}

}  // namespace kproxy::config
