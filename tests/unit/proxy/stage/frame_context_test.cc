// RequestContext / ResponseContext: lazy decoding (once, with the reason when it fails), the
// response scan, re-encoding a body a stage changed with a patched size prefix, replacing a whole
// frame, and what a stage records (answer, close, client software, exchange actions).
#include "proxy/stage/frame_context.h"

#include <chrono>
#include <string>
#include <vector>

#include <doctest/doctest.h>

#include "codec/generated/api_keys.h"
#include "codec/generated/messages.h"
#include "codec/response_header.h"
#include "tests/unit/support/frames.h"

using namespace kproxy;

namespace {

constexpr int16_t kMetadata = codec::MetadataResponse::kApiKey;
constexpr int16_t kApiVersions = codec::ApiVersionsResponse::kApiKey;

int header_version(int16_t api_key, int16_t version) { return codec::response_header_version(api_key, version); }

codec::MetadataResponse one_broker(const char* host) {
  codec::MetadataResponse m;
  m.brokers.resize(1);
  m.brokers[0].node_id = 1;
  m.brokers[0].host = host;
  m.brokers[0].port = 9092;
  return m;
}

stage::ConnectionInfo connection() { return stage::ConnectionInfo{7, "l", 0, nullptr, {}}; }

}  // namespace

TEST_CASE("request context: the body is decoded once, on first use; unknown versions and bad bodies say why") {
  stage::ConnectionInfo info = connection();
  codec::MetadataRequest body;
  body.topics->resize(1);
  (*body.topics)[0].name = "orders";
  codec::RequestHeader header;
  auto frame = kproxy::testing::encoded_request_frame(body, 9, 5, "client", header);

  stage::RequestContext ctx(header, codec::Bytes(frame), info);
  auto m = ctx.message();
  REQUIRE(m != nullptr);
  CHECK(ctx.message() == m);  // the same decode, not a second one
  auto* metadata = dynamic_cast<codec::MetadataRequest*>(m.get());
  REQUIRE(metadata != nullptr);
  REQUIRE(metadata->topics->size() == 1);
  CHECK((*metadata->topics)[0].name == "orders");
  CHECK(ctx.decode_error().empty());
  CHECK(ctx.expects_response());

  codec::RequestHeader unknown = header;
  unknown.header_version = -1;  // what the header parser gives for a version kproxy does not know
  stage::RequestContext unknown_ctx(unknown, codec::Bytes(frame), info);
  CHECK(unknown_ctx.message() == nullptr);
  CHECK(unknown_ctx.decode_error() == "version unknown to kproxy");

  auto cut = frame;
  cut.resize(cut.size() - 3);  // the topic name runs past the end
  stage::RequestContext cut_ctx(header, codec::Bytes(cut), info);
  CHECK(cut_ctx.message() == nullptr);
  CHECK_FALSE(cut_ctx.decode_error().empty());
}

TEST_CASE("request context: answer, close and the announced client software are recorded") {
  stage::ConnectionInfo info = connection();
  codec::MetadataRequest body;
  codec::RequestHeader header;
  auto frame = kproxy::testing::encoded_request_frame(body, 4, 5, "client", header);
  stage::RequestContext ctx(header, codec::Bytes(frame), info, /*expects_response=*/false);
  CHECK_FALSE(ctx.expects_response());
  CHECK_FALSE(ctx.answered());
  CHECK_FALSE(ctx.closing());

  ctx.answer({1, 2, 3});
  CHECK(ctx.answered());
  CHECK(ctx.answer_frame() == std::vector<uint8_t>{1, 2, 3});
  ctx.close({net::CloseCategory::kLimit, "enough"});
  REQUIRE(ctx.closing());
  CHECK(ctx.close_reason()->detail == "enough");

  CHECK(info.client_software_name().empty());
  ctx.set_client_software("librdkafka", "2.3.0");
  CHECK(info.client_software_name() == "librdkafka");  // on the connection: later frames see it
  CHECK(ctx.connection().client_software_version() == "2.3.0");
}

TEST_CASE("response context: decode failures are told apart (unknown api, unknown version, malformed)") {
  stage::ConnectionInfo info = connection();
  auto frame = kproxy::testing::encoded_response_frame(one_broker("10.0.0.1"), 12);

  stage::ResponseContext ok(kMetadata, 12, header_version(kMetadata, 12), codec::Bytes(frame), info);
  REQUIRE(ok.message() != nullptr);
  CHECK(ok.decode_failure() == stage::DecodeFailure::kNone);
  CHECK(ok.body_version() == 12);

  stage::ResponseContext unknown_version(kMetadata, 99, -1, codec::Bytes(frame), info);
  CHECK(unknown_version.message() == nullptr);
  CHECK(unknown_version.decode_failure() == stage::DecodeFailure::kUnknownVersion);

  stage::ResponseContext unknown_api(1999, 0, -1, codec::Bytes(frame), info);
  CHECK(unknown_api.message() == nullptr);
  CHECK(unknown_api.decode_failure() == stage::DecodeFailure::kUnknownApi);

  auto cut = frame;
  cut.resize(cut.size() - 5);
  codec::Writer(cut).patch_int32(0, static_cast<int32_t>(cut.size() - 4));
  stage::ResponseContext malformed(kMetadata, 12, header_version(kMetadata, 12), codec::Bytes(cut), info);
  CHECK(malformed.message() == nullptr);
  CHECK(malformed.decode_failure() == stage::DecodeFailure::kMalformed);
  CHECK_FALSE(malformed.decode_error().empty());
  CHECK(malformed.scan() == nullptr);  // nor does it scan
}

