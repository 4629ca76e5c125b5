// Package gate delivers each user's SMS in order, through the gate. The rule:
//
//	send (user, seq) only after seq−1 is recorded sent, dead-lettered or skipped;
//	a redelivered finished seq is ignored;
//	a record applies only under the fence its claim took.
//
// Admit is the rule, and the one place it is decided: the inbox's arrivals go through it
// (Store.Arrive keeps what is not Finished), a lane sends only a seq it admits as Next, and a
// record (Store.record) applies only the outcomes it admits as Next on the user's locked
// position, which Advance then moves past each finished seq. The lanes (Lanes) claim due
// users, send and record; the retry policy (RetryPolicy) decides what a failed send
// becomes. The package owns the delivery tables (see Store) and every statement that writes
// them (sql/*.sql). Its files, one concern each:
//
//   - gate.go: the rule (Admit, Advance, where a new user starts);
//   - store.go: the Store, the inbox's Arrive and the lanes' claim, record and release;
//   - lanes.go: the dispatcher and the workers; commit.go: the recorder of their outcomes;
//   - policy.go: the retry policy;
//   - deadletter_intents.go: dead letters to publish to the DLQ topic, and those found there;
//   - skip.go and replay.go: an operator's skip of a lost seq and replay of a dead letter;
//   - view.go: the gate as /v1/gate and the metrics show it;
//   - retention.go: pruning the gate's tables.
package gate

// Notification statuses, as notify.notifications stores them.
const (
	StatusPending      = "pending"
	StatusSent         = "sent"
	StatusDeadLettered = "dead_lettered"
	StatusSkipped      = "skipped_by_operator"
)

// Position is where a user stands at the gate (its row in notify.progress).
type Position struct {
	// LastSeq is the user's last seq recorded sent, dead-lettered or skipped: every seq up
	// to it is finished (or before the user's baseline), and LastSeq+1 is its next.
	LastSeq int64
	// Fence is the fence of the user's latest claim; every claim takes a new one.
	Fence int64
	// Leased is set while a lane holds the user under Fence.
	Leased bool
	// Epoch is the wallet epoch of the newest events the user took (0: none said), and
	// EpochSince the user's first seq in it: what History decides on.
	Epoch, EpochSince int64
}

// Admission is what the gate says of one seq of a user.
type Admission int

// The admissions.
const (
	// Next: seq−1 is recorded finished and, for a lane, its claim holds the user: send seq,
	// record it.
	Next Admission = iota + 1
	// Finished: seq is recorded finished already (a redelivery): ignore it; nothing is sent
	// or recorded again.
	Finished
	// Waiting: seq−1 is not recorded finished (it has not arrived, or waits for a retry):
	// keep seq, send nothing.
	Waiting
	// Stale: seq is next, but the lane asking holds a claim the user has moved on from (a
	// later claim took a new fence, or the lease was given back): it sends and records
	// nothing.
	Stale
)

// String names the admission, for logs.
func (a Admission) String() string {
	switch a {
	case Next:
		return "next"
	case Finished:
		return "finished"
	case Waiting:
		return "waiting"
	case Stale:
		return "stale"
	}
	return "unknown"
}

// Admit is the gate rule: what may be done with seq of a user standing at p, asked by a lane
// holding the claim that took fence (0 for a caller that holds no claim: the inbox, the DLQ
// reconciler, an operator).
func Admit(p Position, seq, fence int64) Admission {
	switch {
	case seq <= p.LastSeq:
		return Finished // a redelivered finished seq is ignored
	case seq > p.LastSeq+1:
		return Waiting // seq−1 is not recorded sent, dead-lettered or skipped
	case fence != 0 && (!p.Leased || fence != p.Fence):
		return Stale // a record applies only under the fence its claim took
	}
	return Next
}

// Advance returns where a user standing at p stands once seq, its next, is recorded with
// verdict v: past seq when v finishes it (sent, dead-lettered, skipped, or found finished
// already), where it was when v does not (a retry, a send the breaker held back).
func Advance(p Position, seq int64, v Verdict) Position {
	if seq == p.LastSeq+1 && v.finishes() {
		p.LastSeq = seq
	}
	return p
}

// start is where a user the gate has never seen starts, given the lowest seq of its first
// arrivals: at seq 1, so that an earlier seq arriving late is waited for and sent; or, when
// that arrival may set a baseline (Arrival.MayBaseline: the first batch of a queue the
// group's first start began at its end, before which nothing was read), at first, recorded
// as the user's baseline (0: none).
func start(first int64, mayBaseline bool) (p Position, baseline int64) {
	if !mayBaseline {
		return Position{}, 0
	}
	if first > 1 {
		baseline = first
	}
	return Position{LastSeq: first - 1}, baseline
}

// History is what an event's epoch says of the user's history at the gate. The wallet's
// database hands out a user's seqs; a restore, a point-in-time recovery, a copy or a
// failover that lost commits rewinds it, and the same seqs are handed out again, in a new
// epoch (a larger number), which each event carries with its user's first seq in it. So a
// seq alone does not say whether an event is one the gate has finished: the epoch does.
type History int

// The histories.
const (
	// Same: the event is of the user's current history (its epoch, an earlier one before the
	// current epoch's first seq, or none said): the gate rule decides.
	Same History = iota + 1
	// Rewinds: the event is of a later epoch: the user's history from the event's first seq
	// in that epoch on was rewound. What the gate holds of it from there is set aside (never
	// sent), the user stands just before that seq in the new epoch (Rewind), and then the
	// gate rule decides.
	Rewinds
	// Superseded: the event is of an earlier epoch, from the current epoch's first seq on: of
	// a history the wallet rewound. It is set aside, never sent.
	Superseded
)

// String names the history, for logs.
func (h History) String() string {
	switch h {
	case Same:
		return "same"
	case Rewinds:
		return "rewinds"
	case Superseded:
		return "superseded"
	}
	return "unknown"
}

// Place says what an event of epoch (0: not said) with seq is to a user standing at p.
func Place(p Position, epoch, seq int64) History {
	switch {
	case epoch == 0 || epoch == p.Epoch:
		return Same
	case epoch > p.Epoch:
		return Rewinds
	case seq < p.EpochSince:
		return Same
	}
	return Superseded
}

// Rewind returns where a user standing at p stands once the wallet began epoch at the
// user's seq since: in that epoch, and just before since at the latest (the seqs from since
// on that the user finished were of the rewound history; the new ones are texted). The
// fence is the store's to move.
func Rewind(p Position, epoch, since int64) Position {
	p.Epoch, p.EpochSince = epoch, since
	p.LastSeq = min(p.LastSeq, since-1)
	return p
}
