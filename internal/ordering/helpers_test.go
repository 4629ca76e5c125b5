package ordering_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// memOutbox is an outbox in memory that keeps Outbox's contract as the wallet's SQL does:
// ids are taken at insert, transactions take their id (xact) when they begin and commit
// later, a read sees committed rows only, its Horizon is the oldest transaction still open,
// and the late rows of a cursor are those at or below it written by transactions from its
// horizon on.
type memOutbox struct {
	mu       sync.Mutex
	rows     []*memRow
	nextXact uint64
	open     map[uint64]bool
	seqs     map[string]int64
	reads    map[ordering.Slice]int
	marks    [][]ordering.Published // one entry per MarkPublished statement
	lead     chan struct{}          // the lead's token
	granted  chan struct{}          // a send each time Lead hands the token out (while room)
	failMark int                    // MarkPublished fails this many more times
	probes   int                    // Strays statements
	changed  wait.Signal            // raised after each commit, read and mark
}

type memRow struct {
	rec       ordering.OutboxRecord
	xact      uint64
	committed bool
	published bool
}

func newMemOutbox() *memOutbox {
	o := &memOutbox{nextXact: 1, open: map[uint64]bool{}, seqs: map[string]int64{}, reads: map[ordering.Slice]int{}, lead: make(chan struct{}, 1),
		granted: make(chan struct{}, 8)}
	o.lead <- struct{}{}
	return o
}

// memTx is a writing transaction of the memOutbox.
type memTx struct {
	o    *memOutbox
	xact uint64
	rows []*memRow
}

func (o *memOutbox) begin() *memTx {
	o.mu.Lock()
	defer o.mu.Unlock()
	tx := &memTx{o: o, xact: o.nextXact}
	o.nextXact++
	o.open[tx.xact] = true
	return tx
}

// insert writes key's next event; the caller commits a key's events in seq order.
func (tx *memTx) insert(key string) {
	o := tx.o
	o.mu.Lock()
	defer o.mu.Unlock()
	o.seqs[key]++
	id := int64(len(o.rows) + 1)
	r := &memRow{rec: ordering.OutboxRecord{ID: id, Key: key, Seq: o.seqs[key], Tag: "t", Body: []byte(fmt.Sprintf("%s:%d", key, o.seqs[key])),
		At: time.Now()}, xact: tx.xact}
	o.rows = append(o.rows, r)
	tx.rows = append(tx.rows, r)
}

func (tx *memTx) commit() {
	o := tx.o
	defer o.changed.Raise()
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, r := range tx.rows {
		r.committed = true
	}
	delete(o.open, tx.xact)
}

// add writes and commits one event of each key.
func (o *memOutbox) add(keys ...string) {
	for _, k := range keys {
		tx := o.begin()
		tx.insert(k)
		tx.commit()
	}
}

func (o *memOutbox) Lead(ctx context.Context) (context.Context, func(), error) {
	select {
	case <-o.lead:
	case <-ctx.Done():
		return nil, nil, ctx.Err()
	}
	select {
	case o.granted <- struct{}{}:
	default:
	}
	lctx, cancel := context.WithCancel(ctx)
	return lctx, func() {
		cancel()
		o.lead <- struct{}{}
	}, nil
}

func (o *memOutbox) Pending(_ context.Context, s ordering.Slice, c ordering.Cursor, skip []int64, limit int) (ordering.Page, error) {
	defer o.changed.Raise()
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reads[s]++
	page := ordering.Page{Horizon: o.nextXact}
	for x := range o.open {
		page.Horizon = min(page.Horizon, x)
	}
	byKey := map[string]map[int64]*memRow{}
	fresh := 0
	for _, r := range o.rows {
		if !r.committed {
			continue
		}
		page.Last = r.rec.ID
		if byKey[r.rec.Key] == nil {
			byKey[r.rec.Key] = map[int64]*memRow{}
		}
		byKey[r.rec.Key][r.rec.Seq] = r
	}
	for _, r := range o.rows {
		if !r.committed || r.published || s.Hash.Slot(r.rec.Key, s.Count) != s.Index || slices.Contains(skip, r.rec.ID) {
			continue
		}
		late := c.After > 0 && r.rec.ID <= c.After && r.xact >= c.Horizon
		if r.rec.ID <= c.After && !late {
			continue
		}
		if r.rec.ID > c.After {
			if fresh == limit {
				continue
			}
			fresh++
		}
		rec := r.rec
		if p := byKey[r.rec.Key][r.rec.Seq-1]; p != nil && !p.published {
			rec.Pred = p.rec.ID
		}
		page.Records = append(page.Records, rec)
	}
	return page, nil
}

func (o *memOutbox) MarkPublished(_ context.Context, recs []ordering.Published) error {
	defer o.changed.Raise()
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failMark > 0 {
		o.failMark--
		return errors.New("database away")
	}
	o.marks = append(o.marks, slices.Clone(recs))
	for _, p := range recs {
		o.rows[p.ID-1].published = true
	}
	return nil
}

