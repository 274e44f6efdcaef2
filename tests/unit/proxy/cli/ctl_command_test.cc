#include "proxy/cli/ctl_command.h"

#include <algorithm>
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

TEST_CASE("kproxy ctl: the admin address comes from $KPROXY_ADMIN unless --admin gives one") {
  ::setenv("KPROXY_ADMIN", "127.0.0.1:19644", 1);
  CHECK(parse_ok({"faults", "list"}).admin == "127.0.0.1:19644");
  CHECK(parse_ok({"faults", "list", "--admin", "127.0.0.1:7"}).admin == "127.0.0.1:7");
  ::setenv("KPROXY_ADMIN", "", 1);
  CHECK(parse_ok({"transactions"}).admin == "127.0.0.1:9644");
  ::unsetenv("KPROXY_ADMIN");
  CHECK(parse_ok({"transactions"}).admin == "127.0.0.1:9644");
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

TEST_CASE("faults list: --json keeps the JSON; the table has one aligned row per rule") {
  CHECK(parse_ok({"--json", "faults", "list"}).json);
  CHECK_FALSE(parse_ok({"faults", "list"}).json);
  auto rules = nlohmann::json::parse(R"([
    {"name": "endtxn-busy", "match": {"api": "EndTxn", "transactional_id": "orders-*"},
     "action": {"answer": "CONCURRENT_TRANSACTIONS"}, "trigger": {"times": 2}, "hits": 3, "injected": 2},
    {"name": "slow", "action": {"delay": "200ms"}, "hits": 0, "injected": 0}])");
  std::string table = kproxy::cli::fault_table(rules);
  std::vector<std::string> lines;
  for (size_t at = 0, nl; (nl = table.find('\n', at)) != std::string::npos; at = nl + 1) lines.push_back(table.substr(at, nl - at));
  REQUIRE(lines.size() == 3);
  CHECK(lines[0].rfind("NAME", 0) == 0);
  CHECK(lines[1].find("EndTxn transactional_id=orders-*") != std::string::npos);
  CHECK(lines[1].find("answer=CONCURRENT_TRANSACTIONS") != std::string::npos);
  CHECK(lines[1].find("times=2") != std::string::npos);
  CHECK(lines[2].find("always") != std::string::npos);  // no trigger: every hit
  CHECK(lines[2].find('*') != std::string::npos);       // no api: every API
  // Columns line up: HITS starts at the same offset in every row.
  size_t hits = lines[0].find("HITS");
  CHECK(lines[1].substr(hits, 1) == "3");
  CHECK(lines[2].substr(hits, 1) == "0");
  CHECK(kproxy::cli::fault_table(nlohmann::json::array()) == "no fault rules\n");
}

TEST_CASE("scenario apply reads the file; show and clear need no argument") {
  std::string path = "/tmp/kproxy-ctl-scenario-" + std::to_string(::getpid()) + ".yaml";
  {
    std::ofstream f(path);
    f << "scenario: s1\ndescription: x\nfaults: [{name: a, action: {delay: 1ms}}]\n";
  }
  auto call = parse_ok({"scenario", "apply", path});
  CHECK(call.method == "PUT");
  CHECK(call.path == "/scenario");
  CHECK(call.body.find("scenario: s1") == 0);
  std::remove(path.c_str());
  CHECK(parse_ok({"scenario", "show"}).method == "GET");
  CHECK(parse_ok({"scenario", "clear"}).method == "DELETE");
  CHECK(parse_error({"scenario", "apply", "/nonexistent/s.yaml"}).find("cannot read /nonexistent/s.yaml") == 0);
  CHECK(parse_error({"scenario", "apply"}) == "expected: kproxy ctl scenario apply FILE");
  CHECK(parse_error({"scenario", "run"}).find("unknown scenario command 'run'") == 0);
}

