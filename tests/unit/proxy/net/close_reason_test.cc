// close_label: one fixed metric label per CloseCategory, whatever the detail says.
#include "proxy/net/close_reason.h"

#include <set>
#include <string>

#include <doctest/doctest.h>

using kproxy::net::close_label;
using kproxy::net::CloseCategory;
using kproxy::net::kCloseCategories;

TEST_CASE("close_label: each category has its own label") {
  CHECK(close_label(CloseCategory::kClientClosed) == "client_closed");
  CHECK(close_label(CloseCategory::kBrokerClosed) == "broker_closed");
  CHECK(close_label(CloseCategory::kUpstreamConnectFailed) == "upstream_connect_failed");
  CHECK(close_label(CloseCategory::kClientProtocolError) == "client_protocol_error");
  CHECK(close_label(CloseCategory::kBrokerProtocolError) == "broker_protocol_error");
  CHECK(close_label(CloseCategory::kTls) == "tls");
  CHECK(close_label(CloseCategory::kLimit) == "limit");
  CHECK(close_label(CloseCategory::kFault) == "fault");
  CHECK(close_label(CloseCategory::kShutdown) == "shutdown");
  CHECK(close_label(CloseCategory::kSelfConnection) == "self_connection");
  CHECK(close_label(CloseCategory::kUnanswered) == "unanswered");
  CHECK(close_label(CloseCategory::kOther) == "other");
  std::set<std::string> labels;
  for (size_t i = 0; i < kCloseCategories; ++i) labels.emplace(close_label(static_cast<CloseCategory>(i)));
  CHECK(labels.size() == kCloseCategories);
}

TEST_CASE("close_label: the detail text never moves a close to another label") {
  // The old text-sorted labels counted "client closed the connection" as a connect failure.
  kproxy::net::CloseReason r{CloseCategory::kClientClosed, "client closed the connection (upstream connect broker fault)"};
  CHECK(close_label(r.category) == "client_closed");
}

TEST_CASE("close_label: the timeout categories have labels of their own; a reason says other until categorised") {
  CHECK(close_label(CloseCategory::kRequestTimeout) == "request_timeout");
  CHECK(close_label(CloseCategory::kFirstRequestTimeout) == "first_request_timeout");
  // A CloseReason made without a category counts as "other", whatever its detail.
  kproxy::net::CloseReason unset;
  unset.detail = "broker closed";
  CHECK(unset.category == CloseCategory::kOther);
  CHECK(close_label(unset.category) == "other");
  // A value past the last category (a newer enum read by older code) is "other", never a crash or "".
  CHECK(close_label(static_cast<CloseCategory>(kCloseCategories)) == "other");
  CHECK(close_label(static_cast<CloseCategory>(200)) == "other");
}
