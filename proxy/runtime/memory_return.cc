#include "proxy/runtime/memory_return.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kproxy::proxy {

bool configure_allocator() {
#if defined(__GLIBC__)
  // mallopt(3): setting M_MMAP_THRESHOLD disables its dynamic adjustment.
  return mallopt(M_MMAP_THRESHOLD, static_cast<int>(kOwnMappingThreshold)) == 1;
#else
  return false;
#endif
}

bool trim_free_memory() {
#if defined(__GLIBC__)
  return malloc_trim(0) == 1;
#else
  return false;
#endif
}

}  // namespace kproxy::proxy
