// kproxy-frame-cost: what the metrics observer costs per Produce request/response pair, in CPU
// time on one thread, without the noise of a shared machine's network stack (bench/metrics/run
// relates it to the proxy's whole CPU per request).
//
//   kproxy-frame-cost [--iterations N] [--rounds R] [--size BYTES]
//
// Per iteration: FrameMetrics::on_request on a Produce v12 request frame (one partition, a record
// set of BYTES), then on_response on its ProduceResponse v12 (no error), as the pipeline calls them
// (a fresh RequestContext/ResponseContext each time). Two figures: "handed", the response's scan
// handed over as the broker-address rewrite does in kproxy for Produce v10+ (that scan is paid with
// metrics on or off), and "self", the observer scanning the body itself (APIs the rewrite does not
// scan). Thread CPU time (CLOCK_THREAD_CPUTIME_ID), best of R rounds. Prints one JSON line.
#include <time.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages/produce.h"
#include "codec/generated/response_scan.h"
#include "codec/response_header.h"
#include "codec/writer.h"
#include "proxy/observe/frame_metrics.h"

using namespace kproxy;

namespace {

double thread_cpu_ns() {
  timespec ts{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) * 1e9 + static_cast<double>(ts.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  long iterations = 1000000, rounds = 5, size = 1024;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i];
    long v = std::strtol(argv[i + 1], nullptr, 10);
    if (a == "--iterations") iterations = v;
    else if (a == "--rounds") rounds = v;
    else if (a == "--size") size = v;
    else {
      std::fprintf(stderr, "usage: kproxy-frame-cost [--iterations N] [--rounds R] [--size BYTES]\n");
      return 2;
    }
  }
  std::vector<uint8_t> records(static_cast<size_t>(size), 0x61);
  codec::ProduceRequest req;
  req.acks = 1;
  req.timeout_ms = 30000;
  auto& topic = req.topic_data.emplace_back();
  topic.name = "bench";
  topic.partition_data.emplace_back().records = codec::Bytes(records.data(), records.size());
  std::vector<uint8_t> request;
  codec::Writer w(request);
  w.int32(0);
  w.int16(0);
  w.int16(12);
  w.int32(1);
  w.nullable_string(std::string_view("bench-client"), false);
  w.uvarint(0);
  size_t header_size = request.size() - 4;
  req.write(w, 12);
  w.patch_int32(0, static_cast<int32_t>(request.size() - 4));
  codec::RequestHeader header;
  header.api_key = 0;
  header.api_version = 12;
  header.correlation_id = 1;
  header.client_id = std::string_view("bench-client");
  header.header_version = 2;
  header.size = header_size;

  codec::ProduceResponse resp;
  auto& rt = resp.responses.emplace_back();
  rt.name = "bench";
  rt.partition_responses.emplace_back().base_offset = 42;
  std::vector<uint8_t> response;
  codec::Writer rw(response);
  rw.int32(0);
  codec::ResponseHeader rh;
  rh.correlation_id = 1;
  rh.header_version = codec::response_header_version(0, 12);
  codec::write_response_header(rw, rh);
  resp.write(rw, 12);
  rw.patch_int32(0, static_cast<int32_t>(response.size() - 4));

  metrics::ProxyMetrics pm;
  pm.set_listener_names({"bench"});
  tap::TapHub hub;
  cluster::TopicNames topic_names;
  observe::FrameMetrics observer(pm, hub, topic_names, {"bench"});
  stage::ConnectionInfo info{1, "bench", 0, nullptr, {}};
  const int hv = codec::response_header_version(0, 12);

  codec::ResponseHeader parsed;
  codec::Bytes after_prefix = codec::Bytes(response).subspan(4);
  codec::read_response_header(after_prefix, hv, parsed, nullptr);
  codec::ResponseScan handed;
  if (!codec::scan_response(0, 12, after_prefix.subspan(parsed.size), handed)) {
    std::fprintf(stderr, "kproxy-frame-cost: the response does not scan\n");
    return 1;
  }
  enum class Mode { kOff, kHanded, kSelf };
  auto run = [&](Mode mode) {
    double start = thread_cpu_ns();
    for (long i = 0; i < iterations; ++i) {
      stage::RequestContext rctx(header, request, info);
      if (mode != Mode::kOff) observer.on_request(rctx);
      stage::ResponseContext sctx(0, 12, hv, response, info);
      if (mode == Mode::kHanded) {  // as the broker-address stage leaves it
        *sctx.scan_storage() = handed;
        sctx.scan_stored();
      }
      if (mode != Mode::kOff) observer.on_response(sctx, std::chrono::microseconds(300 + (i & 255)));
    }
    return (thread_cpu_ns() - start) / static_cast<double>(iterations);
  };
  double best_off = 1e18, best_handed = 1e18, best_self = 1e18;
  for (long r = 0; r < rounds; ++r) {
    best_off = std::min(best_off, run(Mode::kOff));
    best_handed = std::min(best_handed, run(Mode::kHanded));
    best_self = std::min(best_self, run(Mode::kSelf));
  }
  iterations *= 2;  // two observed runs per round
  if (pm.requests_total(0) != static_cast<uint64_t>(iterations * rounds) || pm.responses_total(0) != pm.requests_total(0)) {
    std::fprintf(stderr, "kproxy-frame-cost: counted %llu requests, expected %ld\n", static_cast<unsigned long long>(pm.requests_total(0)),
                 iterations * rounds);
    return 1;
  }
  std::printf(
      "{\"iterations\":%ld,\"rounds\":%ld,\"size\":%ld,\"contexts_ns\":%.1f,\"observer_ns_per_pair\":%.1f,"
      "\"observer_self_scan_ns_per_pair\":%.1f}\n",
      iterations / 2, rounds, size, best_off, best_handed - best_off, best_self - best_off);
  return 0;
}
