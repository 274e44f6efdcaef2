#include "proxy/runtime/startup_check.h"

#include <doctest/doctest.h>

#include <cstdio>
#include <fstream>
#include <string>

#include <unistd.h>

#include "proxy/runtime/proxy.h"
#include "tests/unit/support/services.h"

using namespace kproxy;

namespace {

// A config file in the temp dir, removed at the end of the test.
struct TempConfig {
  std::string path;
  explicit TempConfig(const std::string& yaml) {
    char name[] = "/tmp/kproxy-startup-check-XXXXXX";
    int fd = ::mkstemp(name);
    REQUIRE(fd >= 0);
    ::close(fd);
    path = std::string(name) + ".yaml";
    std::rename(name, path.c_str());
    std::ofstream(path) << yaml;
  }
  ~TempConfig() { std::remove(path.c_str()); }
};

const char* kListener = R"(listeners:
  - name: k
    listen: 127.0.0.1:9092
    upstream: b:9092
    broker_ports: 9100
)";

runtime::StartupCheckOptions quiet() {
  runtime::StartupCheckOptions o;
  o.load.ephemeral_ports = nullptr;
  o.file_limit = {};
  return o;
}

// What Proxy::start says about the file, as lines ("" when the config does not even load).
std::vector<std::string> start_errors(const std::string& path) {
  auto loaded = config::load_config_file(path);
  if (!loaded.ok()) {
    std::vector<std::string> out;
    for (const auto& e : loaded.errors) out.push_back(e.to_string());
    return out;
  }
  testing::TestServices services;
  runtime::Proxy p(loaded.config, services.view());
  std::string error = p.start();
  std::vector<std::string> out;
  size_t start = 0;
  while (start < error.size()) {
    size_t end = error.find('\n', start);
    if (end == std::string::npos) end = error.size();
    if (end > start) out.push_back(error.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

TEST_CASE("check_startup refuses what the start refuses, with the same file:line:column lines (issue #15 bug 3)") {
  struct Case {
    std::string what;
    std::string yaml;
    std::string expected;  // the start of the first error, after "<path>:"
  };
  const std::vector<Case> cases = {
      {"unknown api in a fault rule",
       std::string(kListener) + "faults:\n  - name: x\n    match: {api: Produkt}\n    action: {error: PRODUCER_FENCED}\n",
       "8:13: faults[0].match.api: unknown API 'Produkt'"},
      {"unknown error in a fault rule",
       std::string(kListener) + "faults:\n  - name: x\n    match: {api: Produce}\n    action: {error: BOGUS}\n",
       "9:14: faults[0].action.error"},
      {"bad api_versions entry", std::string(kListener) + "api_versions:\n  - { api: Produkt, max: 3 }\n",
       "7:7: api_versions[0].api: unknown API"},
      // Before the loader checked the encoding, the start terminated on this (json::dump threw).
      {"invalid UTF-8 in api_versions",
       std::string(kListener) + "api_versions:\n  - { api: Pro\xff"
                                "duce, max: 3 }\n",
       "7:12: api_versions[0].api: not valid UTF-8"},
  };
  for (const auto& c : cases) {
    CAPTURE(c.what);
    TempConfig file(c.yaml);
    auto checked = runtime::check_startup(file.path, quiet());
    REQUIRE_FALSE(checked.ok());
    CHECK_MESSAGE(checked.errors[0].rfind(file.path + ":" + c.expected, 0) == 0, checked.errors[0]);
    // Proxy::start (what `kproxy --config` runs) says exactly the same.
    CHECK(start_errors(file.path) == checked.errors);
  }
}

TEST_CASE("check_startup: admin.listen on a listener's port is refused by the loader, for both") {
  TempConfig file(std::string(kListener) + "admin: { listen: 127.0.0.1:9092 }\n");
  auto checked = runtime::check_startup(file.path, quiet());
  REQUIRE(checked.errors.size() == 1);
  CHECK(checked.errors[0].rfind(file.path + ":6:18: admin.listen: port 9092 overlaps listeners[0].listen", 0) == 0);
  CHECK(start_errors(file.path) == checked.errors);
}

TEST_CASE("check_startup passes a good file and reports warnings with positions") {
  TempConfig file(std::string(kListener) + "admin: { listen: 127.0.0.1:40000 }\n");
  auto options = quiet();
  options.load.ephemeral_ports = [] { return std::optional<config::PortRange>(config::PortRange{32768, 60999}); };
  auto checked = runtime::check_startup(file.path, options);
  REQUIRE(checked.ok());
  REQUIRE(checked.warnings.size() == 1);
  CHECK(checked.warnings[0].rfind(file.path + ":6:18: warning: admin.listen: port 40000 overlaps the kernel's ephemeral port range", 0) ==
        0);
}

TEST_CASE("check_startup warns about listener globs that match no listener, and only about those") {
  TempConfig file(std::string(kListener) +
                  "faults:\n"
                  "  - { name: typo, match: {api: EndTxn, listener: kafak}, action: {error: PRODUCER_FENCED} }\n"
                  "  - { name: fine, match: {api: EndTxn, listener: 'k*'}, action: {error: PRODUCER_FENCED} }\n"
                  "api_versions:\n"
                  "  - { api: Produce, max: 9, listener: plain }\n"
                  "  - { api: Fetch, max: 12, listener: k }\n");
  auto checked = runtime::check_startup(file.path, quiet());
  REQUIRE(checked.ok());
  REQUIRE(checked.warnings.size() == 2);
  CHECK(checked.warnings[0] ==
        file.path + ": warning: fault rule 'typo': listener 'kafak' matches none of the listeners ('k'), so it never applies");
  CHECK(checked.warnings[1] ==
        file.path + ": warning: api_versions entry for Produce: listener 'plain' matches none of the listeners ('k'), so it never applies");
}

TEST_CASE("fd_budget counts connections twice, ports per worker, admin and slack") {
  auto loaded = config::load_config_string(
      std::string(kListener) + "    max_broker_ports: 10\nworkers: 2\nlimits: { max_connections: 100 }\n", "t.yaml");
  REQUIRE_MESSAGE(loaded.ok(), loaded.error_text());
  auto b = runtime::fd_budget(*loaded.config);
  CHECK(b.connections == 200);
  CHECK(b.listeners == 22);  // (1 + 10) × 2 workers
  CHECK(b.admin == 0);
  CHECK(b.total() == 200 + 22 + b.slack);
}

TEST_CASE("check_file_limit raises the soft limit to the hard one, and warns when even that is short") {
  auto loaded = config::load_config_string(std::string(kListener) + "workers: 1\nlimits: { max_connections: 1000 }\n", "t.yaml");
  REQUIRE(loaded.ok());
  const uint64_t need = runtime::fd_budget(*loaded.config).total();
  runtime::FileLimit limit{256, 1'000'000};
  std::vector<uint64_t> set;
  runtime::FileLimitAccess access;
  access.get = [&] { return std::optional<runtime::FileLimit>(limit); };
  access.set_soft = [&](uint64_t soft) {
    set.push_back(soft);
    limit.soft = soft;
    return true;
  };
  SUBCASE("the hard limit suffices: raised, no warning") {
    auto r = runtime::check_file_limit(*loaded.config, access, true);
    CHECK(r.warning.empty());
    REQUIRE(set.size() == 1);
    CHECK(set[0] == need);
    CHECK(r.raised.find("from 256 to " + std::to_string(need)) != std::string::npos);
  }
  SUBCASE("the hard limit is short: raised to it, and a warning with the numbers") {
    limit.hard = 512;
    auto r = runtime::check_file_limit(*loaded.config, access, true);
    REQUIRE(set.size() == 1);
    CHECK(set[0] == 512);
    CHECK(r.warning.find("RLIMIT_NOFILE) is 512 but this config may need " + std::to_string(need)) != std::string::npos);
    CHECK(r.warning.find("2000 for limits.max_connections") != std::string::npos);
  }
  SUBCASE("check-config does not raise; it warns only when the hard limit is short") {
    CHECK(runtime::check_file_limit(*loaded.config, access, false).warning.empty());
    limit.hard = 300;
    CHECK(runtime::check_file_limit(*loaded.config, access, false).warning.find("is 300 at most (the hard limit)") != std::string::npos);
    CHECK(set.empty());
  }
  SUBCASE("enough already: nothing") {
    limit.soft = need;
    auto r = runtime::check_file_limit(*loaded.config, access, true);
    CHECK(r.warning.empty());
    CHECK(r.raised.empty());
    CHECK(set.empty());
  }
}
