// Package groupstart decides where the notifier's consumer starts a queue the group has no
// committed offset on, from the group's very first start, which it records in the notifier's
// database (notify.group_start, which this package owns): CONSUME_FROM=last is a one-shot.
//
// The rule:
//
//	a queue without a committed offset starts at its END only in the process that took its
//	group's first start, with CONSUME_FROM=last, and only if the topic had the queue when
//	that process started; everywhere else (a later start, another replica, a queue added
//	later) it starts at its FIRST message, whatever CONSUME_FROM says.
//
// Start.AtEnd is the rule. The record is taken at the first question a process is asked, not
// at its start: a start that fails or dies before it had to place any queue (the broker away,
// a crash) leaves no record, and the next start is still the group's first. Several replicas
// starting at once take it atomically: one wins, the others place every queue without an
// offset at its first message. A queue the first start places at its end has that start
// committed to the broker at once (the client's patch 17), so a later start finds an offset
// there and resumes it, rather than replaying what came before the group.
package groupstart

import (
	"context"
	"crypto/rand"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/pg"
)

var (
	//go:embed sql/take.sql
	takeSQL string
	//go:embed sql/started.sql
	startedSQL string
)

// Start is a consumer group's first start on a topic, as recorded.
type Start struct {
	Group string
	Topic string
	// ConsumeFrom is the CONSUME_FROM of the process that took it: first or last.
	ConsumeFrom string
	// Queues are the topic's queues ("<broker>/<queue id>") as that process read them when
	// it started.
	Queues []string
	// Process is the token that process drew at its start (new for every start).
	Process string
	// Instance is its CONSUMER_INSTANCE ("" when none), for operators.
	Instance string
	At       time.Time
}

// AtEnd is the rule: whether process starts queue, which its group has no committed offset
// on, at its end (only what is stored from then on) rather than at its first message. Only
// the process that took the group's first start, with CONSUME_FROM=last, for a queue the
// topic had then.
func (s Start) AtEnd(process, queue string) bool {
	return s.ConsumeFrom == "last" && s.Process == process && slices.Contains(s.Queues, queue)
}

// Store holds the package's statements on a pool. It is safe for concurrent use.
type Store struct{ db *pgxpool.Pool }

// NewStore returns a Store on db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// Take records s (its At is the database's now) as its group's first start on its topic,
// unless one is recorded, and returns the start recorded: s, or the one taken before, by
// whichever process took it first.
func (st *Store) Take(ctx context.Context, s Start) (Start, error) {
	queues := s.Queues
	if queues == nil {
		queues = []string{}
	}
	got, err := scanStart(st.db.Query(ctx, takeSQL, pg.Args{"group": s.Group, "topic": s.Topic, "consume_from": s.ConsumeFrom,
		"queues": queues, "process": s.Process, "instance": s.Instance}))
	if err == nil || !errors.Is(err, pgx.ErrNoRows) {
		return got, err
	}
	// Another process took it first: its row is committed (the insert waited for it).
	return scanStart(st.db.Query(ctx, startedSQL, pg.Args{"group": s.Group, "topic": s.Topic}))
}

// scanStart reads the one row of take.sql or started.sql: pgx.ErrNoRows when there is none.
func scanStart(rows pgx.Rows, err error) (Start, error) {
	if err != nil {
		return Start{}, err
	}
	return pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (Start, error) {
		var s Start
		err := row.Scan(&s.Group, &s.Topic, &s.ConsumeFrom, &s.Queues, &s.Process, &s.Instance, &s.At)
		return s, err
	})
}

// Plan places, for one process, each queue its consumer takes without a committed offset: it
// is the consumer's StartAtEnd. It takes (or reads) the group's first start at its first
// question, and keeps it.
type Plan struct {
	store                               *Store
	group, topic, consumeFrom, instance string
	process                             string
	log                                 *slog.Logger

	mu      sync.Mutex
	started *Start // nil until taken or read
}

// NewPlan returns the plan of a process consuming topic as group with consumeFrom (first or
// last) under instance ("" when none). Each Plan is a process of its own: it draws its token.
func NewPlan(store *Store, group, topic, consumeFrom, instance string, log *slog.Logger) *Plan {
	if log == nil {
		log = slog.Default()
	}
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return &Plan{store: store, group: group, topic: topic, consumeFrom: consumeFrom, instance: instance,
		process: hex.EncodeToString(b), log: log}
}

// questionTimeout bounds the record's statements: the consumer asks from its rebalance.
const questionTimeout = 10 * time.Second

// AtEnd answers the consumer's question for queue, which the group has no committed offset
// on: true starts it at its end, false at its first message. atStart are the topic's queues
// as the consumer read them when it started; they are recorded with the group's first start
// when this process takes it. An error (the database away) leaves the queue for a later
// rebalance.
func (p *Plan) AtEnd(queue string, atStart []string) (bool, error) {
	s, err := p.start(atStart)
	if err != nil {
		return false, err
	}
	end := s.AtEnd(p.process, queue)
	p.log.Info("a queue without an offset starts", "queue", queue, "at", map[bool]string{true: "its end", false: "its first message"}[end])
	return end, nil
}

// start returns the group's first start, taking it (with atStart) at the first call.
func (p *Plan) start(atStart []string) (Start, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.started != nil {
		return *p.started, nil
	}
	ctx, cancel := context.WithTimeout(context.Background(), questionTimeout)
	defer cancel()
	s, err := p.store.Take(ctx, Start{Group: p.group, Topic: p.topic, ConsumeFrom: p.consumeFrom, Queues: atStart,
		Process: p.process, Instance: p.instance})
	if err != nil {
		return Start{}, fmt.Errorf("groupstart: the group's first start: %w", err)
	}
	p.started = &s
	if s.Process == p.process {
		p.log.Info("this is the consumer group's first start: recorded", "group", s.Group, "topic", s.Topic,
			"consume_from", s.ConsumeFrom, "queues", len(s.Queues))
	} else {
		p.log.Info("the consumer group started before: a queue without an offset starts at its first message", "group", s.Group,
			"topic", s.Topic, "first_start", s.At.UTC().Format(time.RFC3339), "first_instance", s.Instance, "first_consume_from", s.ConsumeFrom)
	}
	return s, nil
}
