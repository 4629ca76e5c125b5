package wallet

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// PendingEvent is an unpublished outbox row, ready to send.
type PendingEvent struct {
	ID     int64
	UserID int64
	Seq    int64
	Kind   string
	Body   []byte   // walletevent.Encode of the event
	Keys   []string // the event id and "user:seq", for mqadmin look-ups
}

// OutboxStore is the relay's side of the transactional outbox (wallet_events): the relay
// lock, the pending rows, and marking them published. All of its SQL is here.
type OutboxStore struct {
	pool    *pgxpool.Pool
	lockKey int64
	poll    time.Duration
}

// NewOutboxStore returns the outbox store on pool. lockKey is the Postgres advisory lock that
// keeps one relay publishing per database; poll is how often a standby tries to take it, and
// how often the leader checks that its session (which holds the lock) is alive.
func NewOutboxStore(pool *pgxpool.Pool, lockKey int64, poll time.Duration) *OutboxStore {
	if poll <= 0 {
		poll = time.Second
	}
	return &OutboxStore{pool: pool, lockKey: lockKey, poll: poll}
}

// Lead blocks until this process holds the relay lock (a session-level advisory lock on a
// connection taken out of the pool for it), or ctx ends. The returned context ends when the
// session is lost (the lock with it); release gives the lock up.
func (s *OutboxStore) Lead(ctx context.Context) (context.Context, func(), error) {
	pc, err := s.pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("wallet: relay lock: %w", err)
	}
	// The lock lives and dies with the session: the connection leaves the pool for good.
	conn := pc.Hijack()
	closeConn := func() {
		cctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}
	for {
		var got bool
		if err := conn.QueryRow(ctx, `SELECT pg_try_advisory_lock($1)`, s.lockKey).Scan(&got); err != nil {
			closeConn()
			return nil, nil, fmt.Errorf("wallet: relay lock: %w", err)
		}
		if got {
			break
		}
		t := time.NewTimer(s.poll)
		select {
		case <-ctx.Done():
			t.Stop()
			closeConn()
			return nil, nil, ctx.Err()
		case <-t.C:
		}
	}
	lctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		t := time.NewTicker(s.poll)
		defer t.Stop()
		for {
			select {
			case <-lctx.Done():
				return
			case <-t.C:
			}
			if err := conn.Ping(lctx); err != nil && lctx.Err() == nil {
				cancel(fmt.Errorf("the relay lock's session was lost: %w", err))
				return
			}
		}
	}()
	return lctx, func() {
		cancel(nil)
		<-done
		closeConn()
	}, nil
}

// Pending returns up to limit unpublished events, oldest first. The result holds, for each
// user, a prefix of that user's unpublished events in seq order: ids grow with seq within a
// user because both are assigned under the wallet row lock, and a user's next event cannot
// commit before the previous one.
func (s *OutboxStore) Pending(ctx context.Context, limit int) ([]PendingEvent, error) {
	if limit <= 0 {
		return nil, fmt.Errorf("wallet: outbox: limit must be positive, got %d", limit)
	}
	rows, err := s.pool.Query(ctx, `
SELECT id, user_id, seq, kind, amount, currency, balance_after, saga_id, phone, locale, occurred_at
FROM wallet_events
WHERE published_at IS NULL
ORDER BY id
LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("wallet: outbox pending: %w", err)
	}
	evs, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (PendingEvent, error) {
		var (
			e    walletevent.Event
			kind string
		)
		if err := r.Scan(&e.EventID, &e.UserID, &e.Seq, &kind, &e.Amount, &e.Currency, &e.BalanceAfter,
			&e.SagaID, &e.Phone, &e.Locale, &e.OccurredAt); err != nil {
			return PendingEvent{}, err
		}
		e.Kind = walletevent.Kind(kind)
		e.OccurredAt = e.OccurredAt.UTC().Truncate(time.Microsecond)
		body, err := walletevent.Encode(e)
		if err != nil {
			return PendingEvent{}, fmt.Errorf("event %d: %w", e.EventID, err)
		}
		return PendingEvent{
			ID: e.EventID, UserID: e.UserID, Seq: e.Seq, Kind: kind, Body: body,
			Keys: []string{strconv.FormatInt(e.EventID, 10), e.SeqKey()},
		}, nil
	})
	if err != nil {
		return nil, fmt.Errorf("wallet: outbox pending: %w", err)
	}
	return evs, nil
}

// ErrUnknownEvent means MarkPublished was given an id that is not in the outbox.
var ErrUnknownEvent = errors.New("wallet: outbox: no such event")

// MarkPublished records that event id was sent as broker message msgID. Marking an event
// already published keeps the first time and message id (the relay publishes at least
// once). An unknown id is ErrUnknownEvent.
func (s *OutboxStore) MarkPublished(ctx context.Context, id int64, msgID string) error {
	tag, err := s.pool.Exec(ctx, `
UPDATE wallet_events
SET published_at = COALESCE(published_at, now()), msg_id = COALESCE(msg_id, $2)
WHERE id = $1`, id, msgID)
	if err != nil {
		return fmt.Errorf("wallet: outbox mark published %d: %w", id, err)
	}
	if tag.RowsAffected() == 0 {
		return fmt.Errorf("%w: %d", ErrUnknownEvent, id)
	}
	return nil
}

// MarkPublishedBatch is MarkPublished for many events in one statement: ids[i] was sent as
// msgIDs[i]. It fails with ErrUnknownEvent when an id is not in the outbox.
func (s *OutboxStore) MarkPublishedBatch(ctx context.Context, ids []int64, msgIDs []string) error {
	if len(ids) != len(msgIDs) {
		return fmt.Errorf("wallet: outbox mark published: %d ids but %d message ids", len(ids), len(msgIDs))
	}
	if len(ids) == 0 {
		return nil
	}
	tag, err := s.pool.Exec(ctx, `
UPDATE wallet_events e
SET published_at = COALESCE(e.published_at, now()), msg_id = COALESCE(e.msg_id, v.msg_id)
FROM unnest($1::bigint[], $2::text[]) AS v(id, msg_id)
WHERE e.id = v.id`, ids, msgIDs)
	if err != nil {
		return fmt.Errorf("wallet: outbox mark %d published: %w", len(ids), err)
	}
	if int(tag.RowsAffected()) != len(ids) {
		return fmt.Errorf("%w: %d of %d ids", ErrUnknownEvent, len(ids)-int(tag.RowsAffected()), len(ids))
	}
	return nil
}

// Backlog is the outbox's unpublished part: how many events, and how long ago the oldest
// happened (0 when none).
type Backlog struct {
	Unpublished int64
	OldestAge   time.Duration
}

// Backlog reads the unpublished part of the outbox (for metrics: the partial index on
// unpublished rows keeps it cheap).
func (s *OutboxStore) Backlog(ctx context.Context) (Backlog, error) {
	var b Backlog
	var secs float64
	err := s.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM wallet_events WHERE published_at IS NULL),
		COALESCE((SELECT EXTRACT(EPOCH FROM now() - occurred_at)::float8 FROM wallet_events
		          WHERE published_at IS NULL ORDER BY id LIMIT 1), 0)`).Scan(&b.Unpublished, &secs)
	if err != nil {
		return Backlog{}, fmt.Errorf("wallet: outbox backlog: %w", err)
	}
	b.OldestAge = time.Duration(max(secs, 0) * float64(time.Second))
	return b, nil
}
