// ConnectionState: the legal transitions, in one table.
#include "proxy/connection/connection_state.h"

#include <doctest/doctest.h>

using kproxy::proxy::can_transition;
using S = kproxy::proxy::ConnectionState;

TEST_CASE("connection state: a connection moves forward only") {
  CHECK(can_transition(S::kConnecting, S::kForwarding));
  CHECK(can_transition(S::kConnecting, S::kDraining));
  CHECK(can_transition(S::kConnecting, S::kClosing));
  CHECK(can_transition(S::kForwarding, S::kDraining));
  CHECK(can_transition(S::kForwarding, S::kClosing));
  CHECK(can_transition(S::kDraining, S::kClosing));
  CHECK(can_transition(S::kClosing, S::kClosed));

  CHECK_FALSE(can_transition(S::kForwarding, S::kConnecting));
  CHECK_FALSE(can_transition(S::kDraining, S::kForwarding));
  CHECK_FALSE(can_transition(S::kClosing, S::kForwarding));
  CHECK_FALSE(can_transition(S::kClosing, S::kDraining));
  CHECK_FALSE(can_transition(S::kConnecting, S::kClosed));  // handles close first
  for (S to : {S::kConnecting, S::kForwarding, S::kDraining, S::kClosing, S::kClosed}) CHECK_FALSE(can_transition(S::kClosed, to));
}

TEST_CASE("connection state: names") {
  CHECK(kproxy::proxy::state_name(S::kDraining) == "draining");
  CHECK(kproxy::proxy::state_name(S::kClosed) == "closed");
}