func (o *memOutbox) Strays(_ context.Context, held []int64, olderThan time.Duration, limit int) ([]string, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.probes++
	var keys []string
	for _, r := range o.rows {
		if len(keys) == limit {
			break
		}
		if r.committed && !r.published && !slices.Contains(held, r.rec.ID) && time.Since(r.rec.At) > olderThan {
			keys = append(keys, r.rec.Key)
		}
	}
	return keys, nil
}

func (o *memOutbox) unpublished() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	n := 0
	for _, r := range o.rows {
		if !r.published {
			n++
		}
	}
	return n
}

func (o *memOutbox) statements() [][]ordering.Published {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.marks)
}

func (o *memOutbox) readsOf(s ordering.Slice) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.reads[s]
}

// memSender is a broker in memory: a route, and per key the seqs stored, in the order they
// were stored (copies included). hook, when set, runs before a batch is stored and may block
// it or fail it.
type memSender struct {
	mu     sync.Mutex
	route  ordering.Route
	stored map[string][]int64
	at     map[ordering.Queue][]string // what each queue stored, "key:seq"
	hook   func(ctx context.Context, q ordering.Queue, msgs []ordering.Message) error
	stores wait.Signal // raised after each batch stored
}

func newMemSender(queues int) *memSender {
	s := &memSender{stored: map[string][]int64{}, at: map[ordering.Queue][]string{}}
	s.setQueues(queues)
	return s
}

func (s *memSender) setQueues(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.route = ordering.Route{Hash: ordering.HashJava}
	for i := range n {
		s.route.Queues = append(s.route.Queues, ordering.Queue{Broker: "broker-a", ID: i})
	}
}

func (s *memSender) setHook(h func(ctx context.Context, q ordering.Queue, msgs []ordering.Message) error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.hook = h
}

func (s *memSender) Route(context.Context, string) (ordering.Route, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return ordering.Route{Queues: slices.Clone(s.route.Queues), Hash: s.route.Hash}, nil
}

func (s *memSender) SendBatch(ctx context.Context, q ordering.Queue, msgs []ordering.Message) ([]ordering.SendResult, error) {
	s.mu.Lock()
	hook := s.hook
	s.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, q, msgs); err != nil {
			return nil, err
		}
	}
	defer s.stores.Raise()
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]ordering.SendResult, len(msgs))
	for i, m := range msgs {
		k, seq := parseBody(m.Body)
		s.stored[k] = append(s.stored[k], int64(seq))
		s.at[q] = append(s.at[q], string(m.Body))
		out[i] = ordering.SendResult{MsgID: fmt.Sprintf("%s#%d", q, len(s.at[q])), Broker: q.Broker, QueueID: q.ID}
	}
	return out, nil
}

func (s *memSender) storedOf(key string) []int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.stored[key])
}

// requireInOrder checks the relay's invariant for every key of o: each event was stored at
// least once, and the first time each was stored follows seq order (copies may come later).
func requireInOrder(t *testing.T, o *memOutbox, s *memSender) {
	t.Helper()
	o.mu.Lock()
	last := map[string]int64{}
	for _, r := range o.rows {
		last[r.rec.Key] = max(last[r.rec.Key], r.rec.Seq)
	}
	o.mu.Unlock()
	for key, n := range last {
		var firsts []int64
		seen := map[int64]bool{}
		for _, seq := range s.storedOf(key) {
			if !seen[seq] {
				seen[seq] = true
				firsts = append(firsts, seq)
			}
		}
		want := make([]int64, n)
		for i := range want {
			want[i] = int64(i + 1)
		}
		require.Equal(t, want, firsts, "key %s: first publications in seq order, none missing (stored: %v)", key, s.storedOf(key))
	}
}

// keysOn returns n keys that HashJava puts on queue index of count.
func keysOn(index, count, n int) []string {
	var keys []string
	for i := 1; len(keys) < n; i++ {
		if k := strconv.Itoa(i); ordering.HashJava.Slot(k, count) == index {
			keys = append(keys, k)
		}
	}
	return keys
}

// startRelay runs a relay until the test ends.
func startRelay(t *testing.T, o ordering.Outbox, s ordering.Sender, cfg ordering.RelayConfig) *ordering.Relay {
	t.Helper()
	if cfg.Topic == "" {
		cfg.Topic = "t"
	}
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	if cfg.QueuePoll == 0 {
		cfg.QueuePoll = 20 * time.Millisecond
	}
	if cfg.RoutePoll == 0 {
		cfg.RoutePoll = 20 * time.Millisecond
	}
	if cfg.RetryBackoff == 0 {
		cfg.RetryBackoff = 10 * time.Millisecond
	}
	cfg.Logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError}))
	r, err := ordering.NewRelay(o, s, cfg)
	require.NoError(t, err)
	require.NoError(t, r.Start(t.Context()))
	t.Cleanup(func() { require.NoError(t, r.Stop(context.Background())) })
	return r
}
