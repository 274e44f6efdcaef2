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
	"github.com/twmb/franz-go/pkg/kmsg"

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
	if o.Mode == "ctp" {
		cl.Close()
		reason := runCtp(ctx, o, opts, res, deadline)
		if reason != "" {
			logf("giving up: %s", reason)
		}
		res.Emit(reason)
		return
	}
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

// runCtp is consume-transform-produce (CONTRACT.md) with kgo's GroupTransactSession, the way
// franz-go documents exactly-once processing: PollRecords (at most M), Begin, one output per
// input (to the input's partition number, ManualPartitioner), End(TryCommit), which commits the
// polled offsets in the transaction, aborts instead when the group rebalanced or the offset
// commit failed abortably, and then rewinds to the committed offsets itself. End's doc: "No
// returned error is retryable" -> give up.
func runCtp(ctx context.Context, o contract.Options, opts []kgo.Opt, res *contract.Account, deadline time.Time) string {
	opts = append(opts, kgo.ConsumerGroup(o.Group), kgo.ConsumeTopics(o.InputTopic),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.RecordPartitioner(kgo.ManualPartitioner()))
	sess, err := kgo.NewGroupTransactSession(opts...)
	if err != nil {
		res.CountErr(errName(err))
		return "NewGroupTransactSession failed: " + errName(err)
	}
	defer contract.CloseBounded(sess.Close, logf)
	want := o.Transactions * o.RecordsPerTxn
	outParts := int32(-1)
	for txn := 0; res.CtpRecords < want; txn++ {
		if time.Now().After(deadline) {
			return "deadline"
		}
		fetches := sess.PollRecords(ctx, o.RecordsPerTxn)
		if fetches.IsClientClosed() {
			return "client closed"
		}
		fetches.EachError(func(_ string, _ int32, err error) {
			if !errors.Is(err, context.DeadlineExceeded) {
				res.CountErr(errName(err))
			}
		})
		recs := fetches.Records()
		if len(recs) == 0 {
			continue
		}
		if outParts < 0 {
			outParts = partitionsOf(ctx, sess.Client(), o.Topic)
		}
		if err := sess.Begin(); err != nil {
			res.CountErr(errName(err))
			return "Begin failed: " + errName(err)
		}
		// The transaction's outputs are handed to kgo at once and flushed together, so that kgo
		// batches them (one Produce per partition), as an application would; one ProduceSync per
		// record waited for each answer in turn (FINDINGS.md, scenario 41 on TV2).
		var (
			keys   []string
			wg     sync.WaitGroup
			failMu sync.Mutex
			failed error
		)
		for _, r := range recs {
			k := []byte(o.RunID + ":" + string(r.Key))
			p := r.Partition
			if p >= outParts {
				p = 0
			}
			keys = append(keys, string(r.Key))
			wg.Add(1)
			sess.Produce(ctx, &kgo.Record{Topic: o.Topic, Partition: p, Key: k, Value: k}, func(_ *kgo.Record, err error) {
				defer wg.Done()
				if err == nil {
					return
				}
				res.CountErr(errName(err))
				failMu.Lock()
				if failed == nil {
					failed = err
				}
				failMu.Unlock()
			})
		}
		if err := sess.Client().Flush(ctx); err != nil {
			logf("ctp txn %d: Flush: %v", txn, err) // the context ended: the promises have the records' errors
		}
		wg.Wait()
		try := kgo.TryCommit
		if failed != nil {
			try = kgo.TryAbort
		}
		committed, err := sess.End(context.Background(), try)
		if err != nil {
			res.CountErr(errName(err))
			return "End failed: " + errName(err)
		}
		if committed {
			res.CtpCommitted(keys, o.RunID)
		}
		logf("ctp txn %d committed=%v (%d records, %d/%d)", txn, committed, len(recs), res.CtpRecords, want)
	}
	return ""
}

// partitionsOf: how many partitions the output topic has (metadata), or 1 when unknown.
func partitionsOf(ctx context.Context, cl *kgo.Client, topic string) int32 {
	req := kmsg.NewPtrMetadataRequest()
	t := kmsg.NewMetadataRequestTopic()
	t.Topic = kmsg.StringPtr(topic)
	req.Topics = append(req.Topics, t)
	resp, err := req.RequestWith(ctx, cl)
	if err != nil || len(resp.Topics) == 0 || len(resp.Topics[0].Partitions) == 0 {
		return 1
	}
	return int32(len(resp.Topics[0].Partitions))
}
