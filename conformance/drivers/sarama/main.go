// Transactional workload driver for Sarama (github.com/IBM/sarama). See ../CONTRACT.md.
//
// Error handling follows Sarama's transactional producer: after a failed call the application
// reads TxnStatus(): ProducerTxnFlagFatalError -> the producer must be recreated (here: close and
// give up); ProducerTxnFlagAbortableError -> AbortTxn() (retried while it fails without a fatal
// state); otherwise a failed CommitTxn() is retried (the index is "unknown" meanwhile). A send
// that failed in a transaction is aborted (unless the state is fatal).
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/IBM/sarama"

	"kproxy/conformance/drivers/common-go/contract"
)

const family = "sarama"

var logf = contract.Logger(family)

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

func main() {
	o := contract.Parse(family)
	if os.Getenv("CONFORMANCE_DEBUG") != "" {
		sarama.Logger = log.New(os.Stderr, "[sarama] ", log.LstdFlags|log.Lmicroseconds)
	} else {
		sarama.Logger = log.New(io.Discard, "", 0)
	}

	t0 := time.Now()
	deadline := o.Deadline(t0)
	v := contract.ModuleVersion("github.com/IBM/sarama")
	res := contract.NewAccount(family, v, v, o, t0)
	res.StartWatchdog(deadline, logf)

	cfg := sarama.NewConfig() // protocol version: Sarama's default
	cfg.ClientID = o.ClientID
	cfg.Producer.Idempotent = true
	cfg.Producer.RequiredAcks = sarama.WaitForAll
	cfg.Producer.Return.Successes = true // required by the SyncProducer
	cfg.Producer.Return.Errors = true
	cfg.Producer.Transaction.ID = o.TransactionalID
	cfg.Net.MaxOpenRequests = 1 // required for idempotence
	if o.Mode == "ctp" {
		// Each output goes to its input's partition number (ProducerMessage.Partition).
		cfg.Producer.Partitioner = sarama.NewManualPartitioner
	}
	if o.TransactionTimeoutMs > 0 {
		cfg.Producer.Transaction.Timeout = time.Duration(o.TransactionTimeoutMs) * time.Millisecond
	}

	// NewSyncProducer runs InitProducerId (Sarama retries it Producer.Transaction.Retry.Max times);
	// it may block, so it counts against the deadline. A retriable error at the end of Sarama's own
	// budget (the coordinator loading, moving or busy: the errors Kafka's protocol marks retriable,
	// clients/src/main/java/org/apache/kafka/common/protocol/Errors.java) is retried with a new
	// client, as the Java driver retries initTransactions() after a TimeoutException and the
	// kafka-python driver init_transactions(); any other error ends the run.
	type made struct {
		c   sarama.Client
		p   sarama.SyncProducer
		err error
	}
	var mk made
	for attempt := 1; ; attempt++ {
		ch := make(chan made, 1)
		go func() {
			c, err := sarama.NewClient([]string{o.Bootstrap}, cfg)
			if err != nil {
				ch <- made{nil, nil, err}
				return
			}
			p, err := sarama.NewSyncProducerFromClient(c)
			if err != nil {
				c.Close() // NewSyncProducer would leave its client open on this error
			}
			ch <- made{c, p, err}
		}()
		select {
		case mk = <-ch:
		case <-time.After(time.Until(deadline)):
			res.Emit("deadline")
			return
		}
		if mk.err == nil {
			break
		}
		names := errNames(mk.err)
		for _, name := range names {
			res.CountErr(name)
		}
		logf("NewSyncProducer (attempt %d): %v", attempt, mk.err)
		if !initRetriable(mk.err) {
			res.Emit("NewSyncProducer failed: " + strings.Join(names, ","))
			return
		}
		if time.Now().After(deadline) {
			res.Emit("deadline")
			return
		}
		time.Sleep(200 * time.Millisecond)
	}
	p := mk.p
	var reason string
	if o.Mode == "ctp" {
		reason = runCtp(p, mk.c, o, cfg, res, deadline)
	} else {
		reason = run(p, res, o.Topic, o.Transactions, o.RecordsPerTxn, o.RunID, deadline)
	}
	if reason != "" {
		logf("giving up: %s", reason)
	}
	res.Emit(reason)
	contract.CloseBounded(func() { p.Close(); mk.c.Close() }, logf)
}

