#include "proxy/util/bound_report.h"

#include <doctest/doctest.h>

using kproxy::proxy::bound_line;

TEST_CASE("one line per bound socket, five fields, the address last") {
  CHECK(bound_line("listener", "kafka", "127.0.0.1:41234") == "kproxy bound listener kafka 127.0.0.1:41234");
  CHECK(bound_line("broker", "kafka/node-3", "[::1]:41235") == "kproxy bound broker kafka/node-3 [::1]:41235");
  CHECK(bound_line("admin", "api", "127.0.0.1:9644") == "kproxy bound admin api 127.0.0.1:9644");
}

TEST_CASE("under JSON logs the line is one JSON object") {
  CHECK(bound_line("listener", "kafka", "127.0.0.1:41234", /*json=*/true) ==
        R"({"kproxy":"bound","kind":"listener","label":"kafka","address":"127.0.0.1:41234"})");
  CHECK(bound_line("broker", "odd\"name/node-1", "[::1]:1", true) ==
        R"({"kproxy":"bound","kind":"broker","label":"odd\"name/node-1","address":"[::1]:1"})");
}
