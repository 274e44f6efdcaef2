#include "config/config_keys.h"

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "config/config_loader.h"

using namespace kproxy::config;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

struct TableRow {
  std::string default_text;
  std::string doc;
};

// The rows of a key table as config_keys_markdown() writes them: "| `key` | default | doc |".
// Keys in order, and each key's columns.
std::pair<std::vector<std::string>, std::map<std::string, TableRow>> table_rows(const std::string& table) {
  std::vector<std::string> order;
  std::map<std::string, TableRow> rows;
  std::istringstream in(table);
  std::string line;
  while (std::getline(in, line)) {
    if (!line.starts_with("| `")) continue;
    size_t key_end = line.find("` | ");
    if (key_end == std::string::npos) continue;
    std::string key = line.substr(3, key_end - 3);
    std::string rest = line.substr(key_end + 4);
    size_t sep = rest.find(" | ");
    TableRow row;
    row.default_text = rest.substr(0, sep);
    if (sep != std::string::npos) row.doc = rest.substr(sep + 3);
    if (row.doc.ends_with(" |")) row.doc.resize(row.doc.size() - 2);
    order.push_back(key);
    rows.emplace(key, std::move(row));
  }
  return {order, rows};
}

// What differs between the README's table and the declared one, one line each.
std::string table_differences(const std::string& readme_table, const std::string& declared_table) {
  auto [readme_order, readme] = table_rows(readme_table);
  auto [declared_order, declared] = table_rows(declared_table);
  std::string out;
  for (const auto& key : declared_order) {
    auto it = readme.find(key);
    if (it == readme.end()) {
      out += "`" + key + "`: declared, missing from config/README.md\n";
      continue;
    }
    if (it->second.default_text != declared[key].default_text)
      out += "`" + key + "`: default differs: README '" + it->second.default_text + "', declared '" + declared[key].default_text + "'\n";
    if (it->second.doc != declared[key].doc)
      out += "`" + key + "`: meaning differs:\n  README:   " + it->second.doc + "\n  declared: " + declared[key].doc + "\n";
  }
  for (const auto& key : readme_order) {
    if (!declared.count(key)) out += "`" + key + "`: in config/README.md, not declared in config/config_keys.cc\n";
  }
  if (out.empty() && readme_order != declared_order) out += "the rows are in another order than config_keys()\n";
  if (out.empty()) out += "the table's header or a line's form differs\n";
  return out;
}

// The key table of `markdown`: from its header line to the last line starting with '|'.
std::string key_table_of(const std::string& markdown) {
  size_t begin = markdown.find("| key | default | meaning |\n");
  if (begin == std::string::npos) return "";
  size_t end = begin;
  while (end < markdown.size() && markdown[end] == '|') {
    size_t eol = markdown.find('\n', end);
    end = eol == std::string::npos ? markdown.size() : eol + 1;
  }
  return markdown.substr(begin, end - begin);
}

}  // namespace

TEST_CASE("config/README.md's key table is the one config_keys() declares") {
  const std::string readme = read_file(std::string(KPROXY_SOURCE_DIR) + "/config/README.md");
  REQUIRE_MESSAGE(!readme.empty(), "cannot read config/README.md");
  auto regenerated = with_key_table(readme);
  REQUIRE_MESSAGE(regenerated.has_value(), "config/README.md has no line '| key | default | meaning |'");
  if (*regenerated != readme) {
    FAIL_CHECK(
        "config/README.md's key table and config/config_keys.cc disagree (scripts/config-keys-table rewrites the table from "
        "the declarations):\n"
        << table_differences(key_table_of(readme), config_keys_markdown()));
  }
}

TEST_CASE("the table check names the key whose row differs") {
  const std::string declared = config_keys_markdown();
  std::string changed = declared;
  const std::string row = "| `metrics.frames` | `true` |";
  REQUIRE(changed.find(row) != std::string::npos);
  changed.replace(changed.find(row), row.size(), "| `metrics.frames` | `false` |");
  CHECK(with_key_table("intro\n\n" + changed + "\nmore\n") != "intro\n\n" + changed + "\nmore\n");
  CHECK(table_differences(changed, declared) == "`metrics.frames`: default differs: README '`false`', declared '`true`'\n");
  std::string missing = declared;
  missing.erase(missing.find("| `tap.records`"), missing.find('\n', missing.find("| `tap.records`")) + 1 - missing.find("| `tap.records`"));
  CHECK(table_differences(missing, declared) == "`tap.records`: declared, missing from config/README.md\n");
  CHECK(table_differences(declared + "| `tap.colour` | `red` | what colour |\n", declared) ==
        "`tap.colour`: in config/README.md, not declared in config/config_keys.cc\n");
  CHECK_FALSE(with_key_table("no table here\n").has_value());
}

