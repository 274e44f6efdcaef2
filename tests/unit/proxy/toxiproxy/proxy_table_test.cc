#include "proxy/toxiproxy/proxy_table.h"

#include <doctest/doctest.h>

#include <chrono>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

using namespace kproxy::toxiproxy;

namespace {

/// A ProxyHost that records what the table asks of it: port 0 becomes 20000 + n; "taken:1" is refused.
struct FakeHost {
  std::map<std::string, std::string> open;  ///< name -> bound address
  std::map<std::string, std::vector<ToxicSpec>> toxics;
  int opens = 0;
  int closes = 0;

  ProxyHost host() {
    ProxyHost h;
    h.open = [this](const std::string& name, const std::string& listen, const std::string&, std::string& bound, ApiError& error) {
      if (listen == "taken:1") {
        error = {409, "listen: address already in use"};
        return false;
      }
      ++opens;
      bound = listen.ends_with(":0") ? listen.substr(0, listen.size() - 1) + std::to_string(20000 + opens) : listen;
      open[name] = bound;
      return true;
    };
    h.close = [this](const std::string& name) {
      ++closes;
      open.erase(name);
      toxics.erase(name);
    };
    h.toxics = [this](const std::string& name, const std::vector<ToxicSpec>& list) { toxics[name] = list; };
    return h;
  }
};

}  // namespace

TEST_CASE("POST /proxies creates an enabled proxy at the address bound; names are unique") {
  FakeHost fake;
  ProxyTable table(fake.host());
  auto created = table.create(R"({"name": "kafka", "listen": "127.0.0.1:0", "upstream": "127.0.0.1:9092"})");
  CHECK(created.status == 201);
  CHECK(created.body["name"] == "kafka");
  CHECK(created.body["listen"] == "127.0.0.1:20001");
  CHECK(created.body["upstream"] == "127.0.0.1:9092");
  CHECK(created.body["enabled"] == true);
  CHECK(created.body["toxics"].is_array());
  CHECK(fake.open.at("kafka") == "127.0.0.1:20001");

  auto again = table.create(R"({"name": "kafka", "upstream": "127.0.0.1:9093"})");
  CHECK(again.status == 409);
  CHECK(again.body["error"] == "proxy already exists");
  CHECK(again.body["status"] == 409);

  auto listed = table.list();
  CHECK(listed.status == 200);
  CHECK(listed.body.size() == 1);
  CHECK(listed.body["kafka"]["listen"] == "127.0.0.1:20001");
  CHECK(table.show("kafka").body["upstream"] == "127.0.0.1:9092");
  CHECK(table.show("nope").status == 404);
  CHECK(table.show("nope").body["error"] == "proxy not found");
}

TEST_CASE("POST /proxies refuses missing fields, bad bodies, taken addresses and more than max_proxies") {
  FakeHost fake;
  ProxyTable table(fake.host(), 2);
  CHECK(table.create(R"({"upstream": "x:1"})").body["error"] == "missing required field: name");
  CHECK(table.create(R"({"name": "a"})").body["error"] == "missing required field: upstream");
  CHECK(table.create("{").status == 400);
  CHECK(table.create(R"({"name": "a", "upstream": "x:1", "enabled": "yes"})").status == 400);
  auto taken = table.create(R"({"name": "a", "listen": "taken:1", "upstream": "x:1"})");
  CHECK(taken.status == 409);
  CHECK(table.size() == 0);
  CHECK(table.create(R"({"name": "a", "upstream": "x:1"})").status == 201);
  CHECK(table.show("a").body["listen"] == "127.0.0.1:20001");  // no listen given: loopback, the kernel's port
  CHECK(table.create(R"({"name": "b", "upstream": "x:1", "enabled": false})").status == 201);
  CHECK(fake.open.count("b") == 0);  // disabled: listens nowhere
  auto full = table.create(R"({"name": "c", "upstream": "x:1"})");
  CHECK(full.status == 409);
  CHECK(full.body["error"].get<std::string>().find("max_proxies") != std::string::npos);
}

TEST_CASE("PATCH /proxies/{proxy} disables, enables and moves a proxy; DELETE closes it") {
  FakeHost fake;
  ProxyTable table(fake.host());
  REQUIRE(table.create(R"({"name": "p", "listen": "127.0.0.1:7000", "upstream": "u:1"})").status == 201);
  auto off = table.update("p", R"({"enabled": false})");
  CHECK(off.status == 200);
  CHECK(off.body["enabled"] == false);
  CHECK(fake.open.count("p") == 0);
  CHECK(table.update("p", R"({"enabled": true})").body["enabled"] == true);
  CHECK(fake.open.at("p") == "127.0.0.1:7000");
  auto moved = table.update("p", R"({"upstream": "u:2", "listen": "127.0.0.1:7001"})");
  CHECK(moved.status == 200);
  CHECK(moved.body["upstream"] == "u:2");
  CHECK(fake.open.at("p") == "127.0.0.1:7001");
  // A move to a taken address fails and leaves the proxy where it was.
  auto refused = table.update("p", R"({"listen": "taken:1"})");
  CHECK(refused.status == 409);
  CHECK(table.show("p").body["listen"] == "127.0.0.1:7001");
  CHECK(fake.open.at("p") == "127.0.0.1:7001");
  CHECK(table.update("p", "[").status == 400);
  CHECK(table.update("q", "{}").status == 404);
  CHECK(table.remove("p").status == 204);
  CHECK(fake.open.count("p") == 0);
  CHECK(table.remove("p").status == 404);
}

