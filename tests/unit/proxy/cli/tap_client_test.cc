// kproxy tap's readable lines for transaction events (kproxy tap --transactions).
#include "proxy/cli/tap_client.h"

#include <unistd.h>

#include <mutex>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "proxy/admin/admin_server.h"
#include "tests/unit/support/captured_fd.h"
#include "tests/unit/support/test_ports.h"

using kproxy::cli::transaction_event_text;
using nlohmann::json;

namespace {

/// Runs `kproxy tap ARGS` and returns its exit status, with what it wrote to standard output
/// and standard error.
struct TapRun {
  int status = -1;
  std::string out, err;
};
TapRun run_tap(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  TapRun run;
  kproxy::testing::CapturedFd out(STDOUT_FILENO);
  kproxy::testing::CapturedFd err(STDERR_FILENO);
  run.status = kproxy::cli::run_tap_command(static_cast<int>(argv.size()), argv.data());
  run.err = err.finish();
  run.out = out.finish();
  return run;
}

/// An admin API (token "sesame") whose GET /tap streams `lines` and ends; it keeps what the
/// last request asked.
struct TapServer {
  std::vector<std::string> lines;
  std::mutex mutex;
  std::string query, authorization;
  kproxy::admin::AdminServer server{kproxy::admin::AdminServerOptions{"127.0.0.1:0", "sesame"}};

  explicit TapServer(std::vector<std::string> stream) : lines(std::move(stream)) {
    server.stream_route(
        "/tap", "application/x-ndjson", [](const kproxy::admin::HttpRequest&) { return kproxy::admin::HttpResponse{}; },
        [this](const kproxy::admin::HttpRequest& r, kproxy::admin::StreamWriter& w) {
          {
            std::lock_guard lock(mutex);
            query = r.query;
            authorization = r.header("authorization");
          }
          for (const auto& line : lines)
            if (!w.write(line + "\n")) return;
        });
    REQUIRE(server.start() == "");
  }
  std::string address() const { return "127.0.0.1:" + std::to_string(server.port()); }
};

}  // namespace

TEST_CASE("kproxy tap --transactions: one readable line per step") {
  CHECK(transaction_event_text("01:02:03.5", json::parse(R"({"transaction":"begin","transactional_id":"orders","producer_id":7,
        "producer_epoch":0,"api":"AddPartitionsToTxn","client_id":"billing"})")) ==
        "01:02:03.5 txn orders pid=7 epoch=0 begin client=billing (AddPartitionsToTxn)\n");
  CHECK(transaction_event_text("t", json::parse(R"({"transaction":"partitions_added","transactional_id":"o","producer_id":7,
        "producer_epoch":0,"api":"Produce","partitions":[{"topic":"out","partition":1},{"topic":"out","partition":2}]})")) ==
        "t txn o pid=7 epoch=0 partitions_added out-1,out-2 (Produce)\n");
  CHECK(transaction_event_text("t", json::parse(R"({"transaction":"error","transactional_id":"o","producer_id":7,"producer_epoch":0,
        "api":"EndTxn","error":"CONCURRENT_TRANSACTIONS","injected_by":"busy"})")) ==
        "t txn o pid=7 epoch=0 error EndTxn:CONCURRENT_TRANSACTIONS (injected by rule busy)\n");
  CHECK(transaction_event_text("t", json::parse(R"({"transaction":"end","transactional_id":"o","producer_id":7,"producer_epoch":0,
        "api":"EndTxn","outcome":"aborted","duration_ms":12.46,"records":10,
        "cause":{"api":"Produce","error":"TRANSACTION_ABORTABLE","injected_by":"abortable"}})")) ==
        "t txn o pid=7 epoch=0 end aborted after 12.5 ms, 10 records, cause Produce:TRANSACTION_ABORTABLE (rule abortable)\n");
  CHECK(transaction_event_text(
            "t", json::parse(R"({"transaction":"offsets_added","transactional_id":"o","group":"g","api":"AddOffsetsToTxn"})")) ==
        "t txn o pid=-1 epoch=-1 offsets_added group=g (AddOffsetsToTxn)\n");
}

