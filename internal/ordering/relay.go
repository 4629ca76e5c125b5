package ordering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	retry "github.com/walletsaga/walletsaga/internal/backoff"
)

// OutboxRecord is one unpublished row of a transactional outbox.
type OutboxRecord struct {
	ID   int64
	Key  string // sharding key: records of one key are published strictly in Seq order
	Seq  int64
	Tag  string
	Keys []string
	Body []byte
}

// Outbox is the relay's view of a transactional outbox. The package that owns the outbox's
// table implements it (with its SQL); the relay only moves records.
type Outbox interface {
	// Lead blocks until this relay is the one that publishes the outbox (one at a time per
	// outbox, across processes), or ctx ends. It returns a context that ends when the relay
	// stops being the one (e.g. its database session was lost), and a release to call when
	// done.
	Lead(ctx context.Context) (context.Context, func(), error)
	// Pending returns up to limit unpublished records, oldest first, each key's in Seq order.
	Pending(ctx context.Context, limit int) ([]OutboxRecord, error)
	// MarkPublished records that the records were stored by the broker, each as its MsgID,
	// in one statement. Marking a record twice must be harmless (at-least-once).
	MarkPublished(ctx context.Context, recs []Published) error
}

// Published is a record the broker stored, and the message id it got.
type Published struct {
	ID    int64
	MsgID string
}

// Sender sends one message in its key's order (OrderedProducer).
type Sender interface {
	SendOrderly(ctx context.Context, m Message) (SendResult, error)
}

// BatchSender is a Sender that can also send the messages of one queue as one batch
// (OrderedProducer): QueueOf names a key's queue, or says it cannot yet (no route), and
// SendOrderlyBatch sends messages of one queue together, in order, all or nothing.
type BatchSender interface {
	Sender
	QueueOf(topic, key string) (string, bool)
	SendOrderlyBatch(ctx context.Context, msgs []Message) ([]SendResult, error)
}

// RelayConfig configures a Relay.
type RelayConfig struct {
	Topic string
	// Batch is how many records one round reads (default 256).
	Batch int
	// MaxPerSend is how many messages one batch send carries at most (default 64).
	MaxPerSend int
	// Parallel is how many queues (or keys, without batches) are sent at once (default 16).
	Parallel int
	// Poll is how often the relay looks for records it was not told about (written by other
	// processes) when nothing wakes it (default 100ms).
	Poll time.Duration
	// RetryBackoff is the first wait after a failed round, doubling up to ten times it while
	// rounds keep failing (default 200ms).
	RetryBackoff time.Duration
	Logger       *slog.Logger
	// ObserveSend, when set, is told how long each send to the broker took and whether it
	// failed (metrics). It must be quick and safe for concurrent use.
	ObserveSend func(took time.Duration, err error)
}

// RelayStats counts what a relay did.
type RelayStats struct {
	Published, Failed, Rounds int64
	Active                    bool
}

// Relay publishes an outbox to RocketMQ. Woken in-process (Wake, called after a commit that
// wrote records) or by a short poll (records other processes wrote), it reads unpublished
// records and sends them in order per key: grouped by broker queue, each queue's records as
// batches in record order, the queues in parallel; records are marked published only after
// the broker confirmed them. A failed send stops its queue (its keys) for the round, so
// nothing is ever sent ahead of an unpublished predecessor. Only the Outbox's leader
// publishes, so several replicas can run a relay safely.
type Relay struct {
	cfg    RelayConfig
	outbox Outbox
	sender Sender
	log    *slog.Logger
	wake   chan struct{}

	published, failed, rounds atomic.Int64
	active                    atomic.Bool
}

