// Byte shapers: one of the pipeline's generic results (proxy/stage/frame_context.h). A stage
// that wants to change how the bytes of one direction leave — pace them, cut them into pieces,
// stop after some of them and reset the connection — installs a ByteShaper on that direction
// through the ShaperPort its StageSetup carries. From then on every byte of that direction passes
// the shaper, in order; an exchange that wants its own bytes shaped names a ShapeSpec (the
// stage's own subclass) in its ExchangeActions, and the shaper gets it with those bytes.
//
//   Pipeline ──send(bytes, spec?)──► ByteShaper ──write / flush / close──► ShapedSink (the output)
//
// The framework knows nothing of what a spec says: the fault stage's shaper
// (proxy/chaos/fault_shaper.h) is the one that reads them today.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include <uv.h>

#include "codec/reader.h"
#include "proxy/net/close_reason.h"

namespace kproxy::stage {

/// The two directions of a connection's bytes.
enum class Flow : uint8_t { kToBroker, kToClient };

/// What an exchange asks of a direction's shaper for its own bytes; each shaper defines its own.
struct ShapeSpec {
  virtual ~ShapeSpec() = default;
};

/// Where a shaper's bytes go: the connection's side of one direction.
class ShapedSink {
 public:
  virtual ~ShapedSink() = default;
  /// Appends bytes for the peer (not flushed).
  virtual void write(codec::Bytes bytes) = 0;
  /// Hands what was appended to the kernel; from a timer, also re-checks backpressure. May close
  /// the connection (a failed write).
  virtual void flush() = 0;
  /// Closes the connection now, with a reset (RST) when `reset`; nothing is sent afterwards.
  virtual void close(net::CloseReason reason, bool reset) = 0;
};

/// A stage's filter for every byte of one direction once installed.
class ByteShaper {
 public:
  virtual ~ByteShaper() = default;
  /// `bytes` for the peer; `spec`: what the exchange they belong to asked (nullptr: nothing).
  /// What is due now goes to the sink at once, unflushed (the pipeline flushes as for a plain write).
  virtual void send(codec::Bytes bytes, const ShapeSpec* spec) = 0;
  /// Bytes the shaper holds (they count toward the direction's backpressure marks).
  virtual size_t queued_bytes() const = 0;
  /// Drops what is held; nothing is sent afterwards.
  virtual void shutdown() = 0;
};

/// The pipeline's side, handed to stages in their StageSetup.
class ShaperPort {
 public:
  virtual ~ShaperPort() = default;
  virtual uv_loop_t* loop() = 0;
  /// Where a shaper of `flow` writes.
  virtual ShapedSink& sink(Flow flow) = 0;
  /// From now on every byte of `flow` passes `shaper` (the pipeline owns it from here). One
  /// shaper per direction: when another holds it, nothing is replaced and the result is null.
  virtual ByteShaper* install(Flow flow, std::unique_ptr<ByteShaper> shaper) = 0;
  /// The shaper installed on `flow`, or null.
  virtual ByteShaper* installed(Flow flow) = 0;
};

}  // namespace kproxy::stage