TEST_CASE("kproxy ctl transactions: list and show map to the admin API; the id is one encoded path segment") {
  auto list = parse_ok({"transactions"});
  CHECK(list.method == "GET");
  CHECK(list.path == "/transactions?ended=20");  // the open ones, the last 20 ended ones, the counts
  CHECK(parse_ok({"transactions", "list"}).path == "/transactions?ended=20");
  CHECK(parse_ok({"transactions", "--last", "5"}).path == "/transactions?ended=5");
  CHECK(parse_ok({"transactions", "--last=0", "--json"}).path == "/transactions?ended=0");
  CHECK(parse_ok({"transactions", "--json"}).json);
  CHECK(parse_ok({"transactions", "--open"}).path == "/transactions");  // today's view: open ones only
  CHECK(parse_ok({"--open", "transactions", "list"}).path == "/transactions");
  CHECK(parse_error({"transactions", "--last", "1001"}).find("--last: expected a whole number from 0 to 1000") == 0);
  CHECK(parse_error({"transactions", "--last", "-3"}).find("--last: expected") == 0);
  CHECK(parse_error({"transactions", "--last", "5x"}).find("--last: expected") == 0);
  CHECK(parse_error({"transactions", "--last"}) == "--last needs a value");
  CHECK(parse_error({"transactions", "--last", "3", "--open"}).find("--open lists the open transactions only") == 0);
  CHECK(parse_error({"transactions", "show", "x", "--open"}) == "--open applies to `transactions [list]` only");
  CHECK(parse_error({"faults", "list", "--last", "3"}) == "--last applies to `transactions [list]` only");
  CHECK(parse_ok({"transactions", "list", "--admin", "127.0.0.1:1"}).admin == "127.0.0.1:1");
  auto show = parse_ok({"transactions", "show", "orders/eu 1"});
  CHECK(show.path == "/transactions/orders%2Feu%201");
  CHECK(parse_error({"transactions", "show"}).find("transactions show TRANSACTIONAL_ID") != std::string::npos);
  CHECK(parse_error({"transactions", "abort", "x"}).find("unknown transactions command") != std::string::npos);
}

TEST_CASE("kproxy ctl transactions: a table with age, partitions and the last error's rule") {
  auto rows = nlohmann::json::parse(R"([
    {"transactional_id":"orders","producer_id":7,"producer_epoch":2,"outcome":"open","started_seconds_ago":12.34,
     "partitions":[{"topic":"out","partition":0},{"topic":"out","partition":3}],"records":40,"retries":1,"client_id":"billing",
     "last_error":{"api":"EndTxn","error":"CONCURRENT_TRANSACTIONS","injected_by":"busy","seconds_ago":1.0}},
    {"transactional_id":"payments","producer_id":9,"producer_epoch":0,"outcome":"open","started_seconds_ago":0.5,
     "partitions":[],"records":0,"retries":0,"client_id":"pay","last_error":null}
  ])");
  std::string table = kproxy::cli::transaction_table(rows);
  INFO(table);
  CHECK(table.rfind("TRANSACTIONAL_ID", 0) == 0);
  CHECK(table.find("orders") < table.find("payments"));  // the order the API gives (oldest first)
  CHECK(table.find("12.3") != std::string::npos);
  CHECK(table.find("out-0,out-3") != std::string::npos);
  CHECK(table.find("EndTxn:CONCURRENT_TRANSACTIONS (rule busy)") != std::string::npos);
  CHECK(std::count(table.begin(), table.end(), '\n') == 3);
  CHECK(kproxy::cli::transaction_table(nlohmann::json::array()) == "no transactions\n");
  CHECK(kproxy::cli::text_table({{"A", "BB"}, {"ccc", "d"}}) == "A    BB\nccc  d\n");
}

