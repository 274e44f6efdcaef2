#include "codec/tool/subcommands.h"

#include <cstdio>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "codec/generated/api_keys.h"
#include "codec/generated/testing/fill.h"
#include "codec/request_header.h"
#include "codec/response_header.h"
#include "codec/tool/frame_line.h"

namespace kproxy::codec::tool {
namespace {

struct RandomSpec {
  bool request = true;
  int16_t api_key = 0;
  int16_t version = 0;
  uint64_t seed = 0;
  int count = 1;
};

bool parse_spec(const std::vector<std::string>& words, RandomSpec& spec, std::string* error) {
  if (words.size() != 4 && words.size() != 5) {
    *error = "expected <request|response> <api_key> <version> <seed> [count]";
    return false;
  }
  if (words[0] != "request" && words[0] != "response") {
    *error = "expected 'request' or 'response', got '" + words[0] + "'";
    return false;
  }
  spec.request = words[0] == "request";
  try {
    size_t used = 0;
    int key = std::stoi(words[1], &used);
    if (used != words[1].size() || key < 0 || key > INT16_MAX) throw std::invalid_argument("key");
    int version = std::stoi(words[2], &used);
    if (used != words[2].size() || version < 0 || version > INT16_MAX) throw std::invalid_argument("version");
    spec.seed = std::stoull(words[3], &used);
    if (used != words[3].size()) throw std::invalid_argument("seed");
    spec.count = words.size() == 5 ? std::stoi(words[4], &used) : 1;
    if (words.size() == 5 && (used != words[4].size() || spec.count < 0)) throw std::invalid_argument("count");
    spec.api_key = static_cast<int16_t>(key);
    spec.version = static_cast<int16_t>(version);
  } catch (const std::exception&) {
    *error = "bad number in the random spec";
    return false;
  }
  return true;
}

// One seed per (spec seed, message, index): a printed frame can be regenerated alone.
uint64_t frame_seed(const RandomSpec& s, int index) {
  uint64_t h = s.seed * 0x9e3779b97f4a7c15ULL;
  h ^= (static_cast<uint64_t>(s.api_key) << 32) ^ (static_cast<uint64_t>(s.version) << 16) ^ (s.request ? 0 : 1);
  h *= 0xbf58476d1ce4e5b9ULL;
  return h ^ static_cast<uint64_t>(index) * 0x94d049bb133111ebULL;
}

// Prints one random frame line, or an error line.
void print_random_frame(const RandomSpec& s, int index, std::string& out) {
  const char* dir = s.request ? "request" : "response";
  std::string where = std::string(dir) + " " + std::to_string(s.api_key) + " " + std::to_string(s.version);
  testing::Filler f(frame_seed(s, index));
  std::unique_ptr<Message> body = testing::make_instance(s.api_key, s.request, s.version, f);
  int hv = s.request ? request_header_version(s.api_key, s.version) : response_header_version(s.api_key, s.version);
  if (!body || hv < 0) {
    out = "error " + where + ": not a message version kproxy knows";
    return;
  }
  std::vector<uint8_t> frame;
  Writer w(frame);
  if (s.request) {
    RequestHeader h;
    h.api_key = s.api_key;
    h.api_version = s.version;
    h.correlation_id = f.i32();
    h.header_version = hv;
    if (!f.null()) h.client_id = f.string();
    if (hv >= 2) f.unknown_tags(h.tagged_fields, {});
    write_request_header(w, h);
  } else {
    ResponseHeader h;
    h.correlation_id = f.i32();
    h.header_version = hv;
    if (hv >= 1) f.unknown_tags(h.tagged_fields, {});
    write_response_header(w, h);
  }
  size_t header_end = w.size();
  size_t expected = body->size(s.version);
  body->write(w, s.version);
  if (w.size() - header_end != expected) {
    out = "error " + where + ": " + body->name() + " size() says " + std::to_string(expected) + " bytes, write() appended " +
          std::to_string(w.size() - header_end);
    return;
  }
  out = where + " " + to_hex(frame);
}

int print_spec(const RandomSpec& s) {
  std::string out;
  for (int i = 0; i < s.count; ++i) {
    print_random_frame(s, i, out);
    out.push_back('\n');
    std::cout.write(out.data(), static_cast<std::streamsize>(out.size()));
  }
  return 0;
}

}  // namespace

int run_random(int argc, char** argv) {
  std::ios::sync_with_stdio(false);
  RandomSpec spec;
  std::string error;
  if (argc > 0) {
    std::vector<std::string> words(argv, argv + argc);
    if (!parse_spec(words, spec, &error)) {
      std::fprintf(stderr, "kproxy-codec random: %s\n", error.c_str());
      return 2;
    }
    print_spec(spec);
  } else {
    std::string line;
    while (std::getline(std::cin, line)) {
      std::istringstream in(line);
      std::vector<std::string> words;
      for (std::string w; in >> w;) words.push_back(w);
      if (words.empty() || words[0][0] == '#') continue;
      if (!parse_spec(words, spec, &error)) {
        std::cout << "error " << line << ": " << error << '\n';
        continue;
      }
      print_spec(spec);
    }
  }
  std::cout.flush();
  return 0;
}

int run_versions() {
  for (int16_t key : all_api_keys()) {
    for (bool request : {true, false}) {
      VersionRange r = request ? request_versions(key) : response_versions(key);
      for (int v = r.min; v <= r.max; ++v) std::printf("%s %d %d\n", request ? "request" : "response", key, v);
    }
  }
  return 0;
}

}  // namespace kproxy::codec::tool
