// fuzz_seed_gen OUTDIR: writes seed corpora for the fuzz targets into OUTDIR/<target>/ from the
// codec's generated instances (codec/testing): for every API x version the smallest instance and
// a few random ones, as requests and as responses, in each target's input format.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages/produce.h"
#include "codec/generated/testing/fill.h"
#include "codec/message.h"
#include "codec/request_header.h"
#include "codec/response_header.h"
#include "codec/testing/filler.h"
#include "proxy/cluster/broker_address_rewrite.h"
#include "tests/fuzz/api_selector.h"

using namespace kproxy;
namespace fs = std::filesystem;

namespace {

size_t written = 0;

void put(const fs::path& dir, const std::string& name, const std::vector<uint8_t>& bytes) {
  std::ofstream f(dir / name, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  ++written;
}

std::vector<uint8_t> body_of(const codec::Message& m, int16_t version) {
  std::vector<uint8_t> out;
  codec::Writer w(out);
  m.write(w, version);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s OUTDIR\n", argv[0]);
    return 2;
  }
  fs::path root = argv[1];
  for (const char* t :
       {"request_decode", "response_decode", "api_versions_rewrite", "broker_address_rewrite", "frame_reader", "txn_produce"}) {
    fs::create_directories(root / t);
  }
  std::vector<int16_t> rewrite_apis;
  for (int16_t k : codec::all_api_keys()) {
    if (cluster::BrokerAddressRewrite::applies_to(k)) rewrite_apis.push_back(k);
  }
  const int16_t api_versions_key = static_cast<int16_t>(codec::ApiKey::kApiVersions);
  std::vector<uint8_t> stream;         // a few request frames back to back, for the frame reader
  const uint64_t seeds[] = {0, 1, 2};  // 0 = the smallest instance

  for (int16_t key : codec::all_api_keys()) {
    std::string api = codec::api_name(key);
    codec::VersionRange range = codec::request_versions(key);
    for (int16_t v = range.min; !range.empty() && v <= range.max; ++v) {
      uint8_t sel[2];
      for (uint64_t seed : seeds) {
        std::string base = api + "-v" + std::to_string(v) + "-" + (seed == 0 ? std::string("smallest") : "r" + std::to_string(seed));
        // Request: header + body.
        {
          codec::testing::Filler f =
              seed == 0 ? codec::testing::Filler()
                        : codec::testing::Filler(seed * 7919 + static_cast<uint64_t>(key) * 131 + static_cast<uint64_t>(v));
          auto m = codec::testing::make_instance(key, true, v, f);
          if (m && fuzz::selector_bytes(key, v, true, sel)) {
            codec::RequestHeader h;
            h.api_key = key;
            h.api_version = v;
            h.correlation_id = 7;
            h.client_id = std::string_view("seed");
            h.header_version = codec::request_header_version(key, v);
            std::vector<uint8_t> frame;
            codec::Writer w(frame);
            if (h.header_version >= 0) codec::write_request_header(w, h);
            std::vector<uint8_t> body = body_of(*m, v);
            frame.insert(frame.end(), body.begin(), body.end());
            std::vector<uint8_t> in = {sel[0], sel[1]};
            in.insert(in.end(), frame.begin() + 4, frame.end());
            put(root / "request_decode", base, in);
            if (key == static_cast<int16_t>(codec::ApiKey::kProduce) && v >= 3 && v <= 13) {
              // The transactional Produce walk: [version selector] + the body, with an id set.
              auto& produce = static_cast<codec::ProduceRequest&>(*m);
              produce.transactional_id = std::string_view("seed-txn");
              std::vector<uint8_t> txn = {static_cast<uint8_t>(v - 3)};
              std::vector<uint8_t> txn_body = body_of(*m, v);
              txn.insert(txn.end(), txn_body.begin(), txn_body.end());
              put(root / "txn_produce", base, txn);
            }
            if (seed == 0 && stream.size() < 4096) {
              codec::Writer sw(stream);
              sw.int32(static_cast<int32_t>(frame.size()));
              stream.insert(stream.end(), frame.begin(), frame.end());
            }
          }
        }
        // Response: header + body.
        {
          codec::testing::Filler f =
              seed == 0 ? codec::testing::Filler()
                        : codec::testing::Filler(seed * 104729 + static_cast<uint64_t>(key) * 131 + static_cast<uint64_t>(v));
          auto m = codec::testing::make_instance(key, false, v, f);
          if (!m || !fuzz::selector_bytes(key, v, false, sel)) continue;
          codec::ResponseHeader h;
          h.correlation_id = 7;
          h.header_version = codec::response_header_version(key, v);
          std::vector<uint8_t> frame;
          codec::Writer w(frame);
          codec::write_response_header(w, h);
          std::vector<uint8_t> body = body_of(*m, v);
          frame.insert(frame.end(), body.begin(), body.end());
          std::vector<uint8_t> in = {sel[0], sel[1]};
          in.insert(in.end(), frame.begin(), frame.end());
          put(root / "response_decode", base, in);
          if (key == api_versions_key) {
            std::vector<uint8_t> av = {static_cast<uint8_t>(v), 0};
            av.insert(av.end(), body.begin(), body.end());
            put(root / "api_versions_rewrite", base, av);
            // With a policy: clamp key 0 (Produce) to max 9, hide key 1.
            std::vector<uint8_t> avp = {static_cast<uint8_t>(v), 8, 0, 0, 9, 2, 1, 0, 0, 4};
            avp.insert(avp.end(), body.begin(), body.end());
            put(root / "api_versions_rewrite", base + "-policy", avp);
          }
          for (size_t i = 0; i < rewrite_apis.size(); ++i) {
            if (rewrite_apis[i] != key) continue;
            std::vector<uint8_t> br = {static_cast<uint8_t>(i), static_cast<uint8_t>(v - codec::response_versions(key).min),
                                       static_cast<uint8_t>(seed)};
            br.insert(br.end(), frame.begin(), frame.end());
            put(root / "broker_address_rewrite", base, br);
          }
        }
      }
    }
  }
  // Frame reader: the stream whole, cut into 1-byte pieces at the start, and cut at 3 and 5.
  put(root / "frame_reader", "stream-whole", [&] {
    std::vector<uint8_t> s = {3, 0};
    s.insert(s.end(), stream.begin(), stream.end());
    return s;
  }());
  put(root / "frame_reader", "stream-bytes", [&] {
    std::vector<uint8_t> s = {3, 16};
    s.insert(s.end(), 16, 1);
    s.insert(s.end(), stream.begin(), stream.end());
    return s;
  }());
  put(root / "frame_reader", "stream-3-5-stop", [&] {
    std::vector<uint8_t> s = {7, 2, 3, 5};
    s.insert(s.end(), stream.begin(), stream.end());
    return s;
  }());
  std::printf("fuzz_seed_gen: %zu seeds in %s\n", written, root.c_str());
  return 0;
}
