package ordering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	retry "github.com/walletsaga/walletsaga/internal/backoff"
	"github.com/walletsaga/walletsaga/internal/groupcommit"
	"github.com/walletsaga/walletsaga/internal/lifecycle"
)

// OutboxRecord is one unpublished row of a transactional outbox.
type OutboxRecord struct {
	ID   int64
	Key  string // sharding key: records of one key are published strictly in Seq order
	Seq  int64  // 1, 2, 3, … per key, without gaps
	Tag  string
	Keys []string
	Body []byte
	// At is when the record was written (a queue's lag is the age of its oldest).
	At time.Time
	// Pred is the ID of the record's predecessor (same Key, Seq-1) while that one is
	// unpublished, and 0 once it is published (or for Seq 1).
	Pred int64
	// Traceparent is the W3C traceparent of whatever wrote the record ("" untraced): its
	// send span is a child of it, and the message carries the send span's (PropertyTraceparent).
	Traceparent string
}

// Slice names the records of one broker queue: those whose key Hash puts on queue Index of a
// route with Count queues (Hash.Slot(key, Count) == Index).
type Slice struct {
	Hash  KeyHash
	Count int
	Index int
}

// Cursor is where a queue's reading of the outbox stands: every record of the queue with an
// ID up to After was shown to the queue already, except those written by transactions that
// were still open at the read that returned Horizon.
type Cursor struct {
	After int64
	// Horizon is the outbox's own token for "the transactions still open at the previous
	// read" (the zero Cursor has none); the relay only hands it back.
	Horizon uint64
}

// Page is one read of a queue's records.
type Page struct {
	// Records are, in ID order: up to limit unpublished records with an ID above the
	// cursor's After ("fresh"), and every unpublished record at or below it that was written
	// by a transaction still open at the cursor's Horizon ("late": committed after the
	// cursor passed its ID). Records whose ID the read was told to skip are left out.
	Records []OutboxRecord
	// Last is the highest record ID the read could see (0 for an empty outbox).
	Last int64
	// Horizon is the token for the next read's Cursor.
	Horizon uint64
}

// Outbox is the relay's view of a transactional outbox. The package that owns the outbox's
// table implements it (with its SQL); the relay only moves records.
type Outbox interface {
	// Lead blocks until this relay is the one that publishes the outbox (one at a time per
	// outbox, across processes), or ctx ends. It returns a context that ends when the relay
	// stops being the one (e.g. its database session was lost), and a release to call when
	// done.
	Lead(ctx context.Context) (context.Context, func(), error)
	// Pending reads s's unpublished records from c on (see Page), leaving out the IDs in skip.
	Pending(ctx context.Context, s Slice, c Cursor, skip []int64, limit int) (Page, error)
	// MarkPublished records that the records were stored by the broker, each as its MsgID,
	// in one statement. Marking a record twice must be harmless (at-least-once).
	MarkPublished(ctx context.Context, recs []Published) error
	// Strays returns the keys of up to limit unpublished records, oldest first, that were
	// written more than olderThan ago and whose IDs are not in held: records nobody handed
	// to the relay (written by another process, or committed late) or left behind.
	Strays(ctx context.Context, held []int64, olderThan time.Duration, limit int) ([]string, error)
}

// Published is a record the broker stored, and the message id it got.
type Published struct {
	ID    int64
	MsgID string
}

// Sender is the relay's view of the ordered producer (OrderedProducer).
type Sender interface {
	// Route returns the topic's writable queues, in the order its selector indexes them,
	// and the hash it selects with.
	Route(ctx context.Context, topic string) (Route, error)
	// SendBatch sends msgs to queue q together, in order, all or nothing, and fails unless
	// the broker confirms them as stored.
	SendBatch(ctx context.Context, q Queue, msgs []Message) ([]SendResult, error)
}

