// Transactional workload driver for Sarama (github.com/IBM/sarama). See ../CONTRACT.md.
//
// Error handling follows Sarama's transactional producer: after a failed call the application
// reads TxnStatus(): ProducerTxnFlagFatalError -> the producer must be recreated (here: close and
// give up); ProducerTxnFlagAbortableError -> AbortTxn() (retried while it fails without a fatal
// state); otherwise a failed CommitTxn() is retried (the index is "unknown" meanwhile). A send
// that failed in a transaction is aborted (unless the state is fatal).
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"runtime/debug"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"
)

const family = "sarama"

type result struct {
	mu         sync.Mutex
	printed    bool
	t0         time.Time
	committing int

	Client        string         `json:"client"`
	Version       string         `json:"version"`
	Library       string         `json:"library"`
	Transactions  int            `json:"transactions"`
	RecordsPerTxn int            `json:"records_per_txn"`
	RunID         string         `json:"run_id"`
	Committed     []int          `json:"committed"`
	Aborted       []int          `json:"aborted"`
	Unknown       []int          `json:"unknown"`
	Errors        map[string]int `json:"errors"`
	GaveUp        bool           `json:"gave_up"`
	GiveUpReason  *string        `json:"give_up_reason"`
	ElapsedS      float64        `json:"elapsed_s"`
}

func (r *result) countErr(name string) {
	r.mu.Lock()
	r.Errors[name]++
	r.mu.Unlock()
}

func without(s []int, v int) []int {
	out := s[:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func (r *result) settle(i int, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Unknown = without(r.Unknown, i)
	switch outcome {
	case "committed":
		r.Committed = append(r.Committed, i)
	case "aborted":
		r.Aborted = append(r.Aborted, i)
	default:
		r.Unknown = append(r.Unknown, i)
	}
	if outcome != "unknown" && r.committing == i {
		r.committing = -1
	}
}

func (r *result) emit(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.printed {
		return
	}
	r.printed = true
	if r.committing >= 0 {
		r.Unknown = append(without(r.Unknown, r.committing), r.committing)
	}
	if reason != "" {
		r.GaveUp = true
		r.GiveUpReason = &reason
	}
	sort.Ints(r.Unknown)
	r.ElapsedS = float64(time.Since(r.t0).Microseconds()) / 1e6
	b, _ := json.Marshal(r)
	os.Stdout.Write(append(b, '\n'))
	os.Stdout.Sync()
}

func logf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "["+family+"] "+format+"\n", a...)
}

// Kafka's names for the protocol error codes Sarama returns as KError (the protocol's public
// error table; Sarama itself only carries descriptions).
var kafkaNames = map[sarama.KError]string{
	-1: "UNKNOWN_SERVER_ERROR", 2: "CORRUPT_MESSAGE", 3: "UNKNOWN_TOPIC_OR_PARTITION",
	5: "LEADER_NOT_AVAILABLE", 6: "NOT_LEADER_OR_FOLLOWER", 7: "REQUEST_TIMED_OUT",
	10: "MESSAGE_TOO_LARGE", 13: "NETWORK_EXCEPTION", 14: "COORDINATOR_LOAD_IN_PROGRESS",
	15: "COORDINATOR_NOT_AVAILABLE", 16: "NOT_COORDINATOR", 19: "NOT_ENOUGH_REPLICAS",
	20: "NOT_ENOUGH_REPLICAS_AFTER_APPEND", 31: "CLUSTER_AUTHORIZATION_FAILED",
	35: "UNSUPPORTED_VERSION", 42: "INVALID_REQUEST", 45: "OUT_OF_ORDER_SEQUENCE_NUMBER",
	46: "DUPLICATE_SEQUENCE_NUMBER", 47: "INVALID_PRODUCER_EPOCH", 48: "INVALID_TXN_STATE",
	49: "INVALID_PRODUCER_ID_MAPPING", 50: "INVALID_TRANSACTION_TIMEOUT",
	51: "CONCURRENT_TRANSACTIONS", 52: "TRANSACTION_COORDINATOR_FENCED",
	53: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", 55: "OPERATION_NOT_ATTEMPTED",
	59: "UNKNOWN_PRODUCER_ID", 74: "FENCED_LEADER_EPOCH", 75: "UNKNOWN_LEADER_EPOCH",
	90: "PRODUCER_FENCED", 100: "UNKNOWN_TOPIC_ID", 120: "TRANSACTION_ABORTABLE",
}

var sentinels = map[error]string{
	sarama.ErrAddPartitionsToTxn:       "ErrAddPartitionsToTxn",
	sarama.ErrTxnOffsetCommit:          "ErrTxnOffsetCommit",
	sarama.ErrTransactionNotReady:      "ErrTransactionNotReady",
	sarama.ErrTransitionNotAllowed:     "ErrTransitionNotAllowed",
	sarama.ErrTxnUnableToParseResponse: "ErrTxnUnableToParseResponse",
	sarama.ErrOutOfBrokers:             "ErrOutOfBrokers",
	sarama.ErrNotConnected:             "ErrNotConnected",
	sarama.ErrClosedClient:             "ErrClosedClient",
	sarama.ErrShuttingDown:             "ErrShuttingDown",
}

// errNames lists the names of the errors inside err (Sarama joins several into one).
func errNames(err error) []string {
	var pes sarama.ProducerErrors
	if errors.As(err, &pes) {
		var out []string
		for _, pe := range pes {
			out = append(out, errNames(pe.Err)...)
		}
		return out
	}
	var ke sarama.KError
	if errors.As(err, &ke) {
		if n, ok := kafkaNames[ke]; ok {
			return []string{n}
		}
		return []string{fmt.Sprintf("KError(%d)", int16(ke))}
	}
	for s, n := range sentinels {
		if errors.Is(err, s) {
			return []string{n}
		}
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return []string{fmt.Sprintf("%T", ne)}
	}
	return []string{fmt.Sprintf("%T", err)}
}

func libVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/IBM/sarama" {
				return d.Version
			}
		}
	}
	return "unknown"
}

func main() {
	bootstrap := flag.String("bootstrap", "", "HOST:PORT")
	topic := flag.String("topic", "", "topic")
	txnID := flag.String("transactional-id", "", "transactional id")
	n := flag.Int("transactions", 0, "transactions")
	m := flag.Int("records-per-txn", 0, "records per transaction")
	runID := flag.String("run-id", "", "run id")
	clientID := flag.String("client-id", "conformance-"+family, "client id")
	timeoutS := flag.Float64("timeout-s", 120, "deadline for the whole run")
	txnTimeoutMs := flag.Int("transaction-timeout-ms", 0, "transaction timeout (client default when 0)")
	flag.Parse()
	if *bootstrap == "" || *topic == "" || *txnID == "" || *runID == "" {
		fmt.Fprintln(os.Stderr, "missing required arguments")
		os.Exit(2)
	}
	if os.Getenv("CONFORMANCE_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	} else {
		sarama.Logger = log.New(io.Discard, "", 0)
	}

	t0 := time.Now()
	deadline := t0.Add(time.Duration(*timeoutS * float64(time.Second)))
	v := libVersion()
	res := &result{t0: t0, committing: -1, Client: family, Version: v, Library: v,
		Transactions: *n, RecordsPerTxn: *m, RunID: *runID,
		Committed: []int{}, Aborted: []int{}, Unknown: []int{}, Errors: map[string]int{}}
	time.AfterFunc(time.Until(deadline)+5*time.Second, func() {
		logf("watchdog: deadline passed inside a blocking call")
		res.emit("deadline")
		os.Exit(0)
	})

	cfg := sarama.NewConfig() // protocol version: Sarama's default
	cfg.ClientID = *clientID
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true // required by the SyncProducer
	cfg.Producer.Return.Errors = true
	cfg.Producer.Transaction.ID = *txnID
	cfg.Net.MaxOpenRequests = 1 // required for idempotence
	if *txnTimeoutMs > 0 {
		cfg.Producer.Transaction.Timeout = time.Duration(*txnTimeoutMs) * time.Millisecond
	}

	// NewSyncProducer runs InitProducerId; it may block, so it counts against the deadline.
	type made struct {
		p   sarama.SyncProducer
		err error
	}
	ch := make(chan made, 1)
	go func() { p, err := sarama.NewSyncProducer([]string{*bootstrap}, cfg); ch <- made{p, err} }()
	var mk made
	select {
	case mk = <-ch:
	case <-time.After(time.Until(deadline)):
		res.emit("deadline")
		return
	}
	if mk.err != nil {
		for _, name := range errNames(mk.err) {
			res.countErr(name)
		}
		logf("NewSyncProducer: %v", mk.err)
		res.emit("NewSyncProducer failed: " + strings.Join(errNames(mk.err), ","))
		return
	}
	p := mk.p
	reason := run(p, res, *topic, *n, *m, *runID, deadline)
	if reason != "" {
		logf("giving up: %s", reason)
	}
	res.emit(reason)
	done := make(chan struct{})
	go func() { p.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		logf("close did not finish in 10s")
	}
}

func run(p sarama.SyncProducer, res *result, topic string, n, m int, runID string, deadline time.Time) string {
	note := func(where string, err error) string {
		names := errNames(err)
		for _, name := range names {
			res.countErr(name)
		}
		logf("%s: %v (%s) status=%v", where, err, strings.Join(names, ","), p.TxnStatus())
		return strings.Join(names, ",")
	}
	fatal := func() bool { return p.TxnStatus()&sarama.ProducerTxnFlagFatalError != 0 }
	abortable := func() bool { return p.TxnStatus()&sarama.ProducerTxnFlagAbortableError != 0 }
	abort := func(i int) string {
		for {
			err := p.AbortTxn()
			if err == nil {
				res.settle(i, "aborted")
				return ""
			}
			name := note("AbortTxn", err)
			if fatal() {
				return "fatal error in AbortTxn: " + name
			}
			if time.Now().After(deadline) {
				return "deadline"
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	for i := 0; i < n; i++ {
		if time.Now().After(deadline) {
			return "deadline"
		}
		if err := p.BeginTxn(); err != nil {
			return "BeginTxn failed: " + note("BeginTxn", err)
		}
		msgs := make([]*sarama.ProducerMessage, m)
		for j := range msgs {
			k := fmt.Sprintf("%s:%d:%d", runID, i, j)
			msgs[j] = &sarama.ProducerMessage{Topic: topic, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(k)}
		}
		if err := p.SendMessages(msgs); err != nil {
			name := note("SendMessages", err)
			if fatal() {
				return "fatal error in SendMessages: " + name
			}
			if r := abort(i); r != "" {
				return r
			}
			continue
		}
		if time.Now().After(deadline) {
			return "deadline"
		}
		res.mu.Lock()
		res.committing = i
		res.mu.Unlock()
		for {
			err := p.CommitTxn()
			if err == nil {
				res.settle(i, "committed")
				break
			}
			name := note("CommitTxn", err)
			if fatal() {
				return "fatal error in CommitTxn: " + name
			}
			if abortable() {
				if r := abort(i); r != "" {
					return r
				}
				break
			}
			res.settle(i, "unknown") // neither fatal nor abortable: commit again
			if time.Now().After(deadline) {
				return "deadline"
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return ""
}
