// to_hex: bytes as lower-case hexadecimal, two digits per byte (frames printed by the codec
// tool, trace and span ids in OTLP JSON).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kproxy::codec {

/// "00abff" for {0x00, 0xab, 0xff}.
std::string to_hex(const uint8_t* data, size_t size);

}  // namespace kproxy::codec
