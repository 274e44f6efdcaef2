// ConnectionState: the legal transitions, in one table.
#include "proxy/connection/connection_state.h"

#include <doctest/doctest.h>

using kproxy::connection::can_transition;
using S = kproxy::connection::ConnectionState;

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

TEST_CASE("connection state: the preamble ends routed (connecting), or forwarding when the upstream connected meanwhile") {
  CHECK(can_transition(S::kPreamble, S::kConnecting));
  CHECK(can_transition(S::kPreamble, S::kForwarding));  // a PROXY header read after the upstream connected
  CHECK(can_transition(S::kPreamble, S::kDraining));    // kproxy shuts down while a ClientHello is awaited
  CHECK(can_transition(S::kPreamble, S::kClosing));
  CHECK_FALSE(can_transition(S::kPreamble, S::kClosed));
  for (S from : {S::kConnecting, S::kForwarding, S::kDraining, S::kClosing, S::kClosed}) CHECK_FALSE(can_transition(from, S::kPreamble));
}

TEST_CASE("connection state: names") {
  CHECK(kproxy::connection::state_name(S::kPreamble) == "preamble");
  CHECK(kproxy::connection::state_name(S::kDraining) == "draining");
  CHECK(kproxy::connection::state_name(S::kClosed) == "closed");
}
