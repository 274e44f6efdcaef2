// The Go Toxiproxy client (github.com/Shopify/toxiproxy/v2/client, pinned in go.mod) driving a
// Toxiproxy API: kproxy's in tests/integration/test_toxiproxy_clients.py (docs/toxiproxy.md).
//
//	toxiproxy-go-driver tcp   API_URL ECHO_ADDR   creates a proxy to a TCP echo server and measures its toxics
//	toxiproxy-go-driver kafka API_URL BROKER_ADDR creates a proxy to a Kafka broker, adds a kafka_error toxic
//	toxiproxy-go-driver kafka-deny|kafka-clear API_URL BROKER_ADDR  one more step on that proxy (runKafkaStep)
//
// It prints one JSON object (what the API answered, what was measured) as its last stdout line;
// the test asserts on it. Every socket operation has a deadline.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"syscall"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2/client"
)

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, format+"\n", args...)
	os.Exit(1)
}

// roundTrip sends payload through the proxy and reads it back; the seconds taken, or the error.
func roundTrip(addr string, payload []byte) (float64, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	start := time.Now()
	if _, err := conn.Write(payload); err != nil {
		return 0, err
	}
	got := make([]byte, len(payload))
	if _, err := io.ReadFull(conn, got); err != nil {
		return 0, err
	}
	if string(got) != string(payload) {
		return 0, errors.New("the bytes came back changed")
	}
	return time.Since(start).Seconds(), nil
}

// errName names a socket error the way the test compares it.
func errName(err error) string {
	switch {
	case err == nil:
		return "none"
	case errors.Is(err, syscall.ECONNRESET):
		return "ECONNRESET"
	case errors.Is(err, syscall.ECONNREFUSED):
		return "ECONNREFUSED"
	case errors.Is(err, io.EOF):
		return "EOF"
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "deadline"
	}
	return err.Error()
}

// waitEnd sends a little and waits (at most 10 s) for the connection to end: how and when.
func waitEnd(addr string) (string, float64, int) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return errName(err), 0, 0
	}
	defer conn.Close()
	start := time.Now()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	conn.Write([]byte("ping"))
	buf := make([]byte, 64)
	n, err := conn.Read(buf)
	total := n
	for err == nil {
		n, err = conn.Read(buf)
		total += n
	}
	return errName(err), time.Since(start).Seconds(), total
}

func toxicNames(p *toxiproxy.Proxy) []string {
	toxics, err := p.Toxics()
	if err != nil {
		fail("Toxics: %v", err)
	}
	names := []string{}
	for _, t := range toxics {
		names = append(names, t.Name)
	}
	sort.Strings(names)
	return names
}

func apiStatus(err error) int {
	var apiErr *toxiproxy.ApiError
	if errors.As(err, &apiErr) {
		return apiErr.Status
	}
	return 0
}

