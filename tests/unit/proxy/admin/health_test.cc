#include "proxy/admin/health.h"

#include <thread>

#include <doctest/doctest.h>

using namespace kproxy::admin;
using namespace std::chrono_literals;

TEST_CASE("health: live when every worker runs its ping, not when one is stuck") {
  bool second_stuck = false;
  HealthHooks hooks;
  hooks.worker_count = [] { return size_t{2}; };
  hooks.post = [&](size_t i, std::function<void()> task) {
    if (i == 1 && second_stuck) return;  // never runs: a loop stuck in a callback
    std::thread(std::move(task)).detach();
  };
  Health health(hooks, 300ms, 300ms);
  CHECK(health.liveness().ok);
  second_stuck = true;
  HealthReport r = health.liveness();
  CHECK_FALSE(r.ok);
  CHECK(r.json.find("\"alive\":false") != std::string::npos);
}

TEST_CASE("health: ready only once the upstream answered, never while draining") {
  bool draining = false;
  HealthHooks hooks;
  hooks.worker_count = [] { return size_t{1}; };
  hooks.post = [](size_t, std::function<void()> task) { task(); };
  hooks.upstreams = [] { return std::vector<std::string>{"127.0.0.1:1"}; };  // nothing listens on port 1
  hooks.draining = [&] { return draining; };
  Health health(hooks, 300ms, 300ms);
  HealthReport r = health.readiness();
  CHECK_FALSE(r.ok);
  CHECK(r.json.find("\"error\"") != std::string::npos);
  health.upstream_answered(0);
  CHECK(health.readiness().ok);
  draining = true;
  CHECK_FALSE(health.readiness().ok);
}

TEST_CASE("health: probe_kafka reports what failed") {
  CHECK(probe_kafka("127.0.0.1:1", 300ms) != "");
  CHECK(probe_kafka("no-port", 300ms) != "");
}