TEST_CASE("toxics: add, list, show, update, remove, with Toxiproxy's statuses and order") {
  FakeHost fake;
  ProxyTable table(fake.host());
  REQUIRE(table.create(R"({"name": "p", "upstream": "u:1"})").status == 201);
  auto added = table.add_toxic("p", R"({"type": "latency", "attributes": {"latency": 100}})");
  CHECK(added.status == 200);
  CHECK(added.body["name"] == "latency_downstream");
  CHECK(table.add_toxic("p", R"({"type": "latency"})").status == 409);
  CHECK(table.add_toxic("p", R"({"type": "bandwidth", "stream": "upstream", "attributes": {"rate": 10}})").status == 200);
  CHECK(table.add_toxic("nope", R"({"type": "latency"})").status == 404);
  auto list = table.list_toxics("p");
  REQUIRE(list.body.size() == 2);
  CHECK(list.body[0]["name"] == "bandwidth_upstream");  // upstream ones first
  CHECK(list.body[1]["name"] == "latency_downstream");
  REQUIRE(fake.toxics.at("p").size() == 2);  // the host sees every change
  CHECK(table.show("p").body["toxics"].size() == 2);
  CHECK(table.show_toxic("p", "latency_downstream").body["attributes"]["latency"] == 100);
  CHECK(table.show_toxic("p", "gone").status == 404);
  CHECK(table.show_toxic("p", "gone").body["error"] == "toxic not found");
  auto updated = table.update_toxic("p", "latency_downstream", R"({"attributes": {"latency": 500}})");
  CHECK(updated.status == 200);
  CHECK(updated.body["attributes"]["latency"] == 500);
  CHECK(fake.toxics.at("p")[1].attribute("latency") == 500);
  CHECK(table.update_toxic("p", "gone", "{}").status == 404);
  CHECK(table.update_toxic("p", "latency_downstream", R"({"toxicity": 7})").status == 400);
  CHECK(table.remove_toxic("p", "latency_downstream").status == 204);
  CHECK(table.remove_toxic("p", "latency_downstream").status == 404);
  CHECK(table.list_toxics("p").body.size() == 1);
  CHECK(fake.toxics.at("p").size() == 1);
  CHECK(table.list_toxics("nope").status == 404);
}

TEST_CASE("POST /reset enables every proxy and removes every toxic") {
  FakeHost fake;
  ProxyTable table(fake.host());
  REQUIRE(table.create(R"({"name": "a", "upstream": "u:1", "enabled": false})").status == 201);
  REQUIRE(table.create(R"({"name": "b", "upstream": "u:1"})").status == 201);
  REQUIRE(table.add_toxic("b", R"({"type": "timeout"})").status == 200);
  CHECK(table.reset().status == 204);
  CHECK(table.show("a").body["enabled"] == true);
  CHECK(fake.open.count("a") == 1);
  CHECK(table.list_toxics("b").body.empty());
  CHECK(fake.toxics.at("b").empty());
}

TEST_CASE("POST /populate keeps identical proxies, replaces changed ones, and checks everything first") {
  FakeHost fake;
  ProxyTable table(fake.host(), 3);
  REQUIRE(table.create(R"({"name": "same", "listen": "127.0.0.1:7000", "upstream": "u:1"})").status == 201);
  REQUIRE(table.add_toxic("same", R"({"type": "timeout"})").status == 200);
  REQUIRE(table.create(R"({"name": "moved", "listen": "127.0.0.1:7001", "upstream": "u:1"})").status == 201);
  auto answer = table.populate(R"([{"name": "same", "listen": "127.0.0.1:7000", "upstream": "u:1"},
                                  {"name": "moved", "listen": "127.0.0.1:7001", "upstream": "u:2"},
                                  {"name": "new", "listen": "127.0.0.1:7002", "upstream": "u:3", "enabled": false}])");
  CHECK(answer.status == 201);
  REQUIRE(answer.body["proxies"].size() == 3);
  CHECK(answer.body["proxies"][0]["toxics"].size() == 1);  // kept, toxics and all
  CHECK(answer.body["proxies"][1]["upstream"] == "u:2");
  CHECK(answer.body["proxies"][2]["enabled"] == false);
  CHECK(table.size() == 3);

  // One bad entry: nothing changes.
  auto bad = table.populate(R"([{"name": "x", "upstream": "u:9"}, {"name": "y"}])");
  CHECK(bad.status == 400);
  CHECK(bad.body["error"] == "missing required field: upstream at proxy 2");
  CHECK(table.show("x").status == 404);
  CHECK(table.populate(R"([{"name": "x", "upstream": "u"}, {"name": "x", "upstream": "u"}])").status == 400);
  CHECK(table.populate(R"({"name": "x"})").status == 400);
  CHECK(table.populate(R"([{"name": "x", "upstream": "u"}])").status == 409);  // a 4th proxy: over max_proxies
  CHECK(table.populate("[]").status == 201);
}

