#include "proxy/runtime/connection_balancer.h"

#include <thread>
#include <vector>

#include <doctest/doctest.h>

using kproxy::runtime::ConnectionBalancer;

TEST_CASE("ConnectionBalancer: a burst accepted by one worker is spread evenly") {
  ConnectionBalancer b(2);
  std::vector<size_t> owners;
  for (int i = 0; i < 10; ++i) owners.push_back(b.assign(0));  // worker 0 wins every wake-up
  CHECK(b.load(0) == 5);
  CHECK(b.load(1) == 5);
  // The acceptor keeps a connection on a tie (no hand-over), gives it away when it holds more.
  CHECK(owners == std::vector<size_t>{0, 1, 0, 1, 0, 1, 0, 1, 0, 1});
}

TEST_CASE("ConnectionBalancer: closed connections make room on their worker") {
  ConnectionBalancer b(3);
  for (int i = 0; i < 6; ++i) b.assign(static_cast<size_t>(i % 3));
  CHECK(b.load(0) == 2);
  CHECK(b.load(1) == 2);
  CHECK(b.load(2) == 2);
  b.release(2);
  b.release(2);
  CHECK(b.assign(0) == 2);  // the emptiest, though worker 0 accepted it
  CHECK(b.assign(1) == 2);
  CHECK(b.assign(1) == 1);  // all at 2 again: the acceptor keeps it
  CHECK(b.load(1) == 3);
}

TEST_CASE("ConnectionBalancer: a draining worker gets nothing, even as acceptor") {
  ConnectionBalancer b(2);
  b.exclude(1);
  for (int i = 0; i < 4; ++i) CHECK(b.assign(1) == 0);
  CHECK(b.load(0) == 4);
  CHECK(b.load(1) == 0);
  b.exclude(0);  // every worker drains: the acceptor is answered (the worker refuses itself)
  CHECK(b.assign(1) == 1);
}

TEST_CASE("ConnectionBalancer: one worker, and indexes out of range") {
  ConnectionBalancer one(1);
  CHECK(one.workers() == 1);
  CHECK(one.assign(0) == 0);
  CHECK(one.assign(7) == 0);  // an unknown acceptor is taken as worker 0
  CHECK(one.load(0) == 2);
  one.release(5);  // ignored
  CHECK(one.load(5) == 0);
  CHECK(one.load(0) == 2);
  ConnectionBalancer none(0);  // treated as one worker
  CHECK(none.workers() == 1);
}

TEST_CASE("ConnectionBalancer: concurrent acceptors keep the workers within a few connections") {
  ConnectionBalancer b(2);
  constexpr int kPerThread = 20000;
  std::thread t0([&] {
    for (int i = 0; i < kPerThread; ++i) b.assign(0);
  });
  std::thread t1([&] {
    for (int i = 0; i < kPerThread; ++i) b.assign(1);
  });
  t0.join();
  t1.join();
  CHECK(b.load(0) + b.load(1) == 2 * kPerThread);  // nothing lost
  // Races can put two assignments on one worker; they never accumulate.
  CHECK(b.load(0) - b.load(1) <= 2);
  CHECK(b.load(1) - b.load(0) <= 2);
}
