#include "proxy/net/owned_descriptor.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <utility>

#include <doctest/doctest.h>

using kproxy::net::OwnedDescriptor;

namespace {
bool is_open(int fd) { return ::fcntl(fd, F_GETFD) != -1 || errno != EBADF; }
}  // namespace

TEST_CASE("OwnedDescriptor closes its descriptor when it goes, unless released") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  {
    OwnedDescriptor owned(fds[0]);
    CHECK(owned);
    CHECK(owned.get() == fds[0]);
  }
  CHECK_FALSE(is_open(fds[0]));
  int released = -1;
  {
    OwnedDescriptor owned(fds[1]);
    released = owned.release();
    CHECK_FALSE(owned);
  }
  CHECK(released == fds[1]);
  CHECK(is_open(fds[1]));
  ::close(fds[1]);
}

TEST_CASE("OwnedDescriptor moves ownership and closes what it held when assigned") {
  int fds[2];
  REQUIRE(::pipe(fds) == 0);
  OwnedDescriptor a(fds[0]);
  OwnedDescriptor b(std::move(a));
  CHECK_FALSE(a);
  CHECK(b.get() == fds[0]);
  OwnedDescriptor c(fds[1]);
  c = std::move(b);  // closes fds[1], takes fds[0]
  CHECK_FALSE(is_open(fds[1]));
  CHECK(c.get() == fds[0]);
  c.reset();
  CHECK_FALSE(is_open(fds[0]));
  OwnedDescriptor empty;
  CHECK_FALSE(empty);
  CHECK(empty.get() == -1);
}