func runTCP(client *toxiproxy.Client, upstream string) map[string]any {
	out := map[string]any{}
	version, err := client.Version()
	if err != nil {
		fail("Version: %v", err)
	}
	out["version"] = string(version)
	proxy, err := client.CreateProxy("go-echo", "127.0.0.1:0", upstream)
	if err != nil {
		fail("CreateProxy: %v", err)
	}
	out["created"] = map[string]any{"name": proxy.Name, "listen": proxy.Listen, "upstream": proxy.Upstream, "enabled": proxy.Enabled}
	_, err = client.CreateProxy("go-echo", "127.0.0.1:0", upstream)
	out["duplicate_status"] = apiStatus(err)
	addr := proxy.Listen

	plain, err := roundTrip(addr, []byte("hello"))
	out["plain"] = map[string]any{"seconds": plain, "error": errName(err)}

	if _, err := proxy.AddToxic("", "latency", "downstream", 1.0, toxiproxy.Attributes{"latency": 300}); err != nil {
		fail("AddToxic latency: %v", err)
	}
	out["latency_toxics"] = toxicNames(proxy)
	slow, err := roundTrip(addr, []byte("slow"))
	out["latency"] = map[string]any{"seconds": slow, "error": errName(err)}
	if err := proxy.RemoveToxic("latency_downstream"); err != nil {
		fail("RemoveToxic latency: %v", err)
	}
	fast, err := roundTrip(addr, []byte("fast"))
	out["after_latency"] = map[string]any{"seconds": fast, "error": errName(err), "toxics": toxicNames(proxy)}

	// bandwidth: 100 KB/s on what comes back; 150 000 bytes.
	if _, err := proxy.AddToxic("cap", "bandwidth", "downstream", 1.0, toxiproxy.Attributes{"rate": 100}); err != nil {
		fail("AddToxic bandwidth: %v", err)
	}
	big := make([]byte, 150000)
	for i := range big {
		big[i] = byte(i * 7)
	}
	capped, err := roundTrip(addr, big)
	out["bandwidth"] = map[string]any{"seconds": capped, "bytes": len(big), "error": errName(err)}
	updated, err := proxy.UpdateToxic("cap", -1, toxiproxy.Attributes{"rate": 1000})
	if err != nil {
		fail("UpdateToxic bandwidth: %v", err)
	}
	out["bandwidth_updated_rate"] = updated.Attributes["rate"]
	if err := proxy.RemoveToxic("cap"); err != nil {
		fail("RemoveToxic bandwidth: %v", err)
	}

	// timeout 200 ms upstream: nothing passes, the connection is closed after 200 ms.
	if _, err := proxy.AddToxic("", "timeout", "upstream", 1.0, toxiproxy.Attributes{"timeout": 200}); err != nil {
		fail("AddToxic timeout: %v", err)
	}
	how, after, n := waitEnd(addr)
	out["timeout"] = map[string]any{"end": how, "seconds": after, "bytes": n}
	if err := proxy.RemoveToxic("timeout_upstream"); err != nil {
		fail("RemoveToxic timeout: %v", err)
	}

	// reset_peer 100 ms: an RST.
	if _, err := proxy.AddToxic("", "reset_peer", "downstream", 1.0, toxiproxy.Attributes{"timeout": 100}); err != nil {
		fail("AddToxic reset_peer: %v", err)
	}
	how, after, n = waitEnd(addr)
	out["reset"] = map[string]any{"end": how, "seconds": after, "bytes": n}
	if err := proxy.RemoveToxic("reset_peer_downstream"); err != nil {
		fail("RemoveToxic reset_peer: %v", err)
	}

	// A Kafka toxic by its free-form type string: listed like any other; it does nothing to raw bytes.
	kt, err := proxy.AddToxic("produce-errors", "kafka_error", "downstream", 1.0,
		toxiproxy.Attributes{"api": "Produce", "error": "NOT_LEADER_OR_FOLLOWER"})
	if err != nil {
		fail("AddToxic kafka_error: %v", err)
	}
	out["kafka_error"] = map[string]any{"name": kt.Name, "type": kt.Type, "stream": kt.Stream, "attributes": kt.Attributes}
	out["kafka_error_toxics"] = toxicNames(proxy)
	_, err = proxy.AddToxic("", "kafka_error", "downstream", 1.0, toxiproxy.Attributes{"api": "NoSuchApi", "error": "NONE"})
	out["bad_kafka_toxic_status"] = apiStatus(err)
	if err := proxy.RemoveToxic("produce-errors"); err != nil {
		fail("RemoveToxic kafka_error: %v", err)
	}
	again, err := roundTrip(addr, []byte("clean"))
	out["clean"] = map[string]any{"seconds": again, "error": errName(err), "toxics": toxicNames(proxy)}

	if err := proxy.Disable(); err != nil {
		fail("Disable: %v", err)
	}
	_, err = roundTrip(addr, []byte("x"))
	out["while_disabled"] = errName(err)
	if err := proxy.Enable(); err != nil {
		fail("Enable: %v", err)
	}
	_, err = roundTrip(addr, []byte("again"))
	out["reenabled"] = errName(err)

	all, err := client.Proxies()
	if err != nil {
		fail("Proxies: %v", err)
	}
	out["proxies"] = len(all)
	if err := proxy.Delete(); err != nil {
		fail("Delete: %v", err)
	}
	_, err = client.Proxy("go-echo")
	out["after_delete_status"] = apiStatus(err)
	_, err = roundTrip(addr, []byte("x"))
	out["after_delete"] = errName(err)
	return out
}

