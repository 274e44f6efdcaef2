#include "proxy/runtime/memory_return.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

// Under a sanitizer, malloc and mallopt are the sanitizer's, but malloc_trim is glibc's own: it
// walks glibc's arenas, which nothing initialised, and two workers trimming at once raced in
// glibc's first-use setup (a SEGV in mtrim reading address 0x8, AddressSanitizer, 12-04). glibc's
// arenas hold nothing there to give back, so the trim is skipped.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define KPROXY_FOREIGN_ALLOCATOR 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) || __has_feature(memory_sanitizer)
#define KPROXY_FOREIGN_ALLOCATOR 1
#endif
#endif

namespace kproxy::runtime {

bool configure_allocator() {
#if defined(__GLIBC__) && !defined(KPROXY_FOREIGN_ALLOCATOR)
  // mallopt(3): setting M_MMAP_THRESHOLD disables its dynamic adjustment.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kOwnMappingThreshold)) == 1;
#else
  return false;
#endif
}

bool trim_free_memory() {
#if defined(__GLIBC__) && !defined(KPROXY_FOREIGN_ALLOCATOR)
  return malloc_trim(0) == 1;
#else
  return false;
#endif
}

}  // namespace kproxy::runtime
