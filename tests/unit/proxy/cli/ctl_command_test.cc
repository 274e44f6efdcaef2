#include "proxy/cli/ctl_command.h"

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include <doctest/doctest.h>

using kproxy::cli::CtlCall;
using kproxy::cli::parse_ctl_args;

namespace {
CtlCall parse_ok(std::vector<std::string> args) {
  CtlCall call;
  std::string error;
  bool ok = parse_ctl_args(args, call, error);
  INFO(error);
  CHECK(ok);
  return call;
}
std::string parse_error(std::vector<std::string> args) {
  CtlCall call;
  std::string error;
  CHECK(!parse_ctl_args(args, call, error));
  return error;
}
}  // namespace

TEST_CASE("kproxy ctl maps commands to admin API calls") {
  ::unsetenv("KPROXY_ADMIN_TOKEN");
  auto list = parse_ok({"faults", "list"});
  CHECK(list.method == "GET");
  CHECK(list.path == "/faults");
  CHECK(list.admin == "127.0.0.1:9644");
  CHECK(list.token.empty());
  auto put = parse_ok({"--admin", "127.0.0.1:1234", "--token=s3cret", "faults", "put", "slow", R"({"action":{"delay":100}})"});
  CHECK(put.method == "PUT");
  CHECK(put.path == "/faults/slow");
  CHECK(put.body == R"({"action":{"delay":100}})");
  CHECK(put.admin == "127.0.0.1:1234");
  CHECK(put.token == "s3cret");
  CHECK(parse_ok({"faults", "get", "a.b-c_d"}).path == "/faults/a.b-c_d");
  auto del = parse_ok({"faults", "delete", "slow"});
  CHECK((del.method == "DELETE" && del.path == "/faults/slow"));
  auto reset = parse_ok({"faults", "reset"});
  CHECK((reset.method == "POST" && reset.path == "/faults/reset"));
  CHECK(parse_ok({"api-versions", "get"}).path == "/api-versions");
  auto av = parse_ok({"api-versions", "put", R"([{"api":"Produce","max":9}])"});
  CHECK((av.method == "PUT" && av.body == R"([{"api":"Produce","max":9}])"));
  auto feature = parse_ok({"api-versions", "put", R"([{"feature":"transaction.version","max":1,"client_id":"legacy-*"}])"});
  CHECK((feature.method == "PUT" && feature.path == "/api-versions" &&
         feature.body == R"([{"feature":"transaction.version","max":1,"client_id":"legacy-*"}])"));
  CHECK(std::string(kproxy::cli::ctl_usage()).find("transaction.version") != std::string::npos);
  auto reload = parse_ok({"reload", "--admin", "[::1]:9"});
  CHECK((reload.method == "POST" && reload.path == "/reload" && reload.admin == "[::1]:9"));
  CHECK(parse_ok({"--help"}).help);
  CHECK(parse_ok({"faults", "-h"}).help);
}

TEST_CASE("kproxy ctl reads a body from @FILE and the token from the environment") {
  std::string path = "/tmp/kproxy-ctl-test-" + std::to_string(::getpid()) + ".json";
  {
    std::ofstream f(path);
    f << R"({"action":{"close":"before"}})";
  }
  ::setenv("KPROXY_ADMIN_TOKEN", "from-env", 1);
  auto put = parse_ok({"faults", "put", "c", "@" + path});
  CHECK(put.body == R"({"action":{"close":"before"}})");
  CHECK(put.token == "from-env");
  CHECK(parse_ok({"--token", "flag", "faults", "list"}).token == "flag");  // the flag wins
  ::unsetenv("KPROXY_ADMIN_TOKEN");
  std::remove(path.c_str());
  CHECK(parse_error({"faults", "put", "c", "@" + path}).rfind("cannot read " + path, 0) == 0);
}

TEST_CASE("kproxy ctl usage errors say what was expected") {
  CHECK(parse_error({}) == "no command given");
  CHECK(parse_error({"fault", "list"}).find("unknown command 'fault'") == 0);
  CHECK(parse_error({"faults", "show"}).find("unknown faults command 'show'") == 0);
  CHECK(parse_error({"faults", "put", "x"}) == "expected: kproxy ctl faults put NAME RULE (RULE: JSON, @FILE or -)");
  CHECK(parse_error({"faults", "get", "a/b"}).find("not a valid rule name") != std::string::npos);
  CHECK(parse_error({"faults", "list", "extra"}) == "expected: kproxy ctl faults list");
  CHECK(parse_error({"--admin"}) == "--admin needs a value");
  CHECK(parse_error({"--bogus", "faults", "list"}) == "unknown option --bogus");
  CHECK(parse_error({"api-versions", "set", "[]"}).find("unknown api-versions command 'set'") == 0);
  CHECK(std::string(kproxy::cli::ctl_usage()).find("faults put NAME RULE") != std::string::npos);
  CHECK(std::string(kproxy::cli::ctl_usage()).find("docs/admin-api.openapi.yaml") != std::string::npos);
}