// RelayConfig configures a Relay.
type RelayConfig struct {
	Topic string
	// Batch is how many records a queue's pump reads at a time (default 256).
	Batch int
	// MaxPerSend is how many messages one batch send carries at most (default 64).
	MaxPerSend int
	// Poll is how often the relay looks, in one statement for all its queues, for records
	// it was not handed (Offer) and no pump holds: written by other processes, committed
	// late, or left behind; it wakes the pumps of their queues (default 100ms).
	Poll time.Duration
	// QueuePoll is how often a pump that nothing woke reads its queue anyway (default 2s):
	// a backstop for what Poll cannot see, past the first rows of a long backlog.
	QueuePoll time.Duration
	// RoutePoll is how often the relay reads the topic's route, to follow added or removed
	// queues (default 1s).
	RoutePoll time.Duration
	// RetryBackoff is a pump's first wait after a failed send or read, doubling up to ten
	// times it while they keep failing (default 200ms).
	RetryBackoff time.Duration
	// SendTimeout bounds one batch send (default 10s).
	SendTimeout time.Duration
	// StuckAfter is how long a queue's send may be in flight, or the queue keep failing,
	// before its state is "stuck" (default 5s).
	StuckAfter time.Duration
	// MarkLinger is how long the shared committer waits for more pumps' confirmations before
	// it marks what it holds published in one statement (default 20ms: no send waits for a
	// mark, so the linger costs no latency)…
	MarkLinger time.Duration
	// …unless MarkMaxRows records are waiting (default 1024).
	MarkMaxRows int
	Logger      *slog.Logger
	// ObserveSend, when set, is told how long each send to the broker took and whether it
	// failed (metrics). It must be quick and safe for concurrent use.
	ObserveSend func(took time.Duration, err error)
}

// QueueState is what a queue's pump is doing.
type QueueState string

// The states of a queue's pump.
const (
	QueueIdle       QueueState = "idle"        // nothing to send
	QueueSending    QueueState = "sending"     // a send in flight
	QueueBackingOff QueueState = "backing_off" // waiting after a failed send or read
	QueueStuck      QueueState = "stuck"       // in flight, or failing, for longer than StuckAfter
)

// QueueStates lists every QueueState.
var QueueStates = []QueueState{QueueIdle, QueueSending, QueueBackingOff, QueueStuck}

// QueueStats is one queue's pump, as the relay sees it now.
type QueueStats struct {
	Queue Queue
	State QueueState
	// Lag is the age of the oldest record the pump holds that the broker has not confirmed
	// yet (0 when it holds none).
	Lag time.Duration
}

// RelayStats counts what a relay did, and where its queues stand.
type RelayStats struct {
	Published, Failed int64
	Active            bool
	// Marks counts the committer's groups: the statements that marked the pumps' confirmed
	// records published, over every lead of this relay.
	Marks groupcommit.Stats
	// Queues are the pumps of the current route, in its order (none while not active).
	Queues []QueueStats
}

// Relay publishes an outbox to RocketMQ, one pump per broker queue of the topic's route.
// Each pump reads its queue's records (Outbox.Pending with its Slice and its own cursor),
// sends them as batches to its queue, reads its next batch while one is in flight, and
// hands what the broker confirmed to a committer shared by all pumps, which marks them
// published in one statement per short linger. A pump that fails or hangs holds back only
// the keys hashed to its queue. A pump sends a record only when its predecessor is published
// or was confirmed (or is being sent, earlier in the same batch) by that pump; a failed send
// discards the batch read ahead and reads again from the start, so no key's record is ever
// sent ahead of an unpublished predecessor. A record committed by this process is handed
// to its pump (Offer), which sends it without reading the outbox when its predecessor is
// published or its own; once per Poll, one statement looks for records no pump holds
// (written by other processes, committed late, left behind) and has their pumps read; a
// pump nothing woke reads every QueuePoll. The relay follows the
// route: when the topic's queues change, keys move, and the pumps start again on the new
// route. Only the Outbox's leader publishes, so several replicas can run a relay safely.
//
// Start begins publishing; Stop returns once the sends in flight have finished (each within
// SendTimeout) and what they stored is marked.
type Relay struct {
	// Runner publishes in the background between Start and Stop.
	*lifecycle.Runner
	cfg    RelayConfig
	outbox Outbox
	sender Sender
	log    *slog.Logger

	mu    sync.Mutex
	pumps []*pump

	published, failed atomic.Int64
	active            atomic.Bool
	marks             groupcommit.Counters
}

