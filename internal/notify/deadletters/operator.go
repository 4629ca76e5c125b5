package deadletters

import (
	"context"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/telemetry"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// The operators' actions write notify.audit, which this package owns; its statements are
// in sql/. (The SMS log's read model lists the trail, and writes nothing.)

var (
	//go:embed sql/replays.sql
	replaysSQL string
	//go:embed sql/audit.sql
	auditSQL string
	//go:embed sql/prune_audit.sql
	pruneAuditSQL string
	//go:embed sql/oldest_audit.sql
	oldestAuditSQL string
)

// The audit actions of the notifier's operators.
const (
	ActionReplay = "replay_dead_letter" // a dead letter re-sent late
	ActionSkip   = "skip_missing_seq"   // a user's lost seq skipped at the gate
	// ActionSkipThrough: a user's lost seqs, from its next through one, skipped in one step.
	ActionSkipThrough = "skip_missing_seqs"
)

// Operator performs the operators' actions on dead letters and on the gate, each recorded
// with who and why in notify.audit.
type Operator struct {
	db     *pgxpool.Pool
	gate   *gate.Store
	sender notify.Sender
}

// NewOperator returns the actions on db, through the gate g; sender re-sends replays (use
// the lanes' sender, with its failure switch if replays are to meet the same switches).
func NewOperator(db *pgxpool.Pool, g *gate.Store, sender notify.Sender) *Operator {
	return &Operator{db: db, gate: g, sender: sender}
}

// ReplayResult is what an operator replay sent.
type ReplayResult struct {
	UserID         int64  `json:"user_id"`
	Seq            int64  `json:"seq"`
	Replay         int    `json:"replay"` // 1 for the first replay of this (user, seq)
	IdempotencyKey string `json:"idempotency_key"`
	Text           string `json:"text"`
	// AlreadyDelivered is set when the provider had the SMS already under its key (it was
	// delivered after all, or by an earlier replay): nothing new was delivered.
	AlreadyDelivered bool      `json:"already_delivered"`
	ReplayedAt       time.Time `json:"replayed_at"`
}

// Replay re-sends the dead-lettered SMS (userID, seq), marked late (see notify.MarkLate)
// under its own provider key (notify.ProviderKey, as the lanes sent it), rendered from the
// stored event, and records an audit row (actor, ActionReplay, reason); with a journaled
// sender (the log sender) the late SMS log row is written with the audit row. A provider
// that had the SMS already says so (notify.ErrAlreadyDelivered): the replay is recorded
// with AlreadyDelivered and nothing is delivered twice. A provider still processing a send
// under the key (notify.ErrInProgress) records nothing: the operator asks again later. The
// notification keeps its dead_lettered status.
//
// The provider is called with no transaction open and no row locked: the replay claims the
// dead letter by reading it with the number of replays recorded so far, its fence; sends;
// and records only if that number has not changed meanwhile. Of two replays of one SMS at
// once, the one that records first is the one recorded; the other is refused (its send
// reached the provider under the same key, which delivers it once). A send that fails
// records nothing.
//
// The replay is a span (dlq.replay), a child of ctx's (the operator's request), linked to
// the span that recorded the SMS's arrival; the send to the provider is its child.
//
// Errors: apperr.NotFound (no such SMS), apperr.Gone (it finished and retention pruned its
// record), apperr.Conflict (it is not dead-lettered, or
// another replay of it was recorded meanwhile), apperr.Unprocessable (no usable stored
// event, or the provider refused it for good), apperr.Unavailable (the send failed and may
// be retried).
func (o *Operator) Replay(ctx context.Context, actor string, userID, seq int64, reason string) (res ReplayResult, err error) {
	ctx, span := tracer.Start(ctx, "dlq.replay")
	defer func() {
		if span.IsRecording() {
			span.SetAttributes(attribute.Int64("sms.user_id", userID), attribute.Int64("sms.seq", seq))
			if err == nil {
				span.SetAttributes(attribute.Int("dlq.replay", res.Replay), attribute.Bool("sms.already_delivered", res.AlreadyDelivered))
			}
		}
		if err != nil {
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
	}()
	stored, err := o.gate.DeadLetter(ctx, userID, seq)
	if errors.Is(err, pgx.ErrNoRows) {
		return ReplayResult{}, o.missing(ctx, userID, seq)
	}
	if err != nil {
		return ReplayResult{}, err
	}
	telemetry.AddLink(span, stored.Traceparent)
	if stored.Status != gate.StatusDeadLettered {
		return ReplayResult{}, apperr.New(apperr.Conflict, "the SMS for user %d seq %d is %s, not dead_lettered: only dead letters can be replayed",
			userID, seq, stored.Status)
	}
	fence, err := o.replays(ctx, o.db, userID, seq)
	if err != nil {
		return ReplayResult{}, err
	}
	m, err := renderStored(userID, seq, stored.Event)
	if err != nil {
		return ReplayResult{}, err
	}
	dep, err := o.gate.DeploymentID(ctx)
	if err != nil {
		return ReplayResult{}, err
	}
	m.IdempotencyKey = notify.ProviderKey(dep, userID, seq, m.Epoch)
	m = notify.MarkLate(m)
	res = ReplayResult{UserID: userID, Seq: seq, Replay: fence + 1, IdempotencyKey: m.IdempotencyKey, Text: m.Text}
	journal := notify.IsJournaled(o.sender)
	// A journaled sender's delivery is its late SMS log row: one there already is the SMS
	// delivered late before.
	res.AlreadyDelivered = journal && stored.LateJournaled
	if !res.AlreadyDelivered {
		err := o.sender.Send(ctx, m)
		switch {
		case errors.Is(err, notify.ErrAlreadyDelivered):
			res.AlreadyDelivered = true
		case errors.Is(err, notify.ErrPermanent):
			return ReplayResult{}, apperr.Wrap(err, apperr.Unprocessable, "the SMS provider refused the replay of user %d seq %d", userID, seq)
		case errors.Is(err, notify.ErrInProgress):
			// Nothing is recorded: the provider's outcome is not known yet. Asked again, under
			// the same key, it answers that outcome.
			return ReplayResult{}, apperr.Wrap(err, apperr.Unavailable,
				"the SMS provider is still processing a send of user %d seq %d under its key; try again later", userID, seq)
		case err != nil:
			return ReplayResult{}, apperr.Wrap(err, apperr.Unavailable, "sending the replay of user %d seq %d failed; try again", userID, seq)
		}
	}
	err = pg.WithTx(ctx, o.db, func(tx pgx.Tx) error {
		if _, err := o.gate.LockDeadLetter(ctx, tx, userID, seq); err != nil {
			return err
		}
		now, err := o.replays(ctx, tx, userID, seq)
		if err != nil {
			return err
		}
		if now != fence {
			return apperr.New(apperr.Conflict, "another replay of user %d seq %d was recorded while this one was sent (replay %d); the provider delivers it once under its key",
				userID, seq, now)
		}
		if journal && !res.AlreadyDelivered {
			logged, err := o.gate.JournalLate(ctx, tx, userID, seq, m.Phone, m.Text)
			if err != nil {
				return err
			}
			res.AlreadyDelivered = !logged
		}
		detail, err := json.Marshal(map[string]any{"replay": res.Replay, "idempotency_key": m.IdempotencyKey, "text": m.Text,
			"already_delivered": res.AlreadyDelivered})
		if err != nil {
			return fmt.Errorf("encode audit detail: %w", err)
		}
		res.ReplayedAt, err = audit(ctx, tx, actor, ActionReplay, userID, seq, reason, detail)
		return err
	})
	if err != nil {
		return ReplayResult{}, err
	}
	return res, nil
}

// replays counts the replays of (userID, seq) recorded on q.
func (o *Operator) replays(ctx context.Context, q pg.Querier, userID, seq int64) (int, error) {
	var n int
	if err := q.QueryRow(ctx, replaysSQL, pg.Args{"user": userID, "seq": seq, "action": ActionReplay}).Scan(&n); err != nil {
		return 0, fmt.Errorf("count the replays of user %d seq %d: %w", userID, seq, err)
	}
	return n, nil
}

// Skip records the missing seq of a held user as skipped_by_operator and moves the user past
// it (gate.Store.Skip), in one transaction with the audit row that says who skipped it and
// why. It returns the user's new progress, or gate.ErrNotHeld or gate.ErrNotLost.
func (o *Operator) Skip(ctx context.Context, actor string, userID, seq int64, reason string) (int64, error) {
	var last int64
	err := pg.WithTx(ctx, o.db, func(tx pgx.Tx) error {
		var err error
		if last, err = o.gate.Skip(ctx, tx, userID, seq, reason); err != nil {
			return err
		}
		_, err = audit(ctx, tx, actor, ActionSkip, userID, seq, reason, nil)
		return err
	})
	if err != nil {
		return 0, err
	}
	return last, nil
}

// SkipThrough records every seq of a held user from its next through through that never
// arrived as skipped_by_operator and moves the user past them (gate.Store.SkipThrough), in one
// transaction with the audit row (its seq is through; its detail the range and how many were
// skipped). It returns what the gate did, or gate.ErrNotHeld or gate.ErrSkipRangeTooLong.
func (o *Operator) SkipThrough(ctx context.Context, actor string, userID, through int64, reason string) (gate.SkippedRange, error) {
	var r gate.SkippedRange
	err := pg.WithTx(ctx, o.db, func(tx pgx.Tx) error {
		var err error
		if r, err = o.gate.SkipThrough(ctx, tx, userID, through, reason); err != nil {
			return err
		}
		detail, err := json.Marshal(map[string]any{"from_seq": r.From, "through_seq": r.Through, "skipped": r.Skipped})
		if err != nil {
			return err
		}
		_, err = audit(ctx, tx, actor, ActionSkipThrough, userID, through, reason, detail)
		return err
	})
	if err != nil {
		return gate.SkippedRange{}, err
	}
	return r, nil
}

// audit records an operator's action in tx and returns when.
func audit(ctx context.Context, tx pgx.Tx, actor, action string, userID, seq int64, reason string, detail []byte) (time.Time, error) {
	var at time.Time
	err := tx.QueryRow(ctx, auditSQL, pg.Args{
		"actor": actor, "action": action, "user": userID, "seq": seq, "reason": reason, "detail": detail,
	}).Scan(&at)
	if err != nil {
		return time.Time{}, fmt.Errorf("audit %s %d:%d: %w", action, userID, seq, err)
	}
	return at, nil
}

// renderStored renders the event the inbox stored for (userID, seq).
func renderStored(userID, seq int64, event []byte) (notify.SMS, error) {
	if len(event) == 0 {
		return notify.SMS{}, apperr.New(apperr.Unprocessable, "user %d seq %d has no stored event to render the SMS from", userID, seq)
	}
	var e walletevent.Event
	if err := json.Unmarshal(event, &e); err != nil {
		return notify.SMS{}, apperr.Wrap(err, apperr.Unprocessable, "the stored event of user %d seq %d is not a wallet event", userID, seq)
	}
	if e.UserID != userID || e.Seq != seq {
		return notify.SMS{}, apperr.New(apperr.Unprocessable, "the stored event of user %d seq %d is for user %d seq %d", userID, seq, e.UserID, e.Seq)
	}
	m, err := notify.Render(e)
	if err != nil {
		return notify.SMS{}, apperr.Wrap(err, apperr.Unprocessable, "cannot render the SMS of user %d seq %d from its stored event", userID, seq)
	}
	return m, nil
}

// missing is the error for an SMS without an inbox row: Gone when the user's position is
// past it (it finished, and retention pruned its row), else NotFound.
func (o *Operator) missing(ctx context.Context, userID, seq int64) error {
	finished, err := o.gate.Finished(ctx, userID, seq)
	if err != nil {
		return err
	}
	if finished {
		return apperr.New(apperr.Gone, "the SMS for user %d seq %d finished longer ago than the inbox's retention window (RETENTION_INBOX) and its record was pruned: it can no longer be replayed", userID, seq)
	}
	return apperr.New(apperr.NotFound, "no dead letter for user %d seq %d", userID, seq)
}

// PruneAudit deletes up to limit audit rows recorded more than window ago whose SMS is no
// longer in the inbox (retention pruned its row), oldest first, and returns how many it
// deleted (retention; docs/ARCHITECTURE.md). While the SMS's row is kept its audit rows stay:
// they are its replay count, which a replay takes as its fence.
func (o *Operator) PruneAudit(ctx context.Context, window time.Duration, limit int) (int64, error) {
	tag, err := o.db.Exec(ctx, pruneAuditSQL, pg.Args{"window_us": window.Microseconds(), "limit": limit})
	if err != nil {
		return 0, fmt.Errorf("prune the audit trail: %w", err)
	}
	return tag.RowsAffected(), nil
}

// OldestAudit returns the age of the oldest audit row whose SMS is no longer in the inbox
// (0 when none is).
func (o *Operator) OldestAudit(ctx context.Context) (time.Duration, error) {
	d, err := pg.Age(ctx, o.db, oldestAuditSQL)
	if err != nil {
		return 0, fmt.Errorf("read the oldest audit row: %w", err)
	}
	return d, nil
}
