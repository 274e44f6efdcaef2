#include "proxy/net/close_reason.h"

namespace kproxy::net {

std::string_view close_label(CloseCategory category) {
  switch (category) {
    case CloseCategory::kClientClosed: return "client_closed";
    case CloseCategory::kBrokerClosed: return "broker_closed";
    case CloseCategory::kUpstreamConnectFailed: return "upstream_connect_failed";
    case CloseCategory::kClientProtocolError: return "client_protocol_error";
    case CloseCategory::kBrokerProtocolError: return "broker_protocol_error";
    case CloseCategory::kTls: return "tls";
    case CloseCategory::kLimit: return "limit";
    case CloseCategory::kFault: return "fault";
    case CloseCategory::kShutdown: return "shutdown";
    case CloseCategory::kSelfConnection: return "self_connection";
    case CloseCategory::kUnanswered: return "unanswered";
    case CloseCategory::kRequestTimeout: return "request_timeout";
    case CloseCategory::kFirstRequestTimeout: return "first_request_timeout";
    case CloseCategory::kOther: break;
  }
  return "other";
}

}  // namespace kproxy::net
