// The admin routes over the transactions kproxy rebuilt from the wire (docs/transactions.md):
//
//   GET /transactions                       open transactions, oldest first
//   GET /transactions?ended=N               the same, plus the N most recent ended transactions
//                                           across ids (newest first, N <= 1000) and the counts
//                                           by outcome since start
//   GET /transactions/{transactional_id}    the id's recent transactions (bounded history), then its
//                                           open one; 404 for an id kproxy does not track
#pragma once

#include <memory>

#include <nlohmann/json.hpp>

#include "proxy/admin/admin_server.h"
#include "proxy/observe/transaction_tracker.h"

namespace kproxy::admin {

void register_transaction_routes(AdminServer& server, std::shared_ptr<observe::TransactionTracker> tracker);

/// One transaction as the routes show it; times relative to `now`.
nlohmann::json transaction_json(const observe::TransactionRecord& t, observe::TxnClock::time_point now);

}  // namespace kproxy::admin
