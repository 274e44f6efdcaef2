// Transactional workload driver for franz-go (kgo). See ../CONTRACT.md.
//
// Error handling follows the kgo documentation of EndTransaction and AbortBufferedRecords:
//   - a record that failed to produce: AbortBufferedRecords, then EndTransaction(TryAbort);
//   - EndTransaction(TryCommit) failing with OPERATION_NOT_ATTEMPTED or TRANSACTION_ABORTABLE:
//     the commit did not happen; retry with TryAbort (-> "aborted");
//   - a commit whose outcome is unconfirmed (transport error, UNKNOWN_SERVER_ERROR): retry with
//     TryAbort as documented; the outcome stays "unknown";
//   - any other EndTransaction error, a failed abort, or a failed BeginTransaction: the docs say
//     not to retry -> close the client and give up.
//
// EndTransaction gets a context that is never cancelled (the docs advise against cancelling it);
// the deadline watchdog reports a commit still in flight as "unknown".
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"runtime/debug"
	"sort"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

const family = "franz-go"

type result struct {
	mu         sync.Mutex
	printed    bool
	t0         time.Time
	committing int // index whose commit was requested and not settled; -1 none

	Client         string         `json:"client"`
	Version        string         `json:"version"`
	Library        string         `json:"library"`
	Transactions   int            `json:"transactions"`
	RecordsPerTxn  int            `json:"records_per_txn"`
	RunID          string         `json:"run_id"`
	Committed      []int          `json:"committed"`
	Aborted        []int          `json:"aborted"`
	Unknown        []int          `json:"unknown"`
	Errors         map[string]int `json:"errors"`
	GaveUp         bool           `json:"gave_up"`
	GiveUpReason   *string        `json:"give_up_reason"`
	ElapsedS       float64        `json:"elapsed_s"`
}

func (r *result) countErr(name string) {
	r.mu.Lock()
	r.Errors[name]++
	r.mu.Unlock()
}

func remove(s []int, v int) []int {
	out := s[:0]
	for _, x := range s {
		if x != v {
			out = append(out, x)
		}
	}
	return out
}

func contains(s []int, v int) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// settle records index i as "committed", "aborted" or "unknown".
func (r *result) settle(i int, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Unknown = remove(r.Unknown, i)
	switch outcome {
	case "committed":
		r.Committed = append(r.Committed, i)
	case "aborted":
		r.Aborted = append(r.Aborted, i)
	default:
		r.Unknown = append(r.Unknown, i)
	}
	if r.committing == i {
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
	if r.committing >= 0 && !contains(r.Unknown, r.committing) {
		r.Unknown = append(r.Unknown, r.committing)
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

// errName gives Kafka's error name where the error carries one, else a Go type name.
func errName(err error) string {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		return ke.Message
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return "context.DeadlineExceeded"
	case errors.Is(err, context.Canceled):
		return "context.Canceled"
	case errors.Is(err, kgo.ErrRecordTimeout):
		return "kgo.ErrRecordTimeout"
	case errors.Is(err, kgo.ErrRecordRetries):
		return "kgo.ErrRecordRetries"
	case errors.Is(err, kgo.ErrAborting):
		return "kgo.ErrAborting"
	case errors.Is(err, kgo.ErrClientClosed):
		return "kgo.ErrClientClosed"
	}
	var ne net.Error
	if errors.As(err, &ne) {
		return fmt.Sprintf("%T", ne)
	}
	return fmt.Sprintf("%T", err)
}

func libVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == "github.com/twmb/franz-go" {
				return d.Version
			}
		}
	}
	return "unknown"
}

type giveUp struct{ reason string }

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

	opts := []kgo.Opt{
		kgo.SeedBrokers(*bootstrap),
		kgo.TransactionalID(*txnID),
		kgo.ClientID(*clientID),
		kgo.DefaultProduceTopic(*topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // the default; idempotence is on unless disabled
	}
	if *txnTimeoutMs > 0 {
		opts = append(opts, kgo.TransactionTimeout(time.Duration(*txnTimeoutMs)*time.Millisecond))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		res.countErr(errName(err))
		res.emit("client: " + err.Error())
		return
	}

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	reason := run(ctx, cl, res, *n, *m, *runID, deadline)
	if reason != "" {
		logf("giving up: %s", reason)
	}
	res.emit(reason)
	done := make(chan struct{})
	go func() { cl.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		logf("close did not finish in 10s")
	}
}

func run(ctx context.Context, cl *kgo.Client, res *result, n, m int, runID string, deadline time.Time) (reason string) {
	noCancel := context.Background()
	note := func(where string, err error) string {
		name := errName(err)
		res.countErr(name)
		logf("%s: %s: %v", where, name, err)
		return name
	}
	abort := func(i int, outcome string, cause string) *giveUp {
		if err := cl.AbortBufferedRecords(ctx); err != nil {
			return &giveUp{fmt.Sprintf("AbortBufferedRecords failed (%s) after %s", note("AbortBufferedRecords", err), cause)}
		}
		if err := cl.EndTransaction(noCancel, kgo.TryAbort); err != nil {
			return &giveUp{fmt.Sprintf("abort failed (%s) after %s", note("EndTransaction(TryAbort)", err), cause)}
		}
		res.settle(i, outcome)
		return nil
	}
	for i := 0; i < n; i++ {
		if time.Now().After(deadline) {
			return "deadline"
		}
		if err := cl.BeginTransaction(); err != nil {
			return "BeginTransaction failed: " + note("BeginTransaction", err)
		}
		var (
			wg       sync.WaitGroup
			firstMu  sync.Mutex
			firstErr error
		)
		for j := 0; j < m; j++ {
			k := []byte(fmt.Sprintf("%s:%d:%d", runID, i, j))
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: k, Value: k}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					res.countErr(errName(err))
					firstMu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					firstMu.Unlock()
				}
			})
		}
		if err := cl.Flush(ctx); err != nil {
			note("Flush", err)
			if time.Now().After(deadline) {
				return "deadline"
			}
		}
		wg.Wait()
		if firstErr != nil {
			logf("txn %d: produce failed: %s: %v", i, errName(firstErr), firstErr)
			if g := abort(i, "aborted", "produce error "+errName(firstErr)); g != nil {
				return g.reason
			}
			continue
		}
		if time.Now().After(deadline) {
			return "deadline"
		}
		res.mu.Lock()
		res.committing = i
		res.mu.Unlock()
		err := cl.EndTransaction(noCancel, kgo.TryCommit)
		if err == nil {
			res.settle(i, "committed")
			continue
		}
		name := note("EndTransaction(TryCommit)", err)
		var ke *kerr.Error
		switch {
		case errors.Is(err, kerr.OperationNotAttempted) || errors.Is(err, kerr.TransactionAbortable):
			if g := abort(i, "aborted", name); g != nil {
				return g.reason
			}
		case !errors.As(err, &ke) || errors.Is(err, kerr.UnknownServerError):
			// Outcome unconfirmed: documented recovery is TryAbort; the index stays unknown.
			res.settle(i, "unknown")
			if g := abort(i, "unknown", name); g != nil {
				return g.reason
			}
		default:
			return "EndTransaction(TryCommit) failed: " + name
		}
	}
	return ""
}