// NewRelay returns a relay; Start starts it.
func NewRelay(outbox Outbox, sender Sender, cfg RelayConfig) (*Relay, error) {
	if cfg.Topic == "" {
		return nil, errors.New("ordering: relay needs a topic")
	}
	if outbox == nil || sender == nil {
		return nil, errors.New("ordering: relay needs an outbox and a sender")
	}
	defaults := []struct {
		d   *time.Duration
		def time.Duration
	}{
		{&cfg.Poll, 100 * time.Millisecond}, {&cfg.QueuePoll, 2 * time.Second}, {&cfg.RoutePoll, time.Second}, {&cfg.RetryBackoff, 200 * time.Millisecond},
		{&cfg.SendTimeout, 10 * time.Second}, {&cfg.StuckAfter, 5 * time.Second}, {&cfg.MarkLinger, 20 * time.Millisecond},
	}
	for _, d := range defaults {
		if *d.d <= 0 {
			*d.d = d.def
		}
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.MaxPerSend <= 0 {
		cfg.MaxPerSend = 64
	}
	if cfg.MarkMaxRows <= 0 {
		cfg.MarkMaxRows = 1024
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	r := &Relay{cfg: cfg, outbox: outbox, sender: sender,
		log: cfg.Logger.With("component", "relay", "topic", cfg.Topic)}
	r.Runner = lifecycle.NewRunner(r.publish)
	return r, nil
}

// WakeKey tells the relay that a record of key was committed: the pump of its queue reads.
// It never blocks.
func (r *Relay) WakeKey(key string) {
	if p := r.pumpOf(key); p != nil {
		p.requestRead()
	}
}

// Offer hands the relay a record this process just committed. The pump of its queue sends
// it without reading the outbox when the record's predecessor is published (Pred 0) or held
// by that pump, and reads its queue otherwise. A relay that is not publishing drops it: the
// one that is finds it (Poll). It never blocks.
func (r *Relay) Offer(rec OutboxRecord) {
	if p := r.pumpOf(rec.Key); p != nil {
		p.offer(rec)
	}
}

// pumpOf is the pump of key's queue on the current route (nil while there is none).
func (r *Relay) pumpOf(key string) *pump {
	r.mu.Lock()
	defer r.mu.Unlock()
	return pumpFor(r.pumps, key)
}

// pumpFor is the pump of key's queue among the pumps of one route (nil when there are none).
func pumpFor(pumps []*pump, key string) *pump {
	if len(pumps) == 0 {
		return nil
	}
	s := pumps[0].slice
	return pumps[s.Hash.Slot(key, s.Count)]
}

// Stats returns the relay's counters and its queues' states.
func (r *Relay) Stats() RelayStats {
	r.mu.Lock()
	pumps := slices.Clone(r.pumps)
	r.mu.Unlock()
	s := RelayStats{Published: r.published.Load(), Failed: r.failed.Load(), Active: r.active.Load(), Marks: r.marks.Stats()}
	now := time.Now()
	for _, p := range pumps {
		s.Queues = append(s.Queues, p.stats(now))
	}
	return s
}

// publish leads and publishes until ctx is done.
func (r *Relay) publish(ctx context.Context) error {
	for ctx.Err() == nil {
		err := r.lead(ctx)
		r.active.Store(false)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			r.log.Warn("relay lost its lead; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.Poll):
		}
	}
	return nil
}

// lead waits to be the outbox's leader, then runs a pump per queue of the topic's current
// route until ctx is done or the lead is lost.
func (r *Relay) lead(ctx context.Context) error {
	lctx, release, err := r.outbox.Lead(ctx)
	if err != nil {
		return err
	}
	defer release()
	r.active.Store(true)
	r.log.Info("relay active")

	com := newCommitter(lctx, r.outbox, r.cfg.MarkLinger, r.cfg.MarkMaxRows, &r.marks, r.log,
		retry.Policy{Base: r.cfg.RetryBackoff, Max: 10 * r.cfg.RetryBackoff})
	if err := com.Start(lctx); err != nil {
		return err
	}
	pctx, stopProbe := context.WithCancel(lctx)
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		r.probe(pctx)
	}()
	defer func() {
		stopProbe()
		<-probed
	}()
	var (
		stopping    sync.WaitGroup // pumps told to stop, finishing their sends
		route       Route
		pumps       []*pump
		routeErrors int
	)
	// A pump stops at once; its send in flight finishes on its own, while the pumps of a new
	// route start.
	stopPumps := func() {
		for _, p := range pumps {
			stopping.Go(func() { _ = p.Stop(context.WithoutCancel(ctx)) })
		}
	}
	defer func() {
		stopPumps()
		r.setPumps(nil)
		stopping.Wait()
		_ = com.Stop(context.WithoutCancel(ctx))
	}()
	policy := retry.Policy{Base: r.cfg.RetryBackoff, Max: r.cfg.RoutePoll}
	t := time.NewTimer(0)
	defer t.Stop()
	for {
		select {
		case <-lctx.Done():
			if ctx.Err() != nil {
				return nil
			}
			return fmt.Errorf("lead lost: %w", context.Cause(lctx))
		case <-t.C:
		}
		rt, err := r.sender.Route(lctx, r.cfg.Topic)
		if err != nil {
			// The pumps of the last route keep going; their sends fail if it is gone.
			routeErrors++
			if routeErrors == 1 || routeErrors%60 == 0 {
				r.log.Warn("relay cannot read the topic's route", "err", err, "failures", routeErrors)
			}
			t.Reset(policy.Delay(routeErrors, nil))
			continue
		}
		routeErrors = 0
		if !rt.Equal(route) {
			// Keys move between queues: every pump starts again on the new route. The old
			// pumps' sends in flight finish on their own (their confirmations are marked);
			// a record they hold may be sent once more by its new pump, never ahead of its
			// predecessor.
			stopPumps()
			pumps = make([]*pump, len(rt.Queues))
			for i, q := range rt.Queues {
				pumps[i] = newPump(r, com, q, Slice{Hash: rt.Hash, Count: len(rt.Queues), Index: i})
			}
			r.setPumps(pumps)
			for _, p := range pumps {
				if err := p.Start(lctx); err != nil {
					return err
				}
			}
			if len(route.Queues) > 0 {
				r.log.Info("relay follows a new route", "queues", len(rt.Queues), "was", len(route.Queues), "hash", rt.Hash)
			}
			route = rt
		}
		t.Reset(r.cfg.RoutePoll)
	}
}

// The probe's records are those older than strayAge (younger ones are being handed over)
// and at most strayLimit of them.
const (
	strayAge   = 50 * time.Millisecond
	strayLimit = 256
)

// probe looks, every Poll until ctx ends, for records no pump holds, and has the pumps of
// their queues read.
func (r *Relay) probe(ctx context.Context) {
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	var (
		held     []int64
		failures int
	)
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		pumps := r.pumps
		r.mu.Unlock()
		if len(pumps) == 0 {
			continue
		}
		held = held[:0]
		for _, p := range pumps {
			held = p.held(held)
		}
		keys, err := r.outbox.Strays(ctx, held, strayAge, strayLimit)
		if err != nil {
			if ctx.Err() == nil {
				failures++
				if failures == 1 || failures%100 == 0 {
					r.log.Warn("relay cannot look for records it was not handed", "err", err, "failures", failures)
				}
			}
			continue
		}
		failures = 0
		for _, k := range keys {
			pumpFor(pumps, k).requestRead()
		}
	}
}

func (r *Relay) setPumps(pumps []*pump) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pumps = pumps
}
