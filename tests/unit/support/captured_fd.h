// CapturedFd: what a test's code writes to standard output or standard error (report_bound's
// lines, the logger's, `kproxy tap`'s), caught at the file descriptor, so that stdio, spdlog and
// plain write(2) are all seen.
//
// Check what was caught after finish(): while the capture is on, a failing CHECK's own report
// would be caught too.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <string>

#include <doctest/doctest.h>

namespace kproxy::testing {

class CapturedFd {
 public:
  /// From now on, what is written to `fd` (STDOUT_FILENO or STDERR_FILENO) goes to a temporary file.
  explicit CapturedFd(int fd) : fd_(fd) {
    std::fflush(nullptr);
    file_ = std::tmpfile();
    REQUIRE(file_ != nullptr);
    saved_ = ::dup(fd_);
    REQUIRE(saved_ >= 0);
    REQUIRE(::dup2(::fileno(file_), fd_) == fd_);
  }
  ~CapturedFd() {
    restore();
    if (file_) std::fclose(file_);
  }
  CapturedFd(const CapturedFd&) = delete;
  CapturedFd& operator=(const CapturedFd&) = delete;

  /// Puts `fd` back and returns everything written to it meanwhile.
  std::string finish() {
    restore();
    std::string out;
    char buf[4096];
    off_t at = 0;
    for (ssize_t n; (n = ::pread(::fileno(file_), buf, sizeof buf, at)) > 0; at += n) out.append(buf, static_cast<size_t>(n));
    return out;
  }

 private:
  void restore() {
    if (saved_ < 0) return;
    std::fflush(nullptr);
    ::dup2(saved_, fd_);
    ::close(saved_);
    saved_ = -1;
  }

  int fd_;
  int saved_ = -1;
  std::FILE* file_ = nullptr;
};

}  // namespace kproxy::testing
