// GET /transactions and /transactions/{transactional_id} over HTTP, from a tracker fed by hand.
#include "proxy/admin/transaction_routes.h"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include "codec/generated/error_code.h"
#include "tests/unit/support/http_exchange.h"

using namespace kproxy;
using kproxy::observe::TxnApi;
using kproxy::observe::TxnClock;
using kproxy::observe::TxnRequest;
using kproxy::observe::TxnResponse;
using nlohmann::json;

namespace {

json get(uint16_t port, const std::string& path, int expect_status) {
  std::string raw = kproxy::testing::http_exchange(port, "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n");
  INFO(raw);
  REQUIRE(kproxy::testing::http_status_of(raw) == expect_status);
  return json::parse(raw.substr(raw.find("\r\n\r\n") + 4));
}

TxnRequest request(TxnApi api, std::string_view id) {
  TxnRequest r;
  r.api = api;
  r.transactional_id = id;
  r.producer_id = 21;
  r.producer_epoch = 0;
  r.client_id = "billing";
  return r;
}

}  // namespace

TEST_CASE("transaction routes: open transactions, an id's history with its cause, 404 for an unknown id") {
  auto tracker = std::make_shared<observe::TransactionTracker>();
  auto now = TxnClock::now();
  TxnRequest add = request(TxnApi::kAddPartitionsToTxn, "orders");
  add.partitions = {{"out", 3}};
  tracker->on_request(1, 1, add, now);
  TxnResponse abortable;
  abortable.error_code = static_cast<int16_t>(codec::ErrorCode::kTransactionAbortable);
  abortable.injected_by = "abortable";
  tracker->on_response(1, 1, abortable, now);
  tracker->on_request(1, 2, request(TxnApi::kEndTxn, "orders"), now);  // commit=false: an abort
  tracker->on_response(1, 2, TxnResponse{}, now);
  TxnRequest open = request(TxnApi::kAddPartitionsToTxn, "payments");
  open.partitions = {{"pay", 0}};
  tracker->on_request(2, 1, open, now);
  tracker->on_response(2, 1, TxnResponse{}, now);

  admin::AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  admin::AdminServer server(options);
  admin::register_transaction_routes(server, tracker);
  REQUIRE(server.start() == "");

  json list = get(server.port(), "/transactions", 200);
  CHECK(list["count"] == 1);
  REQUIRE(list["transactions"].size() == 1);
  CHECK(list["transactions"][0]["transactional_id"] == "payments");
  CHECK(list["transactions"][0]["outcome"] == "open");
  CHECK(list["transactions"][0]["partitions"] == json::parse(R"([{"topic":"pay","partition":0}])"));
  CHECK(list["transactions"][0]["client_id"] == "billing");
  CHECK(list["transactions"][0]["cause"].is_null());
  CHECK(list["transactions"][0]["fenced_by"].is_null());

  json history = get(server.port(), "/transactions/orders", 200);
  REQUIRE(history["transactions"].size() == 1);
  const json& t = history["transactions"][0];
  CHECK(t["outcome"] == "aborted");
  CHECK(t["transaction_version"] == 1);
  CHECK(t["cause"]["error"] == "TRANSACTION_ABORTABLE");
  CHECK(t["cause"]["api"] == "AddPartitionsToTxn");
  CHECK(t["cause"]["injected_by"] == "abortable");
  CHECK(t["last_error"]["error"] == "TRANSACTION_ABORTABLE");
  CHECK(t["duration_seconds"].get<double>() >= 0);

  get(server.port(), "/transactions/" + std::string(1025, 'x'), 400);  // past the documented 1024 characters
  json missing = get(server.port(), "/transactions/nobody", 404);
  CHECK(missing["error"].get<std::string>().find("nobody") != std::string::npos);
  server.stop();
}

TEST_CASE("transaction routes: a fenced transaction names the producer id and epoch that fenced it") {
  auto tracker = std::make_shared<observe::TransactionTracker>();
  auto now = TxnClock::now();
  TxnRequest init;
  init.api = TxnApi::kInitProducerId;
  init.transactional_id = "shared";
  TxnResponse given;
  given.producer_id = 21;
  given.producer_epoch = 0;
  tracker->on_request(1, 1, init, now);
  tracker->on_response(1, 1, given, now);
  TxnRequest add = request(TxnApi::kAddPartitionsToTxn, "shared");
  add.partitions = {{"out", 0}};
  tracker->on_request(1, 2, add, now);
  tracker->on_response(1, 2, TxnResponse{}, now);
  given.producer_epoch = 1;  // a new instance's InitProducerId (no producer id of its own)
  tracker->on_request(2, 1, init, now);
  tracker->on_response(2, 1, given, now);

  admin::AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  admin::AdminServer server(options);
  admin::register_transaction_routes(server, tracker);
  REQUIRE(server.start() == "");
  json history = get(server.port(), "/transactions/shared", 200);
  REQUIRE(history["transactions"].size() == 1);
  const json& t = history["transactions"][0];
  CHECK(t["outcome"] == "fenced");
  CHECK(t["producer_epoch"] == 0);
  CHECK(t["fenced_by"] == json::parse(R"({"producer_id":21,"producer_epoch":1})"));
  json open = get(server.port(), "/transactions", 200);
  CHECK(open["count"] == 0);
  server.stop();
}

