// kproxy tap's readable lines for transaction events (kproxy tap --transactions).
#include "proxy/cli/tap_client.h"

#include <doctest/doctest.h>

using kproxy::cli::transaction_event_text;
using nlohmann::json;

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
