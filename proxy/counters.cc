#include "proxy/counters.h"

namespace kproxy::proxy {

ProxyCounters& counters() {
  static ProxyCounters instance;
  return instance;
}

}  // namespace kproxy::proxy
