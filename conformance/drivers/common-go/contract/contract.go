// Package contract is what the Go workload drivers (franz-go, sarama) share: the contract's
// command line, the deadline watchdog, the account of indexes and errors, and the final JSON
// line. See ../../CONTRACT.md. Each driver keeps its client's own transaction logic.
package contract

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"runtime/debug"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Options are the contract's command-line options.
type Options struct {
	Bootstrap            string
	Topic                string
	TransactionalID      string
	Transactions         int
	RecordsPerTxn        int
	RunID                string
	ClientID             string  // default conformance-<family>
	TimeoutS             float64 // default 120
	TransactionTimeoutMs int     // 0: the client's default
	Mode                 string  // "produce" (default) or "ctp" (CONTRACT.md "Consume-transform-produce")
	InputTopic           string  // ctp
	Group                string  // ctp
}

// Parse reads the options from the command line; a missing required one exits with status 2.
func Parse(family string) Options {
	var o Options
	flag.StringVar(&o.Bootstrap, "bootstrap", "", "HOST:PORT")
	flag.StringVar(&o.Topic, "topic", "", "topic")
	flag.StringVar(&o.TransactionalID, "transactional-id", "", "transactional id")
	flag.IntVar(&o.Transactions, "transactions", 0, "transactions")
	flag.IntVar(&o.RecordsPerTxn, "records-per-txn", 0, "records per transaction")
	flag.StringVar(&o.RunID, "run-id", "", "run id")
	flag.StringVar(&o.ClientID, "client-id", "conformance-"+family, "client id")
	flag.Float64Var(&o.TimeoutS, "timeout-s", 120, "deadline for the whole run")
	flag.IntVar(&o.TransactionTimeoutMs, "transaction-timeout-ms", 0, "transaction timeout (client default when 0)")
	flag.StringVar(&o.Mode, "mode", "produce", "produce or ctp")
	flag.StringVar(&o.InputTopic, "input-topic", "", "ctp: the input topic")
	flag.StringVar(&o.Group, "group", "", "ctp: the consumer group")
	flag.Parse()
	if o.Bootstrap == "" || o.Topic == "" || o.TransactionalID == "" || o.RunID == "" {
		fmt.Fprintln(os.Stderr, "missing required arguments")
		os.Exit(2)
	}
	return o
}

// Deadline is t0 plus --timeout-s.
func (o Options) Deadline(t0 time.Time) time.Time {
	return t0.Add(time.Duration(o.TimeoutS * float64(time.Second)))
}

// Key is the key (and value) of record j of transaction i: RUNID:i:j.
func Key(runID string, i, j int) string {
	return fmt.Sprintf("%s:%d:%d", runID, i, j)
}

// Logger returns a printf-like function writing "[family] ..." lines to stderr.
func Logger(family string) func(format string, a ...any) {
	return func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "["+family+"] "+format+"\n", a...)
	}
}

// ModuleVersion is the version of the module at path that this binary was built with.
func ModuleVersion(path string) string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, d := range bi.Deps {
			if d.Path == path {
				return d.Version
			}
		}
	}
	return "unknown"
}

// Account is the run's outcome and its JSON line. Safe for concurrent use; printed once.
type Account struct {
	mu         sync.Mutex
	printed    bool
	t0         time.Time
	committing int         // index whose commit was requested and not settled; -1 none
	ctpDone    map[int]int // ctp: input transaction -> its records out in committed transactions
	CtpRecords int         `json:"-"` // ctp: inputs out in committed transactions

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

// NewAccount starts the account of a run that began at t0.
func NewAccount(family, version, library string, o Options, t0 time.Time) *Account {
	return &Account{t0: t0, committing: -1, Client: family, Version: version, Library: library,
		Transactions: o.Transactions, RecordsPerTxn: o.RecordsPerTxn, RunID: o.RunID,
		Committed: []int{}, Aborted: []int{}, Unknown: []int{}, Errors: map[string]int{}}
}

// CtpCommitted records the inputs (their keys PREFIX:i:j) of one committed consume-transform-
// produce transaction: the account's run id becomes RUNID:PREFIX, and input transaction i is
// committed once all M of its records went out in committed transactions (CONTRACT.md).
func (r *Account) CtpCommitted(inputKeys []string, runID string) {
	r.mu.Lock()
	if r.ctpDone == nil {
		r.ctpDone = map[int]int{}
	}
	var done []int
	for _, k := range inputKeys {
		r.CtpRecords++
		parts := strings.Split(k, ":")
		if len(parts) < 2 {
			continue
		}
		i, err1 := strconv.Atoi(parts[len(parts)-2])
		_, err2 := strconv.Atoi(parts[len(parts)-1])
		if err1 != nil || err2 != nil {
			continue
		}
		if prefix := strings.Join(parts[:len(parts)-2], ":"); prefix != "" && r.RunID == runID {
			r.RunID = runID + ":" + prefix
		}
		r.ctpDone[i]++
		if r.ctpDone[i] == r.RecordsPerTxn {
			done = append(done, i)
		}
	}
	r.mu.Unlock()
	for _, i := range done {
		r.Settle(i, "committed")
	}
}

// CountErr counts one error under its name.
func (r *Account) CountErr(name string) {
	r.mu.Lock()
	r.Errors[name]++
	r.mu.Unlock()
}

// BeginCommit says the commit of index i is about to be requested: until settled, if the run
// stops, i is "unknown".
func (r *Account) BeginCommit(i int) {
	r.mu.Lock()
	r.committing = i
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

// Settle records index i as "committed", "aborted" or "unknown" (moving it out of unknown).
// A commit settled as committed or aborted is no longer pending.
func (r *Account) Settle(i int, outcome string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.Unknown = without(r.Unknown, i)
	switch outcome {
	case "committed":
		r.Committed = append(r.Committed, i)
	case "aborted":
		r.Aborted = append(r.Aborted, i)
	case "unknown":
		r.Unknown = append(r.Unknown, i)
	default:
		panic("contract: unknown outcome " + outcome)
	}
	if outcome != "unknown" && r.committing == i {
		r.committing = -1
	}
}

// Emit prints the JSON line once; reason != "" gives up with that reason. A pending commit
// counts as unknown.
func (r *Account) Emit(reason string) {
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

// StartWatchdog prints the JSON as it stands ("deadline") and exits 0 when the run is still
// going 5 s past the deadline, e.g. inside a call that hangs.
func (r *Account) StartWatchdog(deadline time.Time, logf func(string, ...any)) {
	time.AfterFunc(time.Until(deadline)+5*time.Second, func() {
		logf("watchdog: deadline passed inside a blocking call")
		r.Emit("deadline")
		os.Exit(0)
	})
}

// CloseBounded calls closeFn and waits for it at most 10 s.
func CloseBounded(closeFn func(), logf func(string, ...any)) {
	done := make(chan struct{})
	go func() { closeFn(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		logf("close did not finish in 10s")
	}
}
