package deadletters

import (
	"context"
	"log/slog"

	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
)

// Reconciler is the DLQ watcher's handler: everything found in the DLQ topic is recorded in
// Postgres — a wallet event as a dead-lettered (user, seq) unless the inbox has it already,
// anything else as a bad message — so a dead letter that reached the topic by another path
// (a crash, an older version, the client's own) cannot leave its user waiting or go unseen.
type Reconciler struct {
	gate *gate.Store
	bad  *inbox.Store
	log  *slog.Logger
	woke func()
}

// NewReconciler returns the reconciler, recording dead-lettered SMS through g and bad
// messages in bad; woke is called when it recorded a dead letter (to wake the lanes, which
// move past it).
func NewReconciler(g *gate.Store, bad *inbox.Store, woke func(), log *slog.Logger) *Reconciler {
	if log == nil {
		log = slog.Default()
	}
	if woke == nil {
		woke = func() {}
	}
	return &Reconciler{gate: g, bad: bad, woke: woke, log: log.With("component", "dlq-reconciler")}
}

// Handle records one message found in the DLQ topic.
func (r *Reconciler) Handle(ctx context.Context, m inbox.Message) error {
	d := inbox.Decode(m)
	if d.Bad != "" {
		return r.bad.RecordFoundBad(ctx, d)
	}
	reason := "found in " + m.Topic + " without a record"
	if m.DeadLetterReason != "" {
		reason += ": " + m.DeadLetterReason
	}
	recorded, err := r.gate.FoundDeadLetter(ctx, d.Arrival, reason)
	if err != nil {
		return err
	}
	if recorded {
		r.log.Warn("recorded a dead letter found in the DLQ that had no record", "user_id", d.UserID, "seq", d.Seq, "msg_id", m.MsgID)
		r.woke()
	}
	return nil
}
