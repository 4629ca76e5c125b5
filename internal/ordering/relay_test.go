package ordering_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/groupcommit"
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

// TestAHungQueueHoldsOnlyItsKeys: one queue's sends hang; the other queues' records are
// published and marked meanwhile, that queue's are not skipped, and once the queue answers
// again everything is published in order.
func TestAHungQueueHoldsOnlyItsKeys(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(4)
	hung := ordering.Queue{Broker: "broker-a", ID: 2}
	release := make(chan struct{})
	s.setHook(func(ctx context.Context, q ordering.Queue, _ []ordering.Message) error {
		if q == hung {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	var keys []string
	for q := range 4 {
		keys = append(keys, keysOn(q, 4, 3)...)
	}
	for range 5 {
		o.add(keys...)
	}
	r := startRelay(t, o, s, ordering.RelayConfig{Batch: 4, MaxPerSend: 2, StuckAfter: 100 * time.Millisecond})
	wait.Until(t, 10*time.Second, "the other queues' 45 records marked", func() bool { return o.unpublished() == 15 })
	wait.Until(t, 10*time.Second, "the hung queue reported stuck", func() bool {
		for _, q := range r.Stats().Queues {
			if q.Queue == hung {
				return q.State == ordering.QueueStuck && q.Lag > 0
			}
		}
		return false
	})
	for _, q := range r.Stats().Queues {
		if q.Queue != hung {
			require.Equal(t, ordering.QueueIdle, q.State, "queue %s", q.Queue)
			require.Zero(t, q.Lag)
		}
	}
	for _, k := range keysOn(2, 4, 3) {
		require.Empty(t, s.storedOf(k), "nothing of the hung queue's keys is stored")
	}
	close(release)
	wait.Until(t, 10*time.Second, "everything marked", func() bool { return o.unpublished() == 0 })
	requireInOrder(t, o, s)
}

// TestRecordsThatCommitLateArePublished: a transaction takes an id, then commits after later
// ids were published (the pump's cursor passed it): its record is still published.
func TestRecordsThatCommitLateArePublished(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(1)
	slow := o.begin()
	slow.insert("late")
	o.add("a", "b")
	r := startRelay(t, o, s, ordering.RelayConfig{})
	wait.Until(t, 10*time.Second, "a and b marked", func() bool { return o.unpublished() == 1 })
	slice := ordering.Slice{Hash: ordering.HashJava, Count: 1}
	reads := o.readsOf(slice)
	wait.Until(t, 10*time.Second, "the pump to read again past b", func() bool { return o.readsOf(slice) > reads+2 })
	slow.commit()
	o.add("c")
	r.WakeKey("c")
	wait.Until(t, 10*time.Second, "the late record marked", func() bool { return o.unpublished() == 0 })
	require.Equal(t, []int64{1}, s.storedOf("late"))
	requireInOrder(t, o, s)
}

// TestAFailedSendDiscardsTheBatchReadAhead: a pump reads its next batch while one is in
// flight; when the flight fails, the batch read ahead (which holds the successors of what
// failed) is never sent ahead of it.
func TestAFailedSendDiscardsTheBatchReadAhead(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(1)
	for range 8 {
		o.add("k")
	}
	slice := ordering.Slice{Hash: ordering.HashJava, Count: 1}
	var once sync.Once
	s.setHook(func(context.Context, ordering.Queue, []ordering.Message) error {
		failed := false
		once.Do(func() {
			// Fail the first batch once the next one was read ahead.
			deadline := time.Now().Add(5 * time.Second)
			for o.readsOf(slice) < 2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			failed = true
		})
		if failed {
			return errors.New("broker said no")
		}
		return nil
	})
	r := startRelay(t, o, s, ordering.RelayConfig{Batch: 2, MaxPerSend: 2})
	wait.Until(t, 10*time.Second, "everything marked", func() bool { return o.unpublished() == 0 })
	require.GreaterOrEqual(t, o.readsOf(slice), 2, "the pump read ahead")
	require.EqualValues(t, 2, r.Stats().Failed, "the failed batch")
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, s.storedOf("k"), "never a successor first, nothing twice")
}

// TestKeysThatMoveToAnotherQueueKeepTheirOrder: the topic grows from 2 to 3 queues while a
// key's first record hangs in flight on its old queue; the key's records now belong to
// another pump, which must not send the second before the first is stored.
func TestKeysThatMoveToAnotherQueueKeepTheirOrder(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	// A key that moves: queue 0 of 2, queue 2 of 3.
	var key string
	for i := 1; key == ""; i++ {
		if k := strconv.Itoa(i); ordering.HashJava.Slot(k, 2) == 0 && ordering.HashJava.Slot(k, 3) == 2 {
			key = k
		}
	}
	old := ordering.Queue{Broker: "broker-a", ID: 0}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.setHook(func(ctx context.Context, q ordering.Queue, _ []ordering.Message) error {
		if q == old {
			once.Do(func() { close(entered) })
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	o.add(key)
	startRelay(t, o, s, ordering.RelayConfig{})
	<-entered // key:1 hangs on its old queue
	o.add(key, key)
	s.setQueues(3)
	wait.Until(t, 10*time.Second, "the moved key's records stored by its new pump", func() bool { return len(s.storedOf(key)) == 3 })
	wait.Until(t, 10*time.Second, "everything marked", func() bool { return o.unpublished() == 0 })
	require.Equal(t, []int64{1, 2, 3}, s.storedOf(key), "the new pump sends the predecessor itself, first")
	close(release) // the old pump's send lands late: a copy, after its successors
	wait.Until(t, 10*time.Second, "the late copy", func() bool { return len(s.storedOf(key)) == 4 })
	requireInOrder(t, o, s)
}

// TestConfirmationsOfManyQueuesAreMarkedInOneStatement: eight pumps' confirmations that
// arrive within the linger become one MarkPublished statement, and a pump does not wait for
// its mark before its next send; MarkMaxRows bounds a statement.
func TestConfirmationsOfManyQueuesAreMarkedInOneStatement(t *testing.T) {
	t.Parallel()
	const queues = 8
	for _, tc := range []struct {
		maxRows, wantStatements int
	}{{1024, 1}, {5, 4}} {
		o, s := newMemOutbox(), newMemSender(queues)
		var (
			mu      sync.Mutex
			waiting int
			all     = make(chan struct{})
		)
		// Every queue's first send waits until all eight are in flight, so their
		// confirmations arrive together.
		s.setHook(func(_ context.Context, _ ordering.Queue, msgs []ordering.Message) error {
			if _, seq := parseBody(msgs[0].Body); seq != 1 {
				return nil
			}
			mu.Lock()
			waiting++
			if waiting == queues {
				close(all)
			}
			mu.Unlock()
			<-all
			return nil
		})
		for q := range queues {
			k := keysOn(q, queues, 1)[0]
			o.add(k, k) // two batches of one per queue (Batch 1): the second follows the first's confirmation
		}
		r := startRelay(t, o, s, ordering.RelayConfig{Batch: 1, MarkLinger: time.Second, MarkMaxRows: tc.maxRows})
		wait.Until(t, 10*time.Second, "everything marked", func() bool { return o.unpublished() == 0 })
		stmts := o.statements()
		rows := 0
		for _, st := range stmts {
			require.LessOrEqual(t, len(st), tc.maxRows)
			rows += len(st)
		}
		require.Equal(t, 2*queues, rows)
		require.Len(t, stmts, tc.wantStatements, "statements %v", stmts)
		// What /metrics shows of the committer: a group per statement, a request per
		// confirmed batch (of one record each here).
		require.Equal(t, groupcommit.Stats{Groups: int64(len(stmts)), Requests: 2 * queues, Rows: 2 * queues}, r.Stats().Marks)
		requireInOrder(t, o, s)
	}
}

// TestFailedMarksAreRetriedWithoutSendingAgain: while the database refuses marks, the
// committer retries them, and the pumps go on without sending what the broker stored again.
func TestFailedMarksAreRetriedWithoutSendingAgain(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	o.mu.Lock()
	o.failMark = 3
	o.mu.Unlock()
	keys := append(keysOn(0, 2, 2), keysOn(1, 2, 2)...)
	for range 3 {
		o.add(keys...)
	}
	startRelay(t, o, s, ordering.RelayConfig{Batch: 1})
	wait.Until(t, 10*time.Second, "everything marked", func() bool { return o.unpublished() == 0 })
	for _, k := range keys {
		require.Equal(t, []int64{1, 2, 3}, s.storedOf(k), "sent once each, in order")
	}
}

// TestOnlyOneRelayIsActive: two relays on one outbox; one publishes, the other stands by,
// and takes over when the first stops.
func TestOnlyOneRelayIsActive(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	cfg := ordering.RelayConfig{Topic: "t", Poll: 20 * time.Millisecond, RoutePoll: 20 * time.Millisecond}
	r1, err := ordering.NewRelay(o, s, cfg)
	require.NoError(t, err)
	r2, err := ordering.NewRelay(o, s, cfg)
	require.NoError(t, err)
	require.NoError(t, r1.Start(t.Context()))
	<-o.granted // r1 leads
	require.NoError(t, r2.Start(t.Context()))
	o.add("k")
	wait.Until(t, 10*time.Second, "k:1 published", func() bool { return o.unpublished() == 0 })
	require.False(t, r2.Stats().Active, "the second relay stands by")
	require.Empty(t, r2.Stats().Queues)
	require.EqualValues(t, 0, r2.Stats().Published)
	require.NoError(t, r1.Stop(t.Context()))
	require.Empty(t, r1.Stats().Queues, "a relay that stopped has no pumps")
	require.False(t, r1.Stats().Active, "a relay that stopped does not lead")
	<-o.granted // r2 takes over
	o.add("k")
	wait.Until(t, 10*time.Second, "k:2 published", func() bool { return o.unpublished() == 0 })
	require.EqualValues(t, 1, r2.Stats().Published)
	require.NoError(t, r2.Stop(t.Context()))
	requireInOrder(t, o, s)
}

// addOne writes and commits key's next event and returns it as a committing process
// hands it over: Pred is its unpublished predecessor, 0 when that one is published.
func (o *memOutbox) addOne(key string) ordering.OutboxRecord {
	o.add(key)
	o.mu.Lock()
	defer o.mu.Unlock()
	rec := o.rows[len(o.rows)-1].rec
	for _, r := range o.rows {
		if r.rec.Key == key && r.rec.Seq == rec.Seq-1 && !r.published {
			rec.Pred = r.rec.ID
		}
	}
	return rec
}

// idleRelay starts a relay on 2 queues that never polls, and waits for its pumps' first
// reads.
func idleRelay(t *testing.T, o *memOutbox, s *memSender, probe time.Duration) (*ordering.Relay, []ordering.Slice) {
	t.Helper()
	r := startRelay(t, o, s, ordering.RelayConfig{Poll: probe, QueuePoll: time.Hour, RoutePoll: time.Hour})
	slices := []ordering.Slice{{Hash: ordering.HashJava, Count: 2, Index: 0}, {Hash: ordering.HashJava, Count: 2, Index: 1}}
	wait.Until(t, 10*time.Second, "both pumps' first read", func() bool { return o.readsOf(slices[0]) > 0 && o.readsOf(slices[1]) > 0 })
	return r, slices
}

// TestOfferedRecordsGoWithoutARead: a record handed over whose predecessor is published, or
// held by the pump, is sent without reading the outbox; one whose predecessor the pump does
// not hold makes it read, and the two go in order.
func TestOfferedRecordsGoWithoutARead(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	r, slices := idleRelay(t, o, s, time.Hour)
	k := keysOn(0, 2, 1)[0]
	reads := o.readsOf(slices[0])

	r.Offer(o.addOne(k))
	wait.Until(t, 10*time.Second, "k:1 published", func() bool { return o.unpublished() == 0 })
	r.Offer(o.addOne(k))
	wait.Until(t, 10*time.Second, "k:2 published", func() bool { return o.unpublished() == 0 })
	require.Equal(t, reads, o.readsOf(slices[0]), "no read for records handed over")

	o.add(k) // k:3, committed elsewhere: not handed over
	r.Offer(o.addOne(k))
	wait.Until(t, 10*time.Second, "k:3 and k:4 published", func() bool { return o.unpublished() == 0 })
	require.Equal(t, reads+1, o.readsOf(slices[0]), "k:4's predecessor is not the pump's: one read")
	require.Equal(t, []int64{1, 2, 3, 4}, s.storedOf(k))
	require.Equal(t, 0, o.readsOf(slices[1])-1, "the other queue never read again")
}

// TestALateOfferIsNotSentAgain: a record read, sent and marked before it is handed over is
// not sent a second time.
func TestALateOfferIsNotSentAgain(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	r, _ := idleRelay(t, o, s, time.Hour)
	rec := o.addOne("k")
	r.WakeKey("k")
	wait.Until(t, 10*time.Second, "k:1 published", func() bool { return o.unpublished() == 0 })
	r.Offer(rec)
	r.Offer(o.addOne("k"))
	wait.Until(t, 10*time.Second, "k:2 published", func() bool { return o.unpublished() == 0 })
	require.Equal(t, []int64{1, 2}, s.storedOf("k"))
}

// TestTheProbeFindsWhatWasNotHanded: a record written by another process is found by the
// relay's probe, and only its queue's pump reads.
func TestTheProbeFindsWhatWasNotHanded(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	_, slices := idleRelay(t, o, s, 20*time.Millisecond)
	k := keysOn(1, 2, 1)[0]
	o.add(k)
	wait.Until(t, 10*time.Second, "k:1 published", func() bool { return o.unpublished() == 0 })
	require.Equal(t, 1, o.readsOf(slices[0]), "the other queue's pump did not read")
	o.mu.Lock()
	probes := o.probes
	o.mu.Unlock()
	require.Positive(t, probes)
}

func TestRelayNeedsATopic(t *testing.T) {
	t.Parallel()
	_, err := ordering.NewRelay(newMemOutbox(), newMemSender(1), ordering.RelayConfig{})
	require.ErrorContains(t, err, "topic")
	require.True(t, strings.Contains(fmt.Sprint(ordering.QueueStates), "stuck"))
}