TEST_CASE("destroying the table closes every open proxy") {
  FakeHost fake;
  {
    ProxyTable table(fake.host());
    REQUIRE(table.create(R"({"name": "a", "upstream": "u:1"})").status == 201);
    REQUIRE(table.create(R"({"name": "b", "upstream": "u:1", "enabled": false})").status == 201);
  }
  CHECK(fake.open.empty());
  CHECK(fake.closes == 1);  // only the enabled one was open
}

TEST_CASE("errors carry Toxiproxy's body: error and status") {
  auto a = error_answer({404, "proxy not found"});
  CHECK(a.status == 404);
  CHECK(a.body.dump() == R"({"error":"proxy not found","status":404})");
}

TEST_CASE("Kafka or not: the probe's verdict, or the body's kafka field, shown with its reason") {
  FakeHost fake;
  ProxyHost host = fake.host();
  std::vector<std::string> probed;
  host.probe_kafka = [&probed](const std::string& upstream) {
    probed.push_back(upstream);
    return upstream == "broker:9092" ? std::string() : std::string("answer with a wrong correlation id");
  };
  ProxyTable table(host);
  auto kafka = table.create(R"({"name": "k", "upstream": "broker:9092"})");
  CHECK(kafka.body["kafka"] == true);
  CHECK(kafka.body["kafka_reason"] == "the upstream answered an ApiVersions request");
  CHECK(kafka.body["relay"] == "tcp");
  auto redis = table.create(R"({"name": "r", "upstream": "redis:6379"})");
  CHECK(redis.body["kafka"] == false);
  CHECK(redis.body["kafka_reason"] == "the upstream did not answer ApiVersions: answer with a wrong correlation id");
  auto forced = table.create(R"({"name": "f", "upstream": "redis:6379", "kafka": true})");
  CHECK(forced.body["kafka"] == true);
  CHECK(forced.body["kafka_reason"].get<std::string>().find("kafka field") != std::string::npos);
  CHECK(probed.size() == 2);  // the forced one was not probed
  CHECK(table.create(R"({"name": "x", "upstream": "u:1", "kafka": "yes"})").status == 400);
  // A new upstream is probed again.
  CHECK(table.update("r", R"({"upstream": "broker:9092"})").body["kafka"] == true);
  CHECK(table.update("r", R"({"kafka": false})").body["kafka"] == false);
  CHECK(table.populate(R"([{"name": "p", "upstream": "broker:9092"}])").body["proxies"][0]["kafka"] == true);
  // Without a probe: not probed.
  ProxyTable bare(ProxyHost{});
  CHECK(bare.create(R"({"name": "n", "upstream": "u:1"})").body["kafka_reason"] == "not probed");
}

TEST_CASE("advertise: a host or node=host:port items; anything else is a 400 in Toxiproxy's error shape") {
  FakeHost fake;
  ProxyTable table(fake.host());
  auto nodes = table.create(R"({"name": "n", "upstream": "broker:9092", "advertise": "1=localhost:32771,2=localhost:32772"})");
  CHECK(nodes.status == 201);
  CHECK(nodes.body["advertise"] == "1=localhost:32771,2=localhost:32772");
  CHECK(table.create(R"({"name": "h", "upstream": "broker:9092", "advertise": "localhost"})").status == 201);
  auto bare = table.create(R"({"name": "b", "upstream": "broker:9092", "advertise": "localhost:32771"})");
  CHECK(bare.status == 400);
  CHECK(bare.body["status"] == 400);
  CHECK(bare.body["error"] == "advertise: 'localhost:32771': a host:port needs a node id (N=host:port); a bare host gives only the host");
  auto port = table.create(R"({"name": "p", "upstream": "broker:9092", "advertise": "1=localhost:99999"})");
  CHECK(port.status == 400);
  CHECK(port.body["error"] == "advertise: node 1: 'localhost:99999': port must be a number from 1 to 65535");
  CHECK(table.create(R"({"name": "d", "upstream": "broker:9092", "advertise": "1=a:1,1=a:2"})").body["error"] ==
        "advertise: node 1 is given twice");
  CHECK(table.create(R"({"name": "o", "upstream": "broker:9092", "advertise": {"1": "a:1"}})").status == 400);
  // An update is checked the same way, and a refused one changes nothing.
  CHECK(table.update("n", R"({"advertise": "x=a:1"})").status == 400);
  CHECK(table.show("n").body["advertise"] == "1=localhost:32771,2=localhost:32772");
  CHECK(table.size() == 2);
}

