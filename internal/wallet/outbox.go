package wallet

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/pg"
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
	// OccurredAt is when the balance changed (the row was written).
	OccurredAt time.Time
	// Pred is the id of the user's previous event (seq-1) while that one is unpublished; 0
	// once it is published, and for seq 1.
	Pred int64
	// Traceparent is the W3C traceparent of the saga commit that wrote the event, "" when
	// untraced.
	Traceparent string
}

// pendingEvent is event e as the relay sends it: its body, its keys and its trace (Pred is
// left 0 for the caller to set).
func pendingEvent(e walletevent.Event, traceparent string) (PendingEvent, error) {
	e.OccurredAt = e.OccurredAt.UTC().Truncate(time.Microsecond)
	body, err := walletevent.Encode(e)
	if err != nil {
		return PendingEvent{}, fmt.Errorf("event %d: %w", e.EventID, err)
	}
	return PendingEvent{ID: e.EventID, UserID: e.UserID, Seq: e.Seq, Kind: string(e.Kind), Body: body,
		Keys: []string{strconv.FormatInt(e.EventID, 10), e.SeqKey()}, OccurredAt: e.OccurredAt, Traceparent: traceparent}, nil
}

var (
	//go:embed sql/try_relay_lock.sql
	tryRelayLockSQL string
	//go:embed sql/pending_events.sql
	pendingSQL string
	//go:embed sql/stray_events.sql
	strayEventsSQL string
	//go:embed sql/mark_published.sql
	markPublishedSQL string
	//go:embed sql/prune_published.sql
	prunePublishedSQL string
	//go:embed sql/oldest_published.sql
	oldestPublishedSQL string
	//go:embed sql/outbox_backlog.sql
	outboxBacklogSQL string
)