func runKafka(client *toxiproxy.Client, broker string) map[string]any {
	out := map[string]any{}
	proxy, err := client.CreateProxy("go-kafka", "127.0.0.1:0", broker)
	if err != nil {
		fail("CreateProxy: %v", err)
	}
	out["listen"] = proxy.Listen
	t, err := proxy.AddToxic("fetch-errors", "kafka_error", "downstream", 1.0,
		toxiproxy.Attributes{"api": "Fetch", "error": "NOT_LEADER_OR_FOLLOWER"})
	if err != nil {
		fail("AddToxic kafka_error: %v", err)
	}
	out["kafka_error"] = map[string]any{"name": t.Name, "type": t.Type, "attributes": t.Attributes}
	out["toxics"] = toxicNames(proxy)
	if _, err := proxy.AddToxic("", "latency", "downstream", 1.0, toxiproxy.Attributes{"latency": 200}); err != nil {
		fail("AddToxic latency: %v", err)
	}
	out["toxics_with_latency"] = toxicNames(proxy)
	return out
}

// kafkaRateKBs is the rate of the bandwidth toxic "kafka-bandwidth" adds (KB/s); the test measures it.
const kafkaRateKBs = 2

// runKafkaStep is one step on the proxy runKafka made, with a Java producer and consumer or the
// test's own requests between the steps (the test runs those): "kafka-deny" adds a kafka_error
// toxic answering InitProducerId with TRANSACTIONAL_ID_AUTHORIZATION_FAILED; "kafka-bandwidth",
// "kafka-timeout" and "kafka-reset" add Toxiproxy's bandwidth (kafkaRateKBs), timeout (0: never
// closes) and reset_peer (0 ms) toxics downstream; "kafka-clear" removes every toxic.
func runKafkaStep(client *toxiproxy.Client, step string) map[string]any {
	out := map[string]any{}
	proxy, err := client.Proxy("go-kafka")
	if err != nil {
		fail("Proxy: %v", err)
	}
	shaping := map[string]struct {
		kind  string
		attrs toxiproxy.Attributes
	}{
		"kafka-bandwidth": {"bandwidth", toxiproxy.Attributes{"rate": kafkaRateKBs}},
		"kafka-timeout":   {"timeout", toxiproxy.Attributes{"timeout": 0}},
		"kafka-reset":     {"reset_peer", toxiproxy.Attributes{"timeout": 0}},
	}
	if s, ok := shaping[step]; ok {
		t, err := proxy.AddToxic("", s.kind, "downstream", 1.0, s.attrs)
		if err != nil {
			fail("AddToxic %s: %v", s.kind, err)
		}
		out["added"] = map[string]any{"name": t.Name, "type": t.Type, "attributes": t.Attributes}
	} else if step == "kafka-deny" {
		if _, err := proxy.AddToxic("deny-init", "kafka_error", "downstream", 1.0,
			toxiproxy.Attributes{"api": "InitProducerId", "error": "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}); err != nil {
			fail("AddToxic kafka_error: %v", err)
		}
	} else {
		toxics, err := proxy.Toxics()
		if err != nil {
			fail("Toxics: %v", err)
		}
		for _, t := range toxics {
			if err := proxy.RemoveToxic(t.Name); err != nil {
				fail("RemoveToxic %s: %v", t.Name, err)
			}
		}
	}
	out["toxics"] = toxicNames(proxy)
	return out
}

func main() {
	if len(os.Args) != 4 {
		fail("usage: %s tcp|kafka API_URL UPSTREAM", os.Args[0])
	}
	client := toxiproxy.NewClient(os.Args[2])
	var out map[string]any
	switch os.Args[1] {
	case "tcp":
		out = runTCP(client, os.Args[3])
	case "kafka":
		out = runKafka(client, os.Args[3])
	case "kafka-deny", "kafka-clear", "kafka-bandwidth", "kafka-timeout", "kafka-reset":
		out = runKafkaStep(client, os.Args[1])
	default:
		fail("unknown mode %q", os.Args[1])
	}
	line, _ := json.Marshal(out)
	fmt.Println(string(line))
}