TEST_CASE("every declared key is a path once, with a one-line meaning that fits a table cell") {
  std::map<std::string_view, int> seen;
  for (const KeySpec& k : config_keys()) {
    INFO(k.key);
    CHECK(++seen[k.key] == 1);
    CHECK_FALSE(k.key.empty());
    CHECK_FALSE(k.default_text.empty());
    CHECK_FALSE(k.doc.empty());
    CHECK(k.doc.find('\n') == std::string_view::npos);
    CHECK(k.doc.find(" | ") == std::string_view::npos);
    CHECK(k.default_text.find('|') == std::string_view::npos);
    CHECK(k.min <= k.max);
    if (k.kind == KeyKind::kChoice) CHECK_FALSE(k.choices.empty());
    if ((k.kind == KeyKind::kByteSize || k.kind == KeyKind::kDuration) && (k.min > 0 || k.max != kNoMaximum)) CHECK_FALSE(k.bad.empty());
  }
}

TEST_CASE("a row's target holds what its kind reads") {
  for (const KeySpec& k : config_keys()) {
    INFO(k.key);
    const auto& t = k.target;
    switch (k.kind) {
      case KeyKind::kFlag: CHECK((std::holds_alternative<std::monostate>(t) || std::holds_alternative<bool& (*)(Config&)>(t))); break;
      case KeyKind::kCount:
        CHECK((std::holds_alternative<std::monostate>(t) || std::holds_alternative<uint32_t& (*)(Config&)>(t) ||
               std::holds_alternative<size_t& (*)(Config&)>(t)));
        break;
      case KeyKind::kByteSize: CHECK((std::holds_alternative<std::monostate>(t) || std::holds_alternative<size_t& (*)(Config&)>(t))); break;
      case KeyKind::kDuration:
        CHECK((std::holds_alternative<std::monostate>(t) || std::holds_alternative<std::chrono::milliseconds& (*)(Config&)>(t)));
        break;
      case KeyKind::kString:
        CHECK((std::holds_alternative<std::monostate>(t) || std::holds_alternative<std::string& (*)(Config&)>(t)));
        break;
      case KeyKind::kHostPort:
        CHECK((std::holds_alternative<std::monostate>(t) || std::holds_alternative<std::optional<HostPort>& (*)(Config&)>(t)));
        break;
      case KeyKind::kChoice:
        CHECK((std::holds_alternative<std::monostate>(t) || std::holds_alternative<std::string& (*)(Config&)>(t) ||
               std::holds_alternative<void (*)(Config&, size_t)>(t)));
        break;
      case KeyKind::kBespoke: CHECK(std::holds_alternative<std::monostate>(t)); break;
    }
  }
}

