// Fuzz target: the transaction tracker against its reference model (issue #44;
// tests/unit/support/txn_model.h). The input's bytes make every choice the seeded unit test
// (tests/unit/proxy/observe/transaction_tracker_model_test.cc) draws at random: the protocol,
// which fault falls on which exchange, commit or abort, new instances of the id. Property: the
// tracker's outcomes for the id equal the producer's own account, transaction by transaction.
#include <cstdint>
#include <string>

#include "proxy/observe/transaction_tracker.h"
#include "tests/fuzz/fuzz_common.h"
#include "tests/unit/support/txn_model.h"

using namespace kproxy;
using namespace kproxy::testing::txn_model;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const bool tv2 = data[0] & 1;
  const uint32_t fault_percent = data[1] % 101;
  size_t at = 2;
  // Past the input's end every choice is 0: no faults, so every transaction ends.
  Choose choose = [&](uint32_t bound) -> uint32_t {
    if (at >= size) return 0;
    return data[at++] % bound;
  };
  observe::TransactionTracker::Limits limits;
  limits.history_per_id = 200;
  observe::TransactionTracker tracker(limits);
  TrackerSink sink(tracker);
  Coordinator coordinator;
  coordinator.tv2 = tv2;
  Producer producer(tv2, "fuzzed", coordinator, sink, choose, fault_percent);
  producer.init();
  for (int i = 0; i < 64 && at < size; ++i) producer.transaction();
  const auto& expected = producer.account();
  const auto tracked = tracked_outcomes(tracker, "fuzzed");
  if (tracked != expected) {
    std::string msg = "tracker outcomes differ from the producer's account (tv2=" + std::to_string(tv2) + "): expected";
    for (auto o : expected) msg += " " + std::string(observe::txn_outcome_name(o));
    msg += "; tracked";
    for (auto o : tracked) msg += " " + std::string(observe::txn_outcome_name(o));
    fuzz::violation(msg);
  }
  return 0;
}
