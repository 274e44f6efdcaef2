#include "tests/unit/support/test_ports.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <doctest/doctest.h>

#include <cerrno>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace kproxy::testing {
namespace {

constexpr int kSlabSize = 200;      // as tests/integration/ports.py SLAB_SIZE
constexpr int kLowestPort = 12000;  // as LOWEST_PORT there

std::pair<int, int> pool() {
  if (const char* env = std::getenv("KPROXY_TEST_PORTS")) {
    std::string s(env);
    auto dash = s.find('-');
    if (dash != std::string::npos) return {std::stoi(s.substr(0, dash)), std::stoi(s.substr(dash + 1))};
  }
  int lo = 32768, hi = 60999;
  std::ifstream range("/proc/sys/net/ipv4/ip_local_port_range");
  if (!(range >> lo >> hi)) lo = 32768, hi = 60999;
  std::pair<int, int> below{kLowestPort, lo - 1}, above{hi + 1, 65535};
  return below.second - below.first >= above.second - above.first ? below : above;
}

bool can_listen(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && ::listen(fd, 1) == 0;
  ::close(fd);
  return ok;
}

class Allocator {
 public:
  uint16_t block(size_t count) {
    std::lock_guard lock(mutex_);
    REQUIRE(count >= 1);
    REQUIRE(count <= static_cast<size_t>(kSlabSize));
    for (int tries = 0; tries < 64; ++tries) {
      if (slab_ < 0 || cursor_ + static_cast<int>(count) > slab_ + kSlabSize) {
        if (!lease()) FAIL("no test port slab free in the pool (lock files in " << lock_dir() << ")");
      }
      int base = cursor_;
      cursor_ += static_cast<int>(count);
      int busy = -1;
      for (int p = base; p < base + static_cast<int>(count) && busy < 0; ++p) {
        if (!can_listen(p)) busy = p;
      }
      if (busy < 0) return static_cast<uint16_t>(base);
      cursor_ = busy + 1;
    }
    FAIL("no " << count << " free consecutive test ports found");
    return 0;
  }

 private:
  static std::string lock_dir() {
    const char* env = std::getenv("KPROXY_TEST_PORT_LOCKS");
    return env ? env : "/tmp/kproxy-test-ports";
  }

  /// An exclusive flock on one more slab's file (held until the process exits).
  bool lease() {
    auto [lo, hi] = pool();
    int slabs = (hi - lo + 1) / kSlabSize;
    if (slabs <= 0) return false;
    std::string dir = lock_dir();
    ::mkdir(dir.c_str(), 01777);
    std::mt19937 rng(static_cast<unsigned>(::getpid()) ^ std::random_device{}());
    int first = static_cast<int>(rng() % static_cast<unsigned>(slabs));
    for (int k = 0; k < slabs; ++k) {
      int start = lo + ((first + k) % slabs) * kSlabSize;
      bool mine = false;
      for (int held : held_) mine = mine || held == start;
      if (mine) continue;
      std::string path = dir + "/slab-" + std::to_string(start) + "-" + std::to_string(start + kSlabSize - 1) + ".lock";
      int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0666);
      if (fd < 0) fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (fd < 0) continue;
      if (::flock(fd, LOCK_EX | LOCK_NB) != 0) {
        ::close(fd);
        continue;
      }
      held_.push_back(start);  // the descriptor stays open: the lock lasts as long as the process
      slab_ = start;
      cursor_ = start;
      return true;
    }
    return false;
  }

  std::mutex mutex_;
  std::vector<int> held_;
  int slab_ = -1;
  int cursor_ = 0;
};

}  // namespace

uint16_t reserved_port_block(size_t count) {
  static Allocator allocator;
  return allocator.block(count);
}

}  // namespace kproxy::testing
