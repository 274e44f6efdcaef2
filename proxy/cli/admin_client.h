// The client side of the admin API, shared by the command-line clients `kproxy tap` and
// `kproxy ctl` (blocking sockets: they run outside the proxy's event loops).
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace kproxy::cli {

/// Connects to the admin listener at `admin` ("HOST:PORT" or "[IPv6]:PORT"). Returns the socket,
/// or -1 with `error` saying why (a malformed address, a name that does not resolve, a refused
/// connection, with a hint that kproxy may be running without admin.listen).
int connect_admin(const std::string& admin, std::string& error);

/// The request line and headers of one HTTP/1.1 request to `admin` (Host, Connection: close,
/// `Authorization: Bearer` when `token` is not empty), up to and without the blank line.
std::string admin_request_head(std::string_view method, std::string_view path_and_query, std::string_view admin, std::string_view token);

/// Writes all of `data` to `fd`; false (errno set) when the connection fails first.
bool send_all(int fd, std::string_view data);

/// Reads one HTTP/1.1 response from `fd` until the server closes (requests say `Connection:
/// close`): `on_status` gets the status once the head is in, then `on_body` gets the body piece by
/// piece as it arrives, chunked transfer encoding undone (GET /tap streams; the others end).
/// Either callback returns false to stop reading. False, with `error`, when no HTTP response came.
bool read_response(int fd, const std::function<bool(int status)>& on_status, const std::function<bool(std::string_view)>& on_body,
                   std::string& error);

}  // namespace kproxy::cli