TEST_CASE("transaction routes: ?ended=N adds the recent ended transactions of every id, newest first, and the counts by outcome") {
  auto tracker = std::make_shared<observe::TransactionTracker>();
  auto now = TxnClock::now() - std::chrono::seconds(10);
  int32_t correlation = 0;
  // "orders" commits, then "payments" aborts after an injected error, then "orders" commits again.
  auto transaction = [&](std::string_view id, int32_t partition, bool commit, TxnResponse add_answer) {
    TxnRequest add = request(TxnApi::kAddPartitionsToTxn, id);
    add.partitions = {{"out", partition}};
    ++correlation;
    tracker->on_request(1, correlation, add, now);
    tracker->on_response(1, correlation, add_answer, now);
    now += std::chrono::milliseconds(100);
    TxnRequest end = request(TxnApi::kEndTxn, id);
    end.commit = commit;
    ++correlation;
    tracker->on_request(1, correlation, end, now);
    tracker->on_response(1, correlation, TxnResponse{}, now);
    now += std::chrono::milliseconds(100);
  };
  transaction("orders", 1, true, TxnResponse{});
  TxnResponse abortable;
  abortable.error_code = static_cast<int16_t>(codec::ErrorCode::kTransactionAbortable);
  abortable.injected_by = "abortable";
  transaction("payments", 2, false, abortable);
  transaction("orders", 3, true, TxnResponse{});
  TxnRequest open = request(TxnApi::kAddPartitionsToTxn, "open-one");
  open.partitions = {{"pay", 1}};
  tracker->on_request(2, 1, open, now);
  tracker->on_response(2, 1, TxnResponse{}, now);

  admin::AdminServerOptions options;
  options.listen = "127.0.0.1:0";
  admin::AdminServer server(options);
  admin::register_transaction_routes(server, tracker);
  REQUIRE(server.start() == "");

  json plain = get(server.port(), "/transactions", 200);  // without ?ended: the open ones only, as before
  CHECK(plain["count"] == 1);
  CHECK_FALSE(plain.contains("ended"));
  CHECK_FALSE(plain.contains("outcomes"));

  json body = get(server.port(), "/transactions?ended=10", 200);
  CHECK(body["count"] == 1);
  CHECK(body["transactions"][0]["transactional_id"] == "open-one");
  REQUIRE(body["ended"].size() == 3);
  CHECK(body["ended"][0]["transactional_id"] == "orders");
  CHECK(body["ended"][0]["outcome"] == "committed");
  CHECK(body["ended"][1]["transactional_id"] == "payments");
  CHECK(body["ended"][1]["outcome"] == "aborted");
  CHECK(body["ended"][1]["cause"]["error"] == "TRANSACTION_ABORTABLE");
  CHECK(body["ended"][1]["cause"]["injected_by"] == "abortable");
  CHECK(body["ended"][2]["transactional_id"] == "orders");
  CHECK(body["ended"][0]["partitions"] == json::parse(R"([{"topic":"out","partition":3}])"));
  CHECK(body["ended"][2]["partitions"] == json::parse(R"([{"topic":"out","partition":1}])"));
  CHECK(body["ended"][0]["started_seconds_ago"].get<double>() < body["ended"][2]["started_seconds_ago"].get<double>());
  CHECK(body["outcomes"] == json::parse(R"({"committed":2,"aborted":1,"fenced":0,"timed_out":0,"unknown":0,"open":1})"));

  json one = get(server.port(), "/transactions?ended=1", 200);
  REQUIRE(one["ended"].size() == 1);
  CHECK(one["ended"][0]["partitions"] == json::parse(R"([{"topic":"out","partition":3}])"));
  CHECK(get(server.port(), "/transactions?ended=0", 200)["ended"].empty());
  CHECK(get(server.port(), "/transactions?ended=1000", 200)["ended"].size() == 3);
  for (const char* bad : {"1001", "-1", "x", "", "1e2", "99999"}) {
    json refused = get(server.port(), std::string("/transactions?ended=") + bad, 400);
    CHECK(refused["error"] == "ended: expected a whole number from 0 to 1000");
  }
  server.stop();
}
