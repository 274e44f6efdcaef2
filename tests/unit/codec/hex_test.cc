#include "codec/hex.h"

#include <doctest/doctest.h>

TEST_CASE("to_hex: two lower-case digits per byte") {
  const uint8_t bytes[] = {0x00, 0x0f, 0xa0, 0xff};
  CHECK(kproxy::codec::to_hex(bytes, 4) == "000fa0ff");
  CHECK(kproxy::codec::to_hex(bytes, 0).empty());
}
