// Drives kproxy's Toxiproxy API with toxiproxy-node-client (npm, pinned in scripts/setup, installed
// in .cache/node-toxiproxy; NODE_PATH points there) and measures what the toxics do on a TCP echo
// upstream. Usage: node driver.js API_URL ECHO_ADDRESS. Prints one JSON object with what it saw;
// tests/integration/test_toxiproxy_tcp.py judges it. Every wait is bounded (5 s per exchange).
"use strict";
const net = require("net");
const { Toxiproxy } = require("toxiproxy-node-client");

function exchange(address, payload) {
  // Sends payload, resolves {ms, data} when as many bytes came back, or {error} (a reset, a close).
  const [host, port] = [address.slice(0, address.lastIndexOf(":")), Number(address.slice(address.lastIndexOf(":") + 1))];
  return new Promise((resolve) => {
    const started = Date.now();
    let got = Buffer.alloc(0);
    const socket = net.connect({ host, port }, () => socket.write(payload));
    const timer = setTimeout(() => { socket.destroy(); resolve({ error: "timeout" }); }, 5000);
    socket.on("data", (d) => {
      got = Buffer.concat([got, d]);
      if (got.length >= payload.length) {
        clearTimeout(timer);
        socket.destroy();
        resolve({ ms: Date.now() - started, data: got.toString() });
      }
    });
    socket.on("error", (e) => { clearTimeout(timer); resolve({ error: e.code || String(e) }); });
    socket.on("close", () => { clearTimeout(timer); resolve({ error: "closed", data: got.toString() }); });
  });
}

async function main() {
  const [api, echo] = process.argv.slice(2);
  const toxiproxy = new Toxiproxy(api);
  const out = {};
  out.version = await toxiproxy.getVersion();
  const proxy = await toxiproxy.createProxy({ name: "node-echo", listen: "127.0.0.1:0", upstream: echo });
  out.listen = proxy.listen;
  out.plain = await exchange(proxy.listen, "hello");
  const latency = await proxy.addToxic({ type: "latency", stream: "downstream", toxicity: 1, attributes: { latency: 300, jitter: 0 } });
  out.latency_name = latency.name;
  out.latency = await exchange(proxy.listen, "slow");
  await latency.remove();
  out.after_latency = await exchange(proxy.listen, "fast");
  const reset = await proxy.addToxic({ type: "reset_peer", stream: "downstream", toxicity: 1, attributes: { timeout: 0 } });
  out.reset = await exchange(proxy.listen, "r");
  await reset.remove();
  try {
    await proxy.addToxic({ type: "no_such_toxic", stream: "downstream", toxicity: 1, attributes: {} });
    out.bad_toxic = "accepted";
  } catch (e) {
    out.bad_toxic = String(e.message || e);
  }
  const disabled = await proxy.update({ enabled: false, listen: proxy.listen, upstream: echo });
  out.disabled_enabled = disabled.enabled;
  out.while_disabled = await exchange(proxy.listen, "x");
  await proxy.update({ enabled: true, listen: proxy.listen, upstream: echo });
  out.reenabled = await exchange(proxy.listen, "again");
  await proxy.remove();
  out.proxies_after = Object.keys(await toxiproxy.getAll());
  console.log(JSON.stringify(out));
}

main().catch((e) => { console.log(JSON.stringify({ failed: String(e && e.stack || e) })); process.exitCode = 1; });
