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
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"

	"kproxy/conformance/drivers/common-go/contract"
)

const family = "franz-go"

var logf = contract.Logger(family)

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

type giveUp struct{ reason string }

func main() {
	o := contract.Parse(family)
	t0 := time.Now()
	deadline := o.Deadline(t0)
	v := contract.ModuleVersion("github.com/twmb/franz-go")
	res := contract.NewAccount(family, v, v, o, t0)
	res.StartWatchdog(deadline, logf)

	opts := []kgo.Opt{
		kgo.SeedBrokers(o.Bootstrap),
		kgo.TransactionalID(o.TransactionalID),
		kgo.ClientID(o.ClientID),
		kgo.DefaultProduceTopic(o.Topic),
		kgo.RequiredAcks(kgo.AllISRAcks()), // the default; idempotence is on unless disabled
	}
	if o.TransactionTimeoutMs > 0 {
		opts = append(opts, kgo.TransactionTimeout(time.Duration(o.TransactionTimeoutMs)*time.Millisecond))
	}
	cl, err := kgo.NewClient(opts...)
	if err != nil {
		res.CountErr(errName(err))
		res.Emit("client: " + err.Error())
		return
	}

	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	reason := run(ctx, cl, res, o.Transactions, o.RecordsPerTxn, o.RunID, deadline)
	if reason != "" {
		logf("giving up: %s", reason)
	}
	res.Emit(reason)
	contract.CloseBounded(cl.Close, logf)
}

func run(ctx context.Context, cl *kgo.Client, res *contract.Account, n, m int, runID string, deadline time.Time) (reason string) {
	noCancel := context.Background()
	note := func(where string, err error) string {
		name := errName(err)
		res.CountErr(name)
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
		res.Settle(i, outcome)
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
			k := []byte(contract.Key(runID, i, j))
			wg.Add(1)
			cl.Produce(ctx, &kgo.Record{Key: k, Value: k}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err != nil {
					res.CountErr(errName(err))
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
		res.BeginCommit(i)
		err := cl.EndTransaction(noCancel, kgo.TryCommit)
		if err == nil {
			res.Settle(i, "committed")
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
			res.Settle(i, "unknown")
			if g := abort(i, "unknown", name); g != nil {
				return g.reason
			}
		default:
			return "EndTransaction(TryCommit) failed: " + name
		}
	}
	return ""
}