// OutboxStore is the relay's side of the transactional outbox (wallet_events): the relay
// lock, the pending rows, and marking them published. Its statements are the ones embedded
// above.
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
		if err := conn.QueryRow(ctx, tryRelayLockSQL, pg.Args{"lock_key": s.lockKey}).Scan(&got); err != nil {
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

// QueueSlice names the events of one broker queue: those whose user id the relay's key hash
// puts on queue Index of Count. The hash is Java's SelectMessageQueueByHash over the decimal
// user id, abs(hashCode % Count) (the row's key_hash), or with FNV the Go client's FNV-1a 32
// of it, modulo Count.
type QueueSlice struct {
	FNV          bool
	Count, Index int
}

// OutboxPage is one read of a queue's unpublished events.
type OutboxPage struct {
	// Events are in id order: up to the limit of those with an id above the read's after,
	// then every one at or below it written by a transaction still running at the previous
	// read (horizon), which committed after a cursor passed its id.
	Events []PendingEvent
	// Last is the highest event id the read could see (0 for an empty outbox).
	Last int64
	// Horizon is the oldest transaction still running at the read (pg_snapshot_xmin): every
	// event not visible to it was written by a transaction with an id at least this. The
	// next read of the same cursor passes it back.
	Horizon uint64
}

// pendingArgs are the arguments of pending_events.sql, Pending's statement.
func pendingArgs(q QueueSlice, after int64, horizon uint64, skip []int64, limit int) pg.Args {
	return pg.Args{
		"after": after, "fnv": q.FNV, "queue_count": q.Count, "queue_index": q.Index, "skip": skip, "limit": limit,
		"horizon": strconv.FormatUint(horizon, 10),
	}
}

// Pending reads the unpublished events of queue q: up to limit of them with an id above
// after, in id order, and those at or below after that were written by a transaction with an
// id at least horizon (the previous read's Horizon; with after 0 there are none), leaving
// out the ids in skip. Each user's events come in seq order: ids grow with seq within a user,
// because both are assigned under the wallet row lock and a user's next event cannot commit
// before the previous one. The cost is the rows after after (each queue's cursor passes a
// row of another queue once) plus the unpublished rows of transactions younger than horizon,
// never the backlog of another queue that is stuck behind the cursor.
func (s *OutboxStore) Pending(ctx context.Context, q QueueSlice, after int64, horizon uint64, skip []int64, limit int) (OutboxPage, error) {
	if limit <= 0 {
		return OutboxPage{}, fmt.Errorf("wallet: outbox: limit must be positive, got %d", limit)
	}
	if q.Count <= 0 || q.Index < 0 || q.Index >= q.Count {
		return OutboxPage{}, fmt.Errorf("wallet: outbox: no queue %d of %d", q.Index, q.Count)
	}
	if skip == nil {
		skip = []int64{}
	}
	rows, err := s.pool.Query(ctx, pendingSQL, pendingArgs(q, after, horizon, skip, limit))
	if err != nil {
		return OutboxPage{}, fmt.Errorf("wallet: outbox pending: %w", err)
	}
	defer rows.Close()
	var (
		page OutboxPage
		xmin string
	)
	for rows.Next() {
		var (
			id, userID, seq, amount, balanceAfter, sagaID, pred *int64
			epoch, since                                        *int64
			kind, currency, phone, locale, traceparent          *string
			occurredAt                                          *time.Time
		)
		if err := rows.Scan(&xmin, &page.Last, &id, &userID, &seq, &kind, &amount, &currency, &balanceAfter, &sagaID,
			&phone, &locale, &occurredAt, &pred, &traceparent, &epoch, &since); err != nil {
			return OutboxPage{}, fmt.Errorf("wallet: outbox pending: %w", err)
		}
		if id == nil {
			continue // the snapshot's row of a read that found no event
		}
		var tp string
		if traceparent != nil {
			tp = *traceparent
		}
		ev, err := pendingEvent(walletevent.Event{EventID: *id, UserID: *userID, Seq: *seq, Kind: walletevent.Kind(*kind), Amount: *amount,
			Currency: *currency, BalanceAfter: *balanceAfter, SagaID: *sagaID, Phone: *phone, Locale: *locale,
			OccurredAt: *occurredAt, Epoch: *epoch, EpochSince: *since}, tp)
		if err != nil {
			return OutboxPage{}, fmt.Errorf("wallet: outbox pending: %w", err)
		}
		if pred != nil {
			ev.Pred = *pred
		}
		page.Events = append(page.Events, ev)
	}
	if err := rows.Err(); err != nil {
		return OutboxPage{}, fmt.Errorf("wallet: outbox pending: %w", err)
	}
	if page.Horizon, err = strconv.ParseUint(xmin, 10, 64); err != nil {
		return OutboxPage{}, fmt.Errorf("wallet: outbox pending: horizon %q: %w", xmin, err)
	}
	return page, nil
}

// Strays returns the user ids of up to limit unpublished events, oldest first, written more
// than olderThan ago, whose ids are not in held: those the relay was not handed or left
// behind. It reads the partial index of unpublished ids, so it costs the unpublished rows
// up to the limit past the held ones, never the published history.
func (s *OutboxStore) Strays(ctx context.Context, held []int64, olderThan time.Duration, limit int) ([]int64, error) {
	if held == nil {
		held = []int64{}
	}
	rows, err := s.pool.Query(ctx, strayEventsSQL, pg.Args{"held": held, "older_than_us": olderThan.Microseconds(), "limit": limit})
	if err != nil {
		return nil, fmt.Errorf("wallet: outbox strays: %w", err)
	}
	users, err := pgx.CollectRows(rows, pgx.RowTo[int64])
	if err != nil {
		return nil, fmt.Errorf("wallet: outbox strays: %w", err)
	}
	return users, nil
}

// MarkPublishedBatch records, in one statement, that events ids[i] were sent as broker
// messages msgIDs[i]. Marking an event already published keeps the first time and message id
// (the relay publishes at least once), and so does an id given twice in one batch (the
// relay's old and new pumps of a queue that moved both confirm it when its marks are slow).
// An id no longer in the outbox was published and then pruned (PrunePublished deletes
// published rows only): marking it again has nothing left to say, and is not an error.
func (s *OutboxStore) MarkPublishedBatch(ctx context.Context, ids []int64, msgIDs []string) error {
	if len(ids) != len(msgIDs) {
		return fmt.Errorf("wallet: outbox mark published: %d ids but %d message ids", len(ids), len(msgIDs))
	}
	if len(ids) == 0 {
		return nil
	}
	if _, err := s.pool.Exec(ctx, markPublishedSQL, pg.Args{"ids": ids, "msg_ids": msgIDs}); err != nil {
		return fmt.Errorf("wallet: outbox mark %d published: %w", len(ids), err)
	}
	return nil
}

// PrunePublished deletes up to limit events published more than window ago, oldest first,
// skipping rows others hold locked (another replica's pruner, a mark in flight). An event not
// yet published is never deleted: the statement cannot select one. The notifier keeps what
// it finished in its own tables, so a copy of a pruned event published again is still
// ignored there.
func (s *OutboxStore) PrunePublished(ctx context.Context, window time.Duration, limit int) (int64, error) {
	tag, err := s.pool.Exec(ctx, prunePublishedSQL, pg.Args{"window_us": window.Microseconds(), "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("wallet: outbox prune: %w", err)
	}
	return tag.RowsAffected(), nil
}

// OldestPublished returns how long ago the oldest event still in the outbox was published (0
// when none is).
func (s *OutboxStore) OldestPublished(ctx context.Context) (time.Duration, error) {
	return age(ctx, s.pool, oldestPublishedSQL)
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
	err := s.pool.QueryRow(ctx, outboxBacklogSQL).Scan(&b.Unpublished, &secs)
	if err != nil {
		return Backlog{}, fmt.Errorf("wallet: outbox backlog: %w", err)
	}
	b.OldestAge = time.Duration(max(secs, 0) * float64(time.Second))
	return b, nil
}
