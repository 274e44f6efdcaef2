// Example: a Go test that starts kproxy in front of the test's Kafka broker, puts a fault rule
// through the admin API (docs/admin-api.openapi.yaml) and checks its effect. Standard library only.
//
//	KPROXY_BIN=/path/to/kproxy KAFKA_BOOTSTRAP=127.0.0.1:9092 go test ./...
package example

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// Kproxy is a running kproxy: Bootstrap for clients, PutRule/Rule for the admin API.
type Kproxy struct {
	Bootstrap string
	admin     string
	token     string
	cmd       *exec.Cmd
}

// boundAddresses reads kproxy's standard output: with port 0 in the config the kernel picks free
// ports (nothing to probe, nothing to race) and kproxy prints one "kproxy bound KIND LABEL
// HOST:PORT" line per socket it listens on. Each address is sent on the channel as it comes.
func boundAddresses(stdout io.Reader, out chan<- [3]string) {
	scanner := bufio.NewScanner(stdout)
	for scanner.Scan() {
		f := strings.Fields(scanner.Text())
		if len(f) == 5 && f[0] == "kproxy" && f[1] == "bound" {
			out <- [3]string{f[2], f[3], f[4]}
		}
	}
	close(out)
}

// StartKproxy starts kproxy in front of upstream and stops it when the test ends.
func StartKproxy(t *testing.T, binary, upstream string) *Kproxy {
	t.Helper()
	dir := t.TempDir()
	config := filepath.Join(dir, "kproxy.yaml")
	// Port 0 everywhere: the kernel picks, kproxy reports what it bound.
	yaml := fmt.Sprintf("listeners:\n  - name: test\n    listen: 127.0.0.1:0\n    upstream: %s\n    advertise: 127.0.0.1\n"+
		"    broker_ports: 0\nadmin: { listen: 127.0.0.1:0, token_env: EXAMPLE_KPROXY_TOKEN }\n", upstream)
	if err := os.WriteFile(config, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	log, err := os.Create(filepath.Join(dir, "kproxy.log"))
	if err != nil {
		t.Fatal(err)
	}
	kp := &Kproxy{token: "example-token"}
	kp.cmd = exec.Command(binary, "--config", config)
	kp.cmd.Stderr = log // the log; standard output carries only the "kproxy bound" lines
	stdout, err := kp.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	kp.cmd.Env = append(os.Environ(), "EXAMPLE_KPROXY_TOKEN="+kp.token)
	if err := kp.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	bound := make(chan [3]string, 64)
	go boundAddresses(stdout, bound)
	t.Cleanup(func() {
		kp.cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- kp.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("kproxy exited badly: %v (log %s)", err, log.Name())
			}
		case <-time.After(15 * time.Second):
			kp.cmd.Process.Kill()
			<-done
		}
		log.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for kp.Bootstrap == "" || kp.admin == "" {
		select {
		case b, open := <-bound:
			if !open {
				out, _ := os.ReadFile(log.Name())
				t.Fatalf("kproxy exited before it reported its ports:\n%s", out)
			}
			switch b[0] {
			case "listener":
				kp.Bootstrap = b[2]
			case "admin":
				kp.admin = "http://" + b[2]
			}
		case <-time.After(time.Until(deadline)):
			t.Fatal("kproxy did not report its ports within 20 s")
		}
	}
	// Broker ports are reported as they open; keep reading so that kproxy never blocks on the pipe.
	go func() {
		for range bound {
		}
	}()
	for {
		if status, _, err := kp.call("GET", "/healthz", nil); err == nil && status == 200 {
			return kp
		}
		if time.Now().After(deadline) {
			out, _ := os.ReadFile(log.Name())
			t.Fatalf("kproxy did not start:\n%s", out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func (k *Kproxy) call(method, path string, body any) (int, map[string]any, error) {
	var payload io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		payload = bytes.NewReader(b)
	}
	req, _ := http.NewRequest(method, k.admin+path, payload)
	req.Header.Set("Authorization", "Bearer "+k.token)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	var out map[string]any
	raw, _ := io.ReadAll(resp.Body)
	if len(bytes.TrimSpace(raw)) > 0 {
		json.Unmarshal(raw, &out)
	}
	return resp.StatusCode, out, nil
}

// PutRule installs (or replaces) a fault rule.
func (k *Kproxy) PutRule(t *testing.T, name string, rule any) {
	t.Helper()
	status, body, err := k.call("PUT", "/faults/"+name, rule)
	if err != nil || status != 200 {
		t.Fatalf("PUT /faults/%s: %d %v %v", name, status, body, err)
	}
}

// Rule returns a rule with its counters (hits, injected).
func (k *Kproxy) Rule(t *testing.T, name string) map[string]any {
	t.Helper()
	status, body, err := k.call("GET", "/faults/"+name, nil)
	if err != nil || status != 200 {
		t.Fatalf("GET /faults/%s: %d %v %v", name, status, body, err)
	}
	return body
}

// apiVersions sends one ApiVersions v0 request and returns the response's correlation id and error code.
func apiVersions(t *testing.T, addr string, correlationID int32) (int32, int16) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	clientID := "go-example"
	var req bytes.Buffer
	binary.Write(&req, binary.BigEndian, int32(2+2+4+2+len(clientID)))
	binary.Write(&req, binary.BigEndian, int16(18)) // ApiVersions
	binary.Write(&req, binary.BigEndian, int16(0))  // v0
	binary.Write(&req, binary.BigEndian, correlationID)
	binary.Write(&req, binary.BigEndian, int16(len(clientID)))
	req.WriteString(clientID)
	if _, err := conn.Write(req.Bytes()); err != nil {
		t.Fatal(err)
	}
	var head struct {
		Size          int32
		CorrelationID int32
		ErrorCode     int16
	}
	if err := binary.Read(conn, binary.BigEndian, &head); err != nil {
		t.Fatal(err)
	}
	return head.CorrelationID, head.ErrorCode
}

func TestDelayInjectedOnce(t *testing.T) {
	kproxyBin, upstream := os.Getenv("KPROXY_BIN"), os.Getenv("KAFKA_BOOTSTRAP")
	if kproxyBin == "" || upstream == "" {
		t.Skip("set KPROXY_BIN and KAFKA_BOOTSTRAP")
	}
	kp := StartKproxy(t, kproxyBin, upstream)

	// The next ApiVersions response is held for 400 ms; the one after goes straight through.
	kp.PutRule(t, "slow-api-versions", map[string]any{
		"match":   map[string]any{"api": "ApiVersions"},
		"action":  map[string]any{"delay": "400ms"},
		"trigger": "once",
	})
	start := time.Now()
	if cid, ec := apiVersions(t, kp.Bootstrap, 7); cid != 7 || ec != 0 {
		t.Fatalf("correlation id %d, error %d", cid, ec)
	}
	if d := time.Since(start); d < 400*time.Millisecond {
		t.Fatalf("answered in %v, want >= 400ms", d)
	}
	start = time.Now()
	apiVersions(t, kp.Bootstrap, 8)
	if d := time.Since(start); d >= 400*time.Millisecond {
		t.Fatalf("second request also delayed (%v)", d)
	}
	if got := kp.Rule(t, "slow-api-versions")["injected"]; got != float64(1) {
		t.Fatalf("injected = %v, want 1", got)
	}
}
