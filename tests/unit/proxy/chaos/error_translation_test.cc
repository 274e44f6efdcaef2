#include "proxy/chaos/error_translation.h"

#include <doctest/doctest.h>

using kproxy::chaos::refuse_error;
using kproxy::chaos::translate_error;

TEST_CASE("PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH for old versions, as the broker sends") {
  CHECK(translate_error(22, 3, 90) == 47);  // InitProducerId v3
  CHECK(translate_error(22, 4, 90) == 90);
  CHECK(translate_error(26, 1, 90) == 47);  // EndTxn v1
  CHECK(translate_error(26, 2, 90) == 90);
  CHECK(translate_error(25, 1, 90) == 47);  // AddOffsetsToTxn v1
  CHECK(translate_error(24, 1, 90) == 47);  // AddPartitionsToTxn v1
}

TEST_CASE("TRANSACTION_ABORTABLE becomes INVALID_TXN_STATE before KIP-890's versions") {
  CHECK(translate_error(0, 10, 120) == 48);  // Produce v10
  CHECK(translate_error(0, 11, 120) == 120);
  CHECK(translate_error(28, 3, 120) == 48);  // TxnOffsetCommit v3
  CHECK(translate_error(28, 4, 120) == 120);
  CHECK(translate_error(24, 4, 120) == 48);
  CHECK(translate_error(24, 5, 120) == 120);
  CHECK(translate_error(26, 3, 120) == 48);
  CHECK(translate_error(16, 0, 15) == 15);  // others untouched
}

TEST_CASE("CONCURRENT_TRANSACTIONS on Produce is NOT_ENOUGH_REPLICAS before transaction.version 2's v12") {
  CHECK(translate_error(0, 11, 51) == 19);  // Produce v11: the leader's verification error, translated
  CHECK(translate_error(0, 3, 51) == 19);
  CHECK(translate_error(0, 12, 51) == 51);  // Produce v12 (KIP-890 part 2): sent as it is
  CHECK(translate_error(0, 13, 51) == 51);
  CHECK(translate_error(26, 0, 51) == 51);  // EndTxn and the coordinator's other APIs carry it at every version
  CHECK(translate_error(22, 0, 51) == 51);
}

TEST_CASE("codes no version of an API carries are refused") {
  CHECK(!refuse_error(10, 120).empty());
  CHECK(refuse_error(0, 120).empty());
  CHECK(!refuse_error(26, 105).empty());
  CHECK(refuse_error(65, 105).empty());
}