TEST_CASE("kproxy transactions: open ones, then the ended ones newest first with cause and rules, then the counts") {
  auto body = nlohmann::json::parse(R"({
    "count": 0, "transactions": [],
    "ended": [
      {"transactional_id":"demo-chaos","producer_id":8,"producer_epoch":0,"outcome":"committed","started_seconds_ago":2.5,
       "duration_seconds":1.25,"records":100,"retries":1,"cause":null,"errors_dropped":0,
       "errors":[{"api":"EndTxn","error":"NOT_COORDINATOR","injected_by":"coordinator-moved","seconds_ago":1.5}]},
      {"transactional_id":"demo-chaos","producer_id":8,"producer_epoch":0,"outcome":"aborted","started_seconds_ago":9.0,
       "duration_seconds":0.5,"records":100,"retries":0,"errors_dropped":2,
       "cause":{"api":"Produce","error":"TRANSACTION_ABORTABLE","injected_by":"abortable","seconds_ago":8.6},
       "errors":[{"api":"Produce","error":"TRANSACTION_ABORTABLE","injected_by":"abortable","seconds_ago":8.6}]},
      {"transactional_id":"demo","producer_id":7,"producer_epoch":0,"outcome":"aborted","started_seconds_ago":20.0,
       "duration_seconds":0.1,"records":5,"retries":0,"cause":null,"errors":[],"errors_dropped":0},
      {"transactional_id":"old","producer_id":6,"producer_epoch":3,"outcome":"fenced","started_seconds_ago":30.0,
       "duration_seconds":1.0,"records":0,"retries":0,"cause":null,"errors":[],"errors_dropped":0,
       "fenced_by":{"producer_id":6,"producer_epoch":4}}
    ],
    "outcomes": {"committed":10,"aborted":2,"fenced":1,"timed_out":0,"unknown":0,"open":0}
  })");
  std::string text = kproxy::cli::transaction_overview(body);
  INFO(text);
  CHECK(text.rfind("Open transactions: none\n", 0) == 0);
  CHECK(text.find("Ended transactions, newest first (the last 4):\n") != std::string::npos);
  // The API's order is kept (newest first): the committed one, then the aborted ones, then the fenced one.
  CHECK(text.find("committed") < text.find("TRANSACTION_ABORTABLE"));
  CHECK(text.find("TRANSACTION_ABORTABLE") < text.find("the client aborted"));
  CHECK(text.find("the client aborted") < text.find("a new producer (id 6, epoch 4)"));
  CHECK(text.find("EndTxn:NOT_COORDINATOR (rule coordinator-moved)") != std::string::npos);
  CHECK(text.find("Produce:TRANSACTION_ABORTABLE (rule abortable) +2 more") != std::string::npos);
  CHECK(text.find("1.250") != std::string::npos);    // duration
  CHECK(text.find("  1.2  ") != std::string::npos);  // ended 2.5 - 1.25 s ago
  CHECK(text.find("Since start: 10 committed, 2 aborted, 1 fenced, 0 timed_out, 0 unknown; 0 open\n") != std::string::npos);

  auto open = nlohmann::json::parse(R"({"count":1,"transactions":[{"transactional_id":"orders","producer_id":7,"producer_epoch":2,
    "outcome":"open","started_seconds_ago":3.0,"partitions":[{"topic":"out","partition":1}],"records":4,"retries":0,
    "client_id":"billing","last_error":null}],"ended":[],"outcomes":{"committed":0,"aborted":0,"fenced":0,"timed_out":0,"unknown":0,"open":1}})");
  std::string first = kproxy::cli::transaction_overview(open);
  INFO(first);
  CHECK(first.rfind("Open transactions (1), oldest first:\nTRANSACTIONAL_ID", 0) == 0);
  CHECK(first.find("out-1") != std::string::npos);
  CHECK(first.find("Ended transactions: none yet\n") != std::string::npos);
  CHECK(first.find("; 1 open\n") != std::string::npos);
}

TEST_CASE("ctl: kproxy transactions says when a commit's EndTxn answer was lost and sent again (issue #44)") {
  auto body = nlohmann::json::parse(R"({"count":0,"transactions":[],"ended":[
    {"transactional_id":"a","producer_id":1,"producer_epoch":0,"outcome":"committed","started_seconds_ago":9,"duration_seconds":1,
     "records":10,"retries":0,"errors":[],"errors_dropped":0,"cause":null,"end_acknowledged":true,"end_retries":1},
    {"transactional_id":"b","producer_id":2,"producer_epoch":0,"outcome":"committed","started_seconds_ago":8,"duration_seconds":1,
     "records":10,"retries":0,"errors":[],"errors_dropped":0,"cause":null,"end_acknowledged":false,"end_retries":0},
    {"transactional_id":"c","producer_id":3,"producer_epoch":0,"outcome":"committed","started_seconds_ago":7,"duration_seconds":1,
     "records":10,"retries":0,"errors":[],"errors_dropped":0,"cause":null,"end_acknowledged":true,"end_retries":0}],
    "outcomes":{"committed":3,"aborted":0,"fenced":0,"timed_out":0,"unknown":0,"open":0}})");
  std::string text = kproxy::cli::transaction_overview(body);
  INFO(text);
  CHECK(text.find("EndTxn answer lost; sent again 1x") != std::string::npos);
  CHECK(text.find("EndTxn answer lost; not told yet") != std::string::npos);
  CHECK(text.find("EndTxn answer lost") < text.find("EndTxn answer lost; not told yet"));
  // The third one's answer arrived at once: nothing said.
  auto third = text.find("\nc ");
  REQUIRE(third != std::string::npos);
  CHECK(text.find("EndTxn", third) == std::string::npos);
}
