// Ports for unit tests that must name a port before anything listens on it (a Proxy's listener,
// its broker_ports block, an address nobody listens on).
//
// "Bind port 0 and release it" hands out a port from the kernel's ephemeral range, which any
// outgoing connection on the machine may take before the test binds it. These come from the
// same pool as tests/integration/ports.py, with the same cross-process reservation: outside
// /proc/sys/net/ipv4/ip_local_port_range, in slabs of 200 ports leased with an exclusive flock
// on a file per slab in /tmp/kproxy-test-ports ($KPROXY_TEST_PORT_LOCKS; $KPROXY_TEST_PORTS=LO-HI
// sets the pool), so a unit run, an integration run and another checkout on the same machine
// never hand out the same port. Each port is bind-checked before it is handed out.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kproxy::testing {

/// A base port such that base .. base+count-1 (count <= 200) are reserved for this process and
/// free now. Fails the test (doctest FAIL) when no block can be found.
uint16_t reserved_port_block(size_t count);
/// One reserved, free port.
inline uint16_t reserved_port() { return reserved_port_block(1); }

}  // namespace kproxy::testing
