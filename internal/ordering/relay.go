package ordering

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
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

// Outbox is the relay's view of a transactional outbox.
type Outbox interface {
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

// RelayConfig configures a Relay.
type RelayConfig struct {
	Topic string
	// Channel is the LISTEN/NOTIFY channel the outbox writer notifies after commit.
	Channel string
	// LockKey is the Postgres advisory lock that makes one relay active per database (or
	// per shard when each shard has its own key).
	LockKey int64
	// Batch is how many records one round reads (default 256).
	Batch int
	// Parallel is how many keys are sent at once (default 16).
	Parallel int
	// Poll is the fallback interval when no notification arrives (default 1s).
	Poll time.Duration
	// RetryBackoff is the wait after a failed send before the key is tried again (default 500ms).
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

// Relay publishes an outbox to RocketMQ: woken by LISTEN/NOTIFY (polling as a fallback), it
// reads unpublished records, sends each key's records in Seq order with the ordered producer,
// and marks them published. A failed send stops that key's stream for the round, so nothing
// is ever sent ahead of an unpublished predecessor; other keys go on in parallel. Only the
// holder of the advisory lock publishes, so several replicas can run a relay safely.
type Relay struct {
	cfg    RelayConfig
	pool   *pgxpool.Pool
	outbox Outbox
	sender Sender
	log    *slog.Logger

	published, failed, rounds atomic.Int64
	active                    atomic.Bool
}

// NewRelay returns a relay; Run starts it.
func NewRelay(pool *pgxpool.Pool, outbox Outbox, sender Sender, cfg RelayConfig) (*Relay, error) {
	if cfg.Topic == "" || cfg.Channel == "" {
		return nil, errors.New("ordering: relay needs a topic and a notification channel")
	}
	if cfg.Batch <= 0 {
		cfg.Batch = 256
	}
	if cfg.Parallel <= 0 {
		cfg.Parallel = 16
	}
	if cfg.Poll <= 0 {
		cfg.Poll = time.Second
	}
	if cfg.RetryBackoff <= 0 {
		cfg.RetryBackoff = 500 * time.Millisecond
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return &Relay{cfg: cfg, pool: pool, outbox: outbox, sender: sender, log: cfg.Logger.With("component", "relay", "topic", cfg.Topic)}, nil
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
			r.log.Warn("relay connection lost; retrying", "err", err)
		}
		select {
		case <-ctx.Done():
		case <-time.After(r.cfg.Poll):
		}
	}
	return nil
}

// lead holds a dedicated connection: it takes the advisory lock (waiting as a standby while
// another relay holds it), LISTENs, and publishes rounds until ctx is done or the connection
// fails. Losing the connection releases the lock, so it stops publishing at once.
func (r *Relay) lead(ctx context.Context) error {
	pc, err := r.pool.Acquire(ctx)
	if err != nil {
		return err
	}
	// The session's lock and LISTEN die with it: take the connection out of the pool.
	conn := pc.Hijack()
	defer conn.Close(context.Background()) //nolint:errcheck
	for {
		var got bool
		if err := conn.QueryRow(ctx, "SELECT pg_try_advisory_lock($1)", r.cfg.LockKey).Scan(&got); err != nil {
			return err
		}
		if got {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(r.cfg.Poll):
		}
	}
	if _, err := conn.Exec(ctx, "LISTEN "+quoteIdent(r.cfg.Channel)); err != nil {
		return err
	}
	r.active.Store(true)
	r.log.Info("relay active", "lock", r.cfg.LockKey)
	for {
		more, err := r.round(ctx)
		if err != nil && ctx.Err() == nil {
			r.log.Warn("relay round failed", "err", err)
		}
		if ctx.Err() != nil {
			return nil
		}
		if more {
			// A full batch or a key stopped by a failure: go again, after a pause if failing.
			if err == nil {
				continue
			}
		}
		wait := r.cfg.Poll
		if err != nil {
			wait = r.cfg.RetryBackoff
		}
		wctx, cancel := context.WithTimeout(ctx, wait)
		_, werr := conn.WaitForNotification(wctx)
		cancel()
		if werr != nil && ctx.Err() == nil && !errors.Is(werr, context.DeadlineExceeded) {
			return fmt.Errorf("waiting for notifications: %w", werr)
		}
		// Drain notifications that piled up: one round serves them all.
		for {
			dctx, cancel := context.WithTimeout(ctx, time.Millisecond)
			_, derr := conn.WaitForNotification(dctx)
			cancel()
			if derr != nil {
				break
			}
		}
	}
}

// round publishes one batch. more reports whether another round should follow at once (a
// full batch); err reports a failed key or read.
func (r *Relay) round(ctx context.Context) (more bool, err error) {
	recs, err := r.outbox.Pending(ctx, r.cfg.Batch)
	if err != nil {
		return false, fmt.Errorf("reading the outbox: %w", err)
	}
	if len(recs) == 0 {
		return false, nil
	}
	r.rounds.Add(1)
	// Group by key, keeping each key's Seq order and the keys in order of first appearance.
	var order []string
	byKey := map[string][]OutboxRecord{}
	for _, rec := range recs {
		if _, ok := byKey[rec.Key]; !ok {
			order = append(order, rec.Key)
		}
		byKey[rec.Key] = append(byKey[rec.Key], rec)
	}
	var (
		wg       sync.WaitGroup
		sem      = make(chan struct{}, r.cfg.Parallel)
		mu       sync.Mutex
		firstErr error
		sent     []Published
	)
	for _, k := range order {
		sem <- struct{}{}
		wg.Add(1)
		go func(stream []OutboxRecord) {
			defer func() { <-sem; wg.Done() }()
			done, err := r.publishStream(ctx, stream)
			mu.Lock()
			defer mu.Unlock()
			sent = append(sent, done...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}(byKey[k])
	}
	wg.Wait()
	// One statement marks the whole round (it used to be one commit per event). A crash
	// before it only means these are sent again, and the consumer's gate drops the copies.
	if len(sent) > 0 {
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		err := r.outbox.MarkPublished(mctx, sent)
		cancel()
		if err != nil {
			return true, fmt.Errorf("marking %d records published: %w", len(sent), err)
		}
		r.published.Add(int64(len(sent)))
	}
	return len(recs) == r.cfg.Batch || firstErr != nil, firstErr
}

// publishStream sends one key's records in order, stopping at the first failure, and
// returns those the broker stored.
func (r *Relay) publishStream(ctx context.Context, stream []OutboxRecord) ([]Published, error) {
	var done []Published
	for i := range stream {
		rec := stream[i]
		if i > 0 && rec.Seq <= stream[i-1].Seq {
			return done, fmt.Errorf("outbox returned key %s out of order (seq %d after %d)", rec.Key, rec.Seq, stream[i-1].Seq)
		}
		if ctx.Err() != nil {
			return done, nil // stopping: the rest of the stream goes next time, in order
		}
		// A send cancelled half way may still be stored by the broker and then be sent again:
		// on shutdown let the send in flight finish (bounded).
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		start := time.Now()
		res, err := r.sender.SendOrderly(sctx, Message{Topic: r.cfg.Topic, ShardingKey: rec.Key, Tag: rec.Tag, Keys: rec.Keys, Body: rec.Body})
		cancel()
		if r.cfg.ObserveSend != nil {
			r.cfg.ObserveSend(time.Since(start), err)
		}
		if err != nil {
			r.failed.Add(1)
			return done, fmt.Errorf("key %s seq %d: %w", rec.Key, rec.Seq, err)
		}
		done = append(done, Published{ID: rec.ID, MsgID: res.MsgID})
	}
	return done, nil
}

func quoteIdent(s string) string {
	out := []byte{'"'}
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			out = append(out, '"')
		}
		out = append(out, s[i])
	}
	return string(append(out, '"'))
}
