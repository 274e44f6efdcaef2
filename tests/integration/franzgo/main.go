// A franz-go (kgo) client for the SNI gateway test (tests/integration/test_sni_gateway.py):
// over TLS it lists the brokers Metadata names, produces `-txns` transactions of `-per` records
// (every `-abort-every`th aborted), then reads the topic read_committed until it has the committed
// count or the deadline passes. It prints one JSON line; the test asserts on it.
// The franz-go version is the one conformance/drivers/franz-go pins.
package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sort"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

type result struct {
	Brokers     []string `json:"brokers"`
	Committed   int      `json:"records_committed"`
	Aborted     int      `json:"records_aborted"`
	Consumed    int      `json:"consumed"`
	UniqueKeys  int      `json:"unique_keys"`
	Duplicates  int      `json:"duplicates"`
	AbortedSeen int      `json:"aborted_seen"`
	Errors      []string `json:"errors"`
}

func main() {
	boot := flag.String("bootstrap", "", "host:port")
	ca := flag.String("ca", "", "PEM CA file")
	topic := flag.String("topic", "", "topic")
	txns := flag.Int("txns", 6, "transactions")
	per := flag.Int("per", 100, "records per transaction")
	abortEvery := flag.Int("abort-every", 3, "abort every Nth transaction (0: never)")
	txid := flag.String("txid", "franzgo-sni", "transactional id")
	timeout := flag.Duration("timeout", 120*time.Second, "overall deadline")
	flag.Parse()
	res := result{Errors: []string{}}
	defer func() { json.NewEncoder(os.Stdout).Encode(res) }()
	fail := func(where string, err error) { res.Errors = append(res.Errors, fmt.Sprintf("%s: %v", where, err)) }

	pem, err := os.ReadFile(*ca)
	if err != nil {
		fail("ca", err)
		return
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(pem)
	tlsCfg := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	common := []kgo.Opt{kgo.SeedBrokers(*boot), kgo.DialTLSConfig(tlsCfg)}

	prod, err := kgo.NewClient(append(common, kgo.TransactionalID(*txid), kgo.DefaultProduceTopic(*topic))...)
	if err != nil {
		fail("producer", err)
		return
	}
	defer prod.Close()
	md, err := kmsg.NewPtrMetadataRequest().RequestWith(ctx, prod)
	if err != nil {
		fail("metadata", err)
		return
	}
	for _, b := range md.Brokers {
		res.Brokers = append(res.Brokers, fmt.Sprintf("%s:%d", b.Host, b.Port))
	}
	sort.Strings(res.Brokers)
	for t := 0; t < *txns; t++ {
		abort := *abortEvery > 0 && (t+1)%*abortEvery == 0
		if err := prod.BeginTransaction(); err != nil {
			fail("begin", err)
			return
		}
		for i := 0; i < *per; i++ {
			key := fmt.Sprintf("fg-%d-%d", t, i)
			if abort {
				key = "aborted-" + key
			}
			if err := prod.ProduceSync(ctx, &kgo.Record{Key: []byte(key), Value: []byte(key)}).FirstErr(); err != nil {
				fail("produce", err)
				return
			}
		}
		commit := kgo.TryCommit
		if abort {
			commit = kgo.TryAbort
		}
		if err := prod.EndTransaction(context.Background(), commit); err != nil {
			fail("end", err)
			return
		}
		if abort {
			res.Aborted += *per
		} else {
			res.Committed += *per
		}
	}

	cons, err := kgo.NewClient(append(common, kgo.ConsumeTopics(*topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		fail("consumer", err)
		return
	}
	defer cons.Close()
	seen := map[string]bool{}
	for res.Consumed < res.Committed && ctx.Err() == nil {
		fs := cons.PollFetches(ctx)
		fs.EachError(func(t string, p int32, err error) {
			if ctx.Err() == nil {
				fail(fmt.Sprintf("fetch %s/%d", t, p), err)
			}
		})
		fs.EachRecord(func(r *kgo.Record) {
			k := string(r.Key)
			res.Consumed++
			if len(k) > 8 && k[:8] == "aborted-" {
				res.AbortedSeen++
			}
			if seen[k] {
				res.Duplicates++
			}
			seen[k] = true
		})
	}
	res.UniqueKeys = len(seen)
}
