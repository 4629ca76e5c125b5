package inbox

import (
	"context"
	_ "embed"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/pg"
)

// The inbox owns notify.bad_messages, the messages it could not take, each with its
// dead-letter intent; its statements (sql/*.sql) are the only ones that write it. The dead
// letters' publisher and reconciler call the methods below. (The SMS log's read model lists
// the table too, and writes nothing.)

var (
	//go:embed sql/record_bad.sql
	recordBadSQL string
	//go:embed sql/bad_intents.sql
	badIntentsSQL string
	//go:embed sql/mark_bad_published.sql
	markBadPublishedSQL string
	//go:embed sql/unpublished_bad.sql
	unpublishedBadSQL string
	//go:embed sql/prune_bad.sql
	pruneBadSQL string
	//go:embed sql/oldest_bad.sql
	oldestBadSQL string
)

// Store holds the statements on notify.bad_messages. It is safe for concurrent use.
type Store struct {
	db *pgxpool.Pool
}

// NewStore returns a Store on db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// recordFound stores a message found in the DLQ topic as a bad message, once per message id,
// with its reason, as published (it is in the DLQ already: no dead-letter intent).
func (s *Store) recordFound(ctx context.Context, m Decoded) error {
	if _, err := s.db.Exec(ctx, recordBadSQL, badArgs([]Decoded{m}, true)); err != nil {
		return fmt.Errorf("inbox: record a bad message found in the DLQ: %w", err)
	}
	return nil
}

// queueBad queues the statement that stores bad messages, once per message id, with their
// reasons and a dead-letter intent unless published, in b; once b's results are read, *stored is how
// many it stored.
func queueBad(b *pgx.Batch, bad []Decoded, published bool, stored *int) {
	b.Queue(recordBadSQL, badArgs(bad, published)).Exec(func(tag pgconn.CommandTag) error {
		*stored = int(tag.RowsAffected())
		return nil
	})
}

func badArgs(bad []Decoded, published bool) pg.Args {
	n := len(bad)
	ids, queues, reasons, offsets, bodies := make([]string, n), make([]string, n), make([]string, n), make([]int64, n), make([][]byte, n)
	for i, m := range bad {
		ids[i], queues[i], reasons[i], offsets[i], bodies[i] = m.MsgID, m.Queue, m.Bad, m.Offset, m.Event
		if bodies[i] == nil {
			bodies[i] = []byte{}
		}
	}
	return pg.Args{"msg_ids": ids, "queues": queues, "offsets": offsets, "bodies": bodies, "reasons": reasons, "published": published}
}

// RecordFoundBad stores a message found in the DLQ topic that does not decode, once per
// message id, as published (it is in the DLQ already).
func (s *Store) RecordFoundBad(ctx context.Context, m Decoded) error {
	return s.recordFound(ctx, m)
}

// RecordForeignDeadLetter stores a wallet event found in the DLQ topic that this deployment
// never dead-lettered, as a bad message (published: it is in the DLQ already) with reason,
// once per message id: flagged for an operator, never taken for a dead letter of the gate's.
func (s *Store) RecordForeignDeadLetter(ctx context.Context, m Decoded, reason string) error {
	m.markBad(reason)
	return s.recordFound(ctx, m)
}

// BadMessage is an undecodable message to publish to the DLQ topic.
type BadMessage struct {
	MsgID  string
	Body   []byte
	Reason string
}

// BadIntents returns up to limit bad messages not yet published to the DLQ topic, oldest
// first.
func (s *Store) BadIntents(ctx context.Context, limit int) ([]BadMessage, error) {
	rows, err := s.db.Query(ctx, badIntentsSQL, pg.Args{"limit": limit})
	if err != nil {
		return nil, fmt.Errorf("bad-message intents: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[BadMessage])
	if err != nil {
		return nil, fmt.Errorf("bad-message intents: %w", err)
	}
	return out, nil
}

// MarkBadPublished records that the bad messages msgIDs are in the DLQ topic.
func (s *Store) MarkBadPublished(ctx context.Context, msgIDs []string) error {
	if _, err := s.db.Exec(ctx, markBadPublishedSQL, pg.Args{"msg_ids": msgIDs}); err != nil {
		return fmt.Errorf("mark %d bad messages published: %w", len(msgIDs), err)
	}
	return nil
}

// UnpublishedBad counts the bad messages not yet published to the DLQ topic.
func (s *Store) UnpublishedBad(ctx context.Context) (int64, error) {
	var n int64
	if err := s.db.QueryRow(ctx, unpublishedBadSQL).Scan(&n); err != nil {
		return 0, fmt.Errorf("count unpublished bad messages: %w", err)
	}
	return n, nil
}

// PruneBad deletes up to limit bad messages that reached the DLQ topic more than window ago,
// oldest first, and returns how many it deleted (retention; docs/ARCHITECTURE.md). One whose
// dead-letter intent is not yet published is never deleted. Should the DLQ watcher read a
// pruned one from the topic again (its offsets reset), it is recorded again, as published.
func (s *Store) PruneBad(ctx context.Context, window time.Duration, limit int) (int64, error) {
	tag, err := s.db.Exec(ctx, pruneBadSQL, pg.Args{"window_us": window.Microseconds(), "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("prune bad messages: %w", err)
	}
	return tag.RowsAffected(), nil
}

// OldestBad returns how long ago the oldest bad message kept reached the DLQ topic (0 when
// none is).
func (s *Store) OldestBad(ctx context.Context) (time.Duration, error) {
	d, err := pg.Age(ctx, s.db, oldestBadSQL)
	if err != nil {
		return 0, fmt.Errorf("read the oldest bad message: %w", err)
	}
	return d, nil
}