TEST_CASE("response context: an ApiVersions error answered at v0 to a v3 request decodes at v0 (body_version)") {
  stage::ConnectionInfo info = connection();
  codec::ApiVersionsResponse v0;
  v0.error_code = 35;  // UNSUPPORTED_VERSION
  v0.api_keys.resize(1);
  v0.api_keys[0].api_key = kApiVersions;
  v0.api_keys[0].max_version = 2;
  auto frame = kproxy::testing::encoded_response_frame(v0, 0);
  stage::ResponseContext ctx(kApiVersions, 3, /*header_version=*/0, codec::Bytes(frame), info);
  auto m = ctx.message();
  REQUIRE(m != nullptr);
  CHECK(ctx.api_version() == 3);
  CHECK(ctx.body_version() == 0);
  auto* av = dynamic_cast<codec::ApiVersionsResponse*>(m.get());
  REQUIRE(av != nullptr);
  CHECK(av->error_code == 35);
  REQUIRE(av->api_keys.size() == 1);
  CHECK(av->api_keys[0].max_version == 2);
}

TEST_CASE("response context: a body marked dirty leaves re-encoded with a patched size prefix; an untouched one as its bytes") {
  stage::ConnectionInfo info = connection();
  const int16_t v = 12;
  auto frame = kproxy::testing::encoded_response_frame(one_broker("a"), v, 42);
  stage::ResponseContext ctx(kMetadata, v, header_version(kMetadata, v), codec::Bytes(frame), info);
  CHECK(ctx.encode() == frame);  // decoded or not, nobody changed it
  auto m = std::dynamic_pointer_cast<codec::MetadataResponse>(ctx.message());
  REQUIRE(m);
  CHECK(ctx.encode() == frame);

  m->brokers[0].host = "a-much-longer-host-name.example";
  ctx.mark_dirty(stage::StageId::kFaultRules);
  CHECK(ctx.dirty());
  CHECK(ctx.changed_by() == stage::ResponseContext::bit(stage::StageId::kFaultRules));
  auto out = ctx.encode();
  REQUIRE(out.size() > frame.size());
  CHECK(codec::peek_response_correlation_id(codec::Bytes(out)) == static_cast<int32_t>(out.size() - 4));  // the size prefix
  codec::Bytes message = codec::Bytes(out).subspan(4);
  codec::ResponseHeader h;
  REQUIRE(codec::read_response_header(message, header_version(kMetadata, v), h, nullptr));
  CHECK(h.correlation_id == 42);  // the header as the broker sent it
  codec::MetadataResponse got;
  codec::Reader r(message.subspan(h.size));
  got.read(r, v);
  REQUIRE(r.ok());
  CHECK(got.brokers[0].host == "a-much-longer-host-name.example");
}

TEST_CASE("response context: replace_frame starts decode and scan over from the new bytes") {
  stage::ConnectionInfo info = connection();
  const int16_t v = 12;
  codec::MetadataResponse with_error = one_broker("old");
  with_error.topics.resize(1);
  with_error.topics[0].name = "t";
  with_error.topics[0].error_code = 3;  // UNKNOWN_TOPIC_OR_PARTITION
  auto frame = kproxy::testing::encoded_response_frame(with_error, v);
  stage::ResponseContext ctx(kMetadata, v, header_version(kMetadata, v), codec::Bytes(frame), info);
  REQUIRE(ctx.scan() != nullptr);
  CHECK(ctx.scan()->error_count == 1);
  REQUIRE(ctx.message() != nullptr);
  ctx.mark_dirty(stage::StageId::kFaultRules);

  auto replacement = kproxy::testing::encoded_response_frame(one_broker("new"), v);
  ctx.replace_frame(replacement, stage::StageId::kBrokerAddress);
  CHECK_FALSE(ctx.dirty());
  CHECK(ctx.changed_by() ==
        (stage::ResponseContext::bit(stage::StageId::kFaultRules) | stage::ResponseContext::bit(stage::StageId::kBrokerAddress)));
  CHECK(std::vector<uint8_t>(ctx.frame().begin(), ctx.frame().end()) == replacement);
  REQUIRE(ctx.scan() != nullptr);
  CHECK(ctx.scan()->error_count == 0);  // the new body's, not the old one's
  auto m = std::dynamic_pointer_cast<codec::MetadataResponse>(ctx.message());
  REQUIRE(m);
  CHECK(m->brokers[0].host == "new");
  CHECK(ctx.encode() == replacement);
}

TEST_CASE("exchange actions: only what changes the response keeps it off the fast path") {
  stage::ExchangeActions a;
  CHECK_FALSE(a.affect_response());
  a.request_delay = std::chrono::milliseconds(5);  // the request's side only
  CHECK_FALSE(a.affect_response());
  a.copies = 2;
  CHECK_FALSE(a.affect_response());
  a.note = std::make_shared<stage::ExchangeNote>();  // a stage must see the response again
  CHECK(a.affect_response());
  stage::ExchangeActions b;
  b.response_delay = std::chrono::milliseconds(1);
  CHECK(b.affect_response());
  stage::ExchangeActions c;
  c.fate = stage::ResponseFate::kSwallow;
  CHECK(c.affect_response());
  stage::ExchangeActions d;
  d.to_client = std::make_shared<stage::ShapeSpec>();
  CHECK(d.affect_response());

  // A response context made without actions has its own, empty ones.
  stage::ConnectionInfo info = connection();
  auto frame = kproxy::testing::encoded_response_frame(one_broker("h"), 12);
  stage::ResponseContext ctx(kMetadata, 12, header_version(kMetadata, 12), codec::Bytes(frame), info);
  CHECK_FALSE(ctx.actions().affect_response());
  CHECK_FALSE(ctx.synthetic());
  CHECK(ctx.latency().count() == 0);
}
