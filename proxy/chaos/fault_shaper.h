// FaultShaper: the fault stage's byte shaper for one direction of a connection (the pipeline's
// generic ByteShaper, proxy/stage/byte_shaper.h). The stage installs one the first time a rule
// shapes that direction; from then on every byte of the direction passes it, in order.
//
// It carries out two kinds of fault action (docs/faults.md):
//   - transport toxics, bandwidth and slice (as Toxiproxy's `bandwidth` and `slicer`), through a
//     TransportShaper (proxy/chaos/transport_shaper.h);
//   - reset_after_bytes: from the first byte of the exchange whose shape asks for it, N more
//     bytes leave, then the connection is reset (RST, like Toxiproxy's reset_peer). Bytes the
//     transport shaper still holds at that moment are lost with the connection, as on a real
//     reset.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <uv.h>

#include "proxy/chaos/transport_shaper.h"
#include "proxy/stage/byte_shaper.h"

namespace kproxy::chaos {

/// What one exchange asks of the fault stage's shaper for its bytes.
struct FaultShape final : stage::ShapeSpec {
  std::optional<TransportToxic> toxic;        ///< bandwidth / slice of the exchange's bytes
  std::optional<uint64_t> reset_after_bytes;  ///< reset the connection after this many more bytes
  std::string reset_rule;                     ///< the rule that asked for the reset (its close reason)
  bool any() const { return (toxic && toxic->any()) || reset_after_bytes.has_value(); }
};

class FaultShaper final : public stage::ByteShaper {
 public:
  FaultShaper(uv_loop_t* loop, const util::Clock& clock, stage::ShapedSink& sink);
  FaultShaper(const FaultShaper&) = delete;
  FaultShaper& operator=(const FaultShaper&) = delete;

  void send(codec::Bytes bytes, const stage::ShapeSpec* spec) override;
  size_t queued_bytes() const override { return transport_.queued_bytes(); }
  void shutdown() override;
  /// Bytes left before the reset once an exchange armed one; nullopt before.
  std::optional<uint64_t> reset_budget() const { return reset_budget_; }

 private:
  stage::ShapedSink& sink_;
  TransportShaper transport_;
  std::optional<uint64_t> reset_budget_;
  std::string reset_rule_;
  bool stopped_ = false;
};

}  // namespace kproxy::chaos