TEST_CASE("kproxy tap --transactions: fields missing or of another type read '-' or -1; no cause, no rule when none") {
  CHECK(transaction_event_text("t", json::parse(R"({"transaction":"end","transactional_id":7})")) ==
        "t txn - pid=-1 epoch=-1 end - after 0.0 ms, 0 records\n");
  CHECK(transaction_event_text("t", json::parse(R"({"transaction":"error","transactional_id":"o","api":"Produce",
        "error":"NOT_LEADER_OR_FOLLOWER","injected_by":null})")) == "t txn o pid=-1 epoch=-1 error Produce:NOT_LEADER_OR_FOLLOWER\n");
  CHECK(transaction_event_text("t", json::parse(R"({"transaction":"end","transactional_id":"o","outcome":"committed",
        "duration_ms":0.04,"records":3,"cause":null})")) == "t txn o pid=-1 epoch=-1 end committed after 0.0 ms, 3 records\n");
  CHECK(transaction_event_text("t", json::parse(R"({"transaction":"end","transactional_id":"o","outcome":"aborted",
        "cause":{"error":"INVALID_TXN_STATE"}})")) ==
        "t txn o pid=-1 epoch=-1 end aborted after 0.0 ms, 0 records, cause ?:INVALID_TXN_STATE\n");
  // Partitions that are not objects are skipped; a kind the client does not know prints its name only.
  CHECK(transaction_event_text("t", json::parse(R"({"transaction":"partitions_added","transactional_id":"o","api":"Produce",
        "partitions":["x",{"topic":"out"}]})")) == "t txn o pid=-1 epoch=-1 partitions_added out-0 (Produce)\n");
  CHECK(transaction_event_text("t", json::parse(R"({"transaction":"later","transactional_id":"o"})")) == "t txn o pid=-1 epoch=-1 later\n");
}

TEST_CASE("kproxy tap: GET /tap with the filters URL-encoded and the token; one readable line per frame, raw lines with --json") {
  TapServer tap({
      R"({"ts":"2024-01-02T01:02:03.000004Z","connection":5,"client_id":"app","direction":"request","api":"Produce","version":9,)"
      R"("correlation_id":12,"body":{"acks":-1}})",
      R"({"ts":"2024-01-02T01:02:03.000009Z","connection":5,"client_id":"app","direction":"response","api":"Produce","version":9,)"
      R"("correlation_id":12,"latency_ms":1.5,"client_software":{"name":"kgo","version":"1.0"}})",
      "",  // keep-alive
      R"({"dropped":3})",
      "not json",
      R"({"ts":"2024-01-02T01:02:04.5Z","transaction":"begin","transactional_id":"o","producer_id":7,"producer_epoch":0,)"
      R"("api":"AddPartitionsToTxn","client_id":"app"})",
  });
  auto run = run_tap(
      {"--admin", tap.address(), "--token", "sesame", "--api", "Produce", "--client-id", "a b&c", "--errors", "--direction", "response"});
  INFO(run.err);
  CHECK(run.status == 0);
  {
    std::lock_guard lock(tap.mutex);
    CHECK(tap.query == "api=Produce&client_id=a%20b%26c&errors=true&direction=response");
    CHECK(tap.authorization == "Bearer sesame");
  }
  CHECK(run.out.find("01:02:03.000004Z conn=5 client=app -> Produce v9 corr=12 {\"acks\":-1}\n") != std::string::npos);
  CHECK(run.out.find("01:02:03.000009Z conn=5 client=app <- Produce v9 corr=12 1.500ms [kgo 1.0]\n") != std::string::npos);
  CHECK(run.out.find("... 3 events dropped (reader too slow)\n") != std::string::npos);
  CHECK(run.out.find("\nnot json\n") != std::string::npos);
  CHECK(run.out.find("01:02:04.5Z txn o pid=7 epoch=0 begin client=app (AddPartitionsToTxn)\n") != std::string::npos);
  CHECK(run.out.find("\n\n") == std::string::npos);  // the keep-alive prints nothing

  auto raw = run_tap({"--admin", tap.address(), "--token", "sesame", "--json", "--transactions"});
  CHECK(raw.status == 0);
  {
    std::lock_guard lock(tap.mutex);
    CHECK(tap.query == "transactions=true");
  }
  CHECK(raw.out.find(tap.lines[0] + "\n" + tap.lines[1] + "\n" + tap.lines[3] + "\nnot json\n" + tap.lines[5] + "\n") != std::string::npos);
}

TEST_CASE("kproxy tap: a refusal exits 1 and says why, nobody listening exits 1, an unknown option exits 2") {
  TapServer tap({R"({"dropped":1})"});
  auto refused = run_tap({"--admin", tap.address(), "--token", "wrong"});
  CHECK(refused.status == 1);
  CHECK(refused.err.find("kproxy tap: HTTP 401: ") != std::string::npos);
  CHECK(refused.out.find("events dropped") == std::string::npos);  // the refusal's body is no frame

  const uint16_t nobody = kproxy::testing::reserved_port();
  auto unreachable = run_tap({"--admin", "127.0.0.1:" + std::to_string(nobody)});
  CHECK(unreachable.status == 1);
  CHECK(unreachable.err.find("kproxy tap: ") != std::string::npos);

  auto bad = run_tap({"--admin", tap.address(), "--bogus"});
  CHECK(bad.status == 2);
  CHECK(bad.err.find("usage: kproxy tap") != std::string::npos);
  auto unreadable = run_tap({"--token-file", "/nonexistent/kproxy-token"});
  CHECK(unreadable.status == 2);
  CHECK(unreadable.err.find("cannot read the token file '/nonexistent/kproxy-token'") != std::string::npos);
}