// NewRelay returns a relay; Run starts it.
func NewRelay(outbox Outbox, sender Sender, cfg RelayConfig) (*Relay, error) {
	if cfg.Topic == "" {
		return nil, errors.New("ordering: relay needs a topic")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.MaxPerSend <= 0 {
		cfg.MaxPerSend = 64
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 16
	}
	if cfg.Poll <= 0 {
		cfg.Poll = 100 * time.Millisecond
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 200 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{cfg: cfg, outbox: outbox, sender: sender, wake: make(chan struct{}, 1),
		log: cfg.Logger.With("component", "relay", "topic", cfg.Topic)}, nil
}

// Wake tells the relay that records were committed: it starts a round at once if it is
// idle. It never blocks.
func (r *Relay) Wake() {
	select {
	case r.wake <- struct{}{}:
	default:
	}
}

// Stats returns the relay's counters.
func (r *Relay) Stats() RelayStats {
	return RelayStats{Published: r.published.Load(), Failed: r.failed.Load(), Rounds: r.rounds.Load(), Active: r.active.Load()}
}

// Run publishes until ctx is done. It returns nil on cancellation, after the round in flight
// has finished.
func (r *Relay) Run(ctx context.Context) error {
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

// lead waits to be the outbox's leader, then publishes rounds until ctx is done or the lead
// is lost.
func (r *Relay) lead(ctx context.Context) error {
	lctx, release, err := r.outbox.Lead(ctx)
	if err != nil {
		return err
	}
	defer release()
	r.active.Store(true)
	r.log.Info("relay active")
	policy := retry.Policy{Base: r.cfg.RetryBackoff, Max: 10 * r.cfg.RetryBackoff}
	failures := 0
	for {
		more, err := r.round(lctx)
		if ctx.Err() != nil {
			return nil
		}
		if lctx.Err() != nil {
			return fmt.Errorf("lead lost: %w", context.Cause(lctx))
		}
		wait := r.cfg.Poll
		switch {
		case err != nil:
			failures++
			r.log.Warn("relay round failed", "err", err, "failures", failures)
			wait = policy.Delay(failures, nil)
		case more:
			failures = 0
			continue // a full batch: go again at once
		default:
			failures = 0
		}
		t := time.NewTimer(wait)
		select {
		case <-lctx.Done():
		case <-r.wake:
		case <-t.C:
		}
		t.Stop()
	}
}

// round publishes one batch of records. more reports whether another round should follow at
// once (a full batch); err reports a failed queue or read.
func (r *Relay) round(ctx context.Context) (more bool, err error) {
	recs, err := r.outbox.Pending(ctx, r.cfg.Batch)
	if err != nil {
		return false, fmt.Errorf("reading the outbox: %w", err)
	}
	if len(recs) == 0 {
		return false, nil
	}
	r.rounds.Add(1)
	streams := r.group(recs)
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, r.cfg.Parallel)
		mu       sync.Mutex
		firstErr error
		sent     []Published
	)
	for _, stream := range streams {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			done, err := r.publishStream(ctx, stream)
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, done...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		})
	}
	wg.Wait()
	// One statement marks the whole round. A crash before it only means these are sent
	// again, and the consumer's gate drops the copies.
	if len(sent) > 0 {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := r.outbox.MarkPublished(mctx, sent)
		cancel()
		if err != nil {
			return true, fmt.Errorf("marking %d records published: %w", len(sent), err)
		}
		r.published.Add(int64(len(sent)))
	}
	if firstErr != nil {
		return false, firstErr
	}
	return len(recs) == r.cfg.Batch, nil
}

// stream is records sent one after the other, stopping at the first failure: one broker
// queue's records with a BatchSender, one key's otherwise. Each key's records in it keep
// their Seq order.
type stream struct {
	queue string // "" without batches
	recs  []OutboxRecord
}

// group splits a round's records into streams, keeping the order in which Pending returned
// them within each stream.
func (r *Relay) group(recs []OutboxRecord) []stream {
	bs, batches := r.sender.(BatchSender)
	var order []string
	by := map[string]*stream{}
	for _, rec := range recs {
		name, queue := "key:"+rec.Key, ""
		if batches {
			if q, ok := bs.QueueOf(r.cfg.Topic, rec.Key); ok {
				name, queue = "queue:"+q, q
			}
		}
		s := by[name]
		if s == nil {
			s = &stream{queue: queue}
			by[name] = s
			order = append(order, name)
		}
		s.recs = append(s.recs, rec)
	}
	out := make([]stream, 0, len(order))
	for _, n := range order {
		out = append(out, *by[n])
	}
	return out
}

// publishStream sends a stream in order, in batches when it is one queue's, stopping at the
// first failure, and returns the records the broker stored.
func (r *Relay) publishStream(ctx context.Context, s stream) ([]Published, error) {
	last := map[string]int64{}
	for _, rec := range s.recs {
		if prev, ok := last[rec.Key]; ok && rec.Seq <= prev {
			return nil, fmt.Errorf("outbox returned key %s out of order (seq %d after %d)", rec.Key, rec.Seq, prev)
		}
		last[rec.Key] = rec.Seq
	}
	step := 1
	if s.queue != "" {
		step = r.cfg.MaxPerSend
	}
	var done []Published
	for i := 0; i < len(s.recs); i += step {
		if ctx.Err() != nil {
			return done, nil // stopping: the rest of the stream goes next time, in order
		}
		chunk := s.recs[i:min(i+step, len(s.recs))]
		msgs := make([]Message, len(chunk))
		for j, rec := range chunk {
			msgs[j] = Message{Topic: r.cfg.Topic, ShardingKey: rec.Key, Tag: rec.Tag, Keys: rec.Keys, Body: rec.Body}
		}
		// A send cancelled half way may still be stored by the broker and then be sent again:
		// on shutdown let the send in flight finish (bounded).
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		start := time.Now()
		var res []SendResult
		var err error
		if s.queue != "" {
			res, err = r.sender.(BatchSender).SendOrderlyBatch(sctx, msgs)
		} else {
			var one SendResult
			one, err = r.sender.SendOrderly(sctx, msgs[0])
			res = []SendResult{one}
		}
		cancel()
		if r.cfg.ObserveSend != nil {
			r.cfg.ObserveSend(time.Since(start), err)
		}
		if err != nil {
			r.failed.Add(int64(len(chunk)))
			return done, fmt.Errorf("key %s seq %d (%d records): %w", chunk[0].Key, chunk[0].Seq, len(chunk), err)
		}
		for j, rec := range chunk {
			done = append(done, Published{ID: rec.ID, MsgID: res[j].MsgID})
		}
	}
	return done, nil
}