TEST_CASE("a declared default is what Config holds when the key is not given") {
  // Each row whose default is one value in backticks (`true`, `64`, `30s`, `100MiB`, `text`)
  // is loaded with that value and compared with a load that leaves the key out.
  const std::string kMinimal = "listeners:\n  - listen: 127.0.0.1:9092\n    upstream: b:9092\n    broker_ports: 9100\n";
  auto without = load_config_string(kMinimal + "tracing: { endpoint: http://127.0.0.1:4318 }\n", "t.yaml");
  REQUIRE_MESSAGE(without.ok(), without.error_text());
  int compared = 0;
  for (const KeySpec& k : config_keys()) {
    if (std::holds_alternative<std::monostate>(k.target)) continue;
    std::string_view d = k.default_text;
    if (d.size() < 3 || d.front() != '`' || d.back() != '`' || d.find('`', 1) != d.size() - 1) continue;
    std::string value(d.substr(1, d.size() - 2));
    INFO(k.key, " = ", value);
    // "a.b.c: v" as nested mappings.
    std::string yaml;
    std::string_view rest = k.key;
    std::string indent;
    for (size_t dot; (dot = rest.find('.')) != std::string_view::npos; rest.remove_prefix(dot + 1)) {
      yaml += indent + std::string(rest.substr(0, dot)) + ":\n";
      indent += "  ";
    }
    yaml += indent + std::string(rest) + ": " + value + "\n";
    std::string extra = k.key.starts_with("tracing.") ? "" : "tracing: { endpoint: http://127.0.0.1:4318 }\n";
    if (k.key.starts_with("tracing.")) yaml.insert(yaml.find('\n') + 1, "  endpoint: http://127.0.0.1:4318\n");
    auto with = load_config_string(kMinimal + extra + yaml, "t.yaml");
    REQUIRE_MESSAGE(with.ok(), with.error_text());
    Config a = *without.config;
    Config b = *with.config;
    std::visit(
        [&](auto field) {
          using Field = decltype(field);
          if constexpr (std::is_same_v<Field, std::monostate>) {
          } else if constexpr (std::is_same_v<Field, void (*)(Config&, size_t)>) {
            CHECK(a.log.format == b.log.format);  // the one setter row
          } else if constexpr (std::is_same_v<Field, std::optional<HostPort>& (*)(Config&)>) {
            CHECK(field(a) == field(b));
          } else {
            CHECK(field(a) == field(b));
          }
        },
        k.target);
    ++compared;
  }
  CHECK(compared >= 30);
}

TEST_CASE("a mapping's known keys are the children of its rows") {
  CHECK(child_keys("") == std::vector<std::string_view>{"listeners", "admin", "toxiproxy", "metrics", "tap", "limits", "workers",
                                                        "drain_timeout", "log", "tracing", "api_versions", "faults"});
  CHECK(child_keys("admin") == std::vector<std::string_view>{"listen", "token_file", "token_env"});
  CHECK(child_keys("tracing.batch") == std::vector<std::string_view>{"max_spans", "interval"});
  CHECK(child_keys("listeners[].tls.certificates[]") == std::vector<std::string_view>{"cert", "key"});
  CHECK(child_keys("metrics") ==
        std::vector<std::string_view>{"frames", "error_codes", "transactions", "topic_labels", "client_id_labels", "max_label_values"});
  CHECK(child_keys("nothing").empty());
  const KeySpec* k = find_key("listeners[]");
  REQUIRE(k != nullptr);
  CHECK(k->name() == "listeners");
  CHECK(k->parent().empty());
  CHECK(find_key("tracing.batch.interval")->parent() == "tracing.batch");
  CHECK(find_key("tracing.batch.interval")->name() == "interval");
  CHECK(find_key("no.such.key") == nullptr);
}

TEST_CASE("the declared defaults of keys with bespoke readers are the structs' defaults") {
  auto value = [](std::string_view key) {
    const KeySpec* k = find_key(key);
    REQUIRE_MESSAGE(k != nullptr, key);
    std::string_view d = k->default_text;
    REQUIRE_MESSAGE((d.size() >= 3 && d.front() == '`' && d.back() == '`'), key);
    return std::string(d.substr(1, d.size() - 2));
  };
  CHECK(value("listeners[].max_broker_ports") == std::to_string(kDefaultMaxBrokerPorts));
  CHECK(value("listeners[].proxy_protocol") == (ListenerConfig{}.proxy_protocol ? "v2" : "off"));
  CHECK(parse_duration(value("listeners[].sni.client_hello_timeout")) == SniConfig{}.client_hello_timeout);
  CHECK(parse_byte_size(value("listeners[].sni.max_client_hello_bytes")) == SniConfig{}.max_client_hello_bytes);
  CHECK(value("listeners[].sni.unknown") == (SniConfig{}.unknown == UnknownServerName::kRefuse ? "refuse" : "bootstrap"));
  CHECK(value("listeners[].upstream_tls.verify_hostname") == (UpstreamTlsConfig{}.verify_hostname ? "true" : "false"));
  CHECK(value("listeners[].upstream_tls.min_version") == "\"1.2\"");
  CHECK(UpstreamTlsConfig{}.min_version == TlsVersion::kTls12);
  CHECK(value("listeners[].tls.min_version") == "\"1.2\"");
  CHECK(ServerTlsConfig{}.min_version == TlsVersion::kTls12);
  CHECK(find_key("listeners[].tls.client_auth")->default_text.starts_with("`none`"));
  CHECK(ServerTlsConfig{}.client_auth == ClientAuth::kNone);
}
