// Text and bytes helpers shared by unit tests.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "codec/reader.h"

namespace kproxy::testing {

/// True when `needle` occurs in `text` (a scrape, a log line, a JSON body).
inline bool contains(std::string_view text, std::string_view needle) { return text.find(needle) != std::string_view::npos; }

/// The bytes of `s`, as the codec and the transports take them (a view: `s` must outlive it).
inline codec::Bytes bytes_of(const std::string& s) { return {reinterpret_cast<const uint8_t*>(s.data()), s.size()}; }

}  // namespace kproxy::testing