TEST_CASE("an upstream not up at creation is probed again at the first connection (issue #34)") {
  FakeHost fake;
  ProxyHost host = fake.host();
  std::mutex mutex;
  std::string answer = "connect: Connection refused";  // what probe_kafka says (under mutex)
  std::map<std::string, std::function<void()>> armed;  // the held proxies' callbacks (under mutex)
  std::vector<std::string> released, kafka_opened;     // (under mutex)
  host.probe_kafka = [&](const std::string&) {
    std::lock_guard lock(mutex);
    return answer;
  };
  host.on_first_connection = [&](const std::string& name, std::function<void()> callback) {
    std::lock_guard lock(mutex);
    armed[name] = std::move(callback);
  };
  host.release = [&](const std::string& name) {
    std::lock_guard lock(mutex);
    released.push_back(name);
  };
  host.open_kafka = [&](const std::string& name, const KafkaOptions&, const std::string& listen, const std::string&, std::string& bound,
                        ApiError&) {
    std::lock_guard lock(mutex);
    kafka_opened.push_back(name + "@" + listen);
    bound = listen;
    return true;
  };
  auto fire = [&](const std::string& name) {
    std::function<void()> callback;
    {
      std::lock_guard lock(mutex);
      REQUIRE(armed.count(name));
      callback = std::move(armed[name]);
      armed.erase(name);
    }
    callback();  // the data plane's first connection
  };
  ProxyTable table(host);
  auto wait_for = [&](const std::string& name, auto done) {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!done(table.show(name).body) && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    return table.show(name).body;
  };

  auto k = table.create(R"({"name": "k", "upstream": "broker:9092"})");
  CHECK(k.body["kafka"] == false);
  CHECK(k.body["relay"] == "tcp");
  CHECK(k.body["kafka_reason"] ==
        "the upstream was not up when probed (connect: Connection refused): probed again at the first connection");
  auto t = table.create(R"({"name": "t", "upstream": "echo:7"})");
  auto still = table.create(R"({"name": "s", "upstream": "later:1"})");
  auto plain = table.create(R"({"name": "p", "upstream": "x:1", "kafka": false})");
  {
    std::lock_guard lock(mutex);
    CHECK(armed.count("k"));
    CHECK(armed.count("t"));
    CHECK_FALSE(armed.count("p"));  // the kafka field decided: nothing held
    answer = "";                    // the broker is up now
  }
  fire("k");
  auto shown = wait_for("k", [](const auto& b) { return b["relay"] == "kafka"; });
  CHECK(shown["kafka"] == true);
  CHECK(shown["relay"] == "kafka");
  CHECK(shown["kafka_reason"] == "probe at first connection: the upstream answered an ApiVersions request");
  {
    std::lock_guard lock(mutex);
    CHECK(kafka_opened == std::vector<std::string>{"k@" + k.body["listen"].get<std::string>()});  // the same address
    answer = "answer with a wrong correlation id";                                                // an echo server
  }
  CHECK_FALSE(fake.open.count("k"));  // the plain relay's listener closed
  fire("t");
  shown = wait_for("t", [](const auto& b) { return b["kafka_reason"].template get<std::string>().rfind("probe at", 0) == 0; });
  CHECK(shown["kafka"] == false);
  CHECK(shown["relay"] == "tcp");
  CHECK(shown["kafka_reason"] == "probe at first connection: the upstream did not answer ApiVersions: answer with a wrong correlation id");
  {
    std::lock_guard lock(mutex);
    CHECK(released == std::vector<std::string>{"t"});  // its held connection goes on
    answer = "connect: Connection refused";
  }
  fire("s");  // still down: released (the relay closes it) and held again for the next
  shown =
      wait_for("s", [](const auto& b) { return b["kafka_reason"].template get<std::string>().find("at the next") != std::string::npos; });
  {
    std::lock_guard lock(mutex);
    CHECK(armed.count("s"));  // armed before the reason was shown (both under the table's lock)
    CHECK(released.back() == "s");
  }
  CHECK(shown["kafka_reason"] == "the upstream was not up at the first connection (connect: Connection refused): probed again at the next");
  CHECK(still.status == 201);
  CHECK(plain.status == 201);
  CHECK(t.status == 201);
}