// initRetriable: an error of InitProducerId that Kafka's protocol marks retriable (its exception
// extends RetriableException in Errors.java), or no broker reachable right now.
func initRetriable(err error) bool {
	var ke sarama.KError
	if errors.As(err, &ke) {
		switch ke {
		case sarama.ErrOffsetsLoadInProgress, sarama.ErrConsumerCoordinatorNotAvailable, sarama.ErrNotCoordinatorForConsumer,
			sarama.ErrConcurrentTransactions, sarama.ErrRequestTimedOut, sarama.ErrNetworkException, sarama.ErrNotEnoughReplicas,
			sarama.ErrNotEnoughReplicasAfterAppend, sarama.ErrLeaderNotAvailable, sarama.ErrNotLeaderForPartition:
			return true
		}
		return false
	}
	var ne net.Error
	return errors.Is(err, sarama.ErrOutOfBrokers) || errors.Is(err, sarama.ErrNotConnected) || errors.As(err, &ne)
}

func run(p sarama.SyncProducer, res *contract.Account, topic string, n, m int, runID string, deadline time.Time) string {
	note := func(where string, err error) string {
		names := errNames(err)
		for _, name := range names {
			res.CountErr(name)
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
				res.Settle(i, "aborted")
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
			k := contract.Key(runID, i, j)
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
		res.BeginCommit(i)
		for {
			err := p.CommitTxn()
			if err == nil {
				res.Settle(i, "committed")
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
			res.Settle(i, "unknown") // neither fatal nor abortable: commit again
			if time.Now().After(deadline) {
				return "deadline"
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return ""
}

// ctpHandler is the consumer group handler of the ctp workload (CONTRACT.md): each claim's
// messages in chunks of at most M, each chunk one transaction: SendMessages (one output per
// input, to the input's partition number when the output topic has it, else partition 0),
// AddMessageToTxn for each input (Sarama's documented way to commit the consumed offsets in the
// transaction), CommitTxn. Errors as in produce mode: fatal -> give up; abortable (or a failed
// send) -> AbortTxn and process the same chunk again in a new transaction (the inputs whose
// outputs were aborted, as a rewind to the committed offsets would read them again).
type ctpHandler struct {
	p        sarama.SyncProducer
	o        contract.Options
	res      *contract.Account
	deadline time.Time
	outParts int32
	want     int
	n        int
	reason   string
	mu       sync.Mutex
	done     chan struct{}
	once     sync.Once
}

func (h *ctpHandler) Setup(sarama.ConsumerGroupSession) error   { return nil }
func (h *ctpHandler) Cleanup(sarama.ConsumerGroupSession) error { return nil }

func (h *ctpHandler) stop(reason string) {
	h.once.Do(func() { h.reason = reason; close(h.done) })
}

func (h *ctpHandler) ConsumeClaim(sess sarama.ConsumerGroupSession, claim sarama.ConsumerGroupClaim) error {
	for {
		var chunk []*sarama.ConsumerMessage
		select {
		case msg, ok := <-claim.Messages():
			if !ok {
				return nil
			}
			chunk = append(chunk, msg)
		case <-h.done:
			return nil
		case <-sess.Context().Done():
			return nil
		}
	more:
		for len(chunk) < h.o.RecordsPerTxn {
			select {
			case msg, ok := <-claim.Messages():
				if !ok {
					break more
				}
				chunk = append(chunk, msg)
			case <-time.After(100 * time.Millisecond):
				break more
			}
		}
		// One transaction at a time: the producer is shared by the claims.
		h.mu.Lock()
		r := h.transact(chunk)
		h.mu.Unlock()
		if r != "" {
			h.stop(r)
			return nil
		}
	}
}

// transact runs one chunk until it commits; returns a give-up reason or "" (also when all inputs are done).
func (h *ctpHandler) transact(chunk []*sarama.ConsumerMessage) string {
	p := h.p
	note := func(where string, err error) string {
		names := errNames(err)
		for _, name := range names {
			h.res.CountErr(name)
		}
		logf("%s: %v (%s) status=%v", where, err, strings.Join(names, ","), p.TxnStatus())
		return strings.Join(names, ",")
	}
	fatal := func() bool { return p.TxnStatus()&sarama.ProducerTxnFlagFatalError != 0 }
	for {
		if h.res.CtpRecords >= h.want {
			h.stop("")
			return ""
		}
		if time.Now().After(h.deadline) {
			return "deadline"
		}
		index := h.n
		h.n++
		if err := p.BeginTxn(); err != nil {
			return "BeginTxn failed: " + note("BeginTxn", err)
		}
		var keys []string
		msgs := make([]*sarama.ProducerMessage, 0, len(chunk))
		for _, in := range chunk {
			keys = append(keys, string(in.Key))
			k := h.o.RunID + ":" + string(in.Key)
			part := in.Partition
			if part >= h.outParts {
				part = 0
			}
			msgs = append(msgs, &sarama.ProducerMessage{Topic: h.o.Topic, Partition: part, Key: sarama.StringEncoder(k), Value: sarama.StringEncoder(k)})
		}
		failed := ""
		if err := p.SendMessages(msgs); err != nil {
			failed = "SendMessages: " + note("SendMessages", err)
		}
		for _, in := range chunk {
			if failed != "" {
				break
			}
			if err := p.AddMessageToTxn(in, h.o.Group, nil); err != nil {
				failed = "AddMessageToTxn: " + note("AddMessageToTxn", err)
			}
		}
		if failed == "" {
			for {
				err := p.CommitTxn()
				if err == nil {
					h.res.CtpCommitted(keys, h.o.RunID)
					logf("ctp txn %d committed (%d records, %d/%d)", index, len(chunk), h.res.CtpRecords, h.want)
					if h.res.CtpRecords >= h.want {
						h.stop("")
					}
					return ""
				}
				name := note("CommitTxn", err)
				if fatal() {
					return "fatal error in CommitTxn: " + name
				}
				if p.TxnStatus()&sarama.ProducerTxnFlagAbortableError != 0 {
					failed = "CommitTxn: " + name
					break
				}
				if time.Now().After(h.deadline) {
					return "deadline"
				}
				time.Sleep(100 * time.Millisecond)
			}
		}
		if fatal() {
			return "fatal error in " + failed
		}
		for {
			err := p.AbortTxn()
			if err == nil {
				break
			}
			name := note("AbortTxn", err)
			if fatal() {
				return "fatal error in AbortTxn: " + name
			}
			if time.Now().After(h.deadline) {
				return "deadline"
			}
			time.Sleep(100 * time.Millisecond)
		}
		logf("ctp txn %d aborted after %s; the same inputs again", index, failed)
	}
}

func runCtp(p sarama.SyncProducer, c sarama.Client, o contract.Options, pcfg *sarama.Config, res *contract.Account, deadline time.Time) string {
	parts, err := c.Partitions(o.Topic)
	if err != nil {
		parts = []int32{0}
	}
	ccfg := sarama.NewConfig()
	ccfg.ClientID = pcfg.ClientID + "-consumer"
	ccfg.Consumer.IsolationLevel = sarama.ReadCommitted
	ccfg.Consumer.Offsets.Initial = sarama.OffsetOldest
	ccfg.Consumer.Offsets.AutoCommit.Enable = false
	ccfg.Version = pcfg.Version
	group, err := sarama.NewConsumerGroup([]string{o.Bootstrap}, o.Group, ccfg)
	if err != nil {
		res.CountErr(errNames(err)[0])
		return "NewConsumerGroup failed: " + strings.Join(errNames(err), ",")
	}
	defer contract.CloseBounded(func() { group.Close() }, logf)
	h := &ctpHandler{p: p, o: o, res: res, deadline: deadline, outParts: int32(len(parts)),
		want: o.Transactions * o.RecordsPerTxn, done: make(chan struct{})}
	ctx, cancel := context.WithDeadline(context.Background(), deadline)
	defer cancel()
	go func() {
		for ctx.Err() == nil {
			if err := group.Consume(ctx, []string{o.InputTopic}, h); err != nil {
				res.CountErr(errNames(err)[0])
				logf("Consume: %v", err)
				time.Sleep(200 * time.Millisecond)
			}
			select {
			case <-h.done:
				return
			default:
			}
		}
	}()
	select {
	case <-h.done:
		return h.reason
	case <-ctx.Done():
		return "deadline"
	}
}
