// The Store and the lanes' statements: arrive, claim, record, release.

package gate

import (
	"context"
	_ "embed"
	"fmt"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/walletsaga/walletsaga/internal/freetext"
	"github.com/walletsaga/walletsaga/internal/pg"
)

// The gate owns the notifier's delivery tables, and its statements (sql/*.sql) are the only
// ones that write them: notify.notifications (the inbox: one row per (user, seq), its status
// and attempts), notify.progress (each user's position at the gate, its lease and fence),
// notify.wakes (news for idle users) and the SMS log rows of a journaled sender's deliveries
// in notify.sms_log; it reads notify.deployment for the provider key. This file holds the
// Store, the inbox's Arrive, the lanes' claim, record and release, and DeploymentID; the
// other parts call the methods of deadletter_intents.go (the DLQ publisher and reconciler),
// skip.go and replay.go (an operator) and view.go (the read side). (The SMS log's read model
// reads these tables too, and writes none.)

var (
	//go:embed sql/positions.sql
	positionsSQL string
	//go:embed sql/lock.sql
	lockSQL string
	//go:embed sql/arrive.sql
	arriveSQL string
	//go:embed sql/claim.sql
	claimSQL string
	//go:embed sql/record.sql
	recordSQL string
	//go:embed sql/release.sql
	releaseSQL string
	//go:embed sql/release_all.sql
	releaseAllSQL string
	//go:embed sql/deployment.sql
	deploymentSQL string
	//go:embed sql/rewind.sql
	rewindSQL string
	//go:embed sql/superseded.sql
	supersededSQL string
)

// Store holds the gate's statements on a pool. It is safe for concurrent use.
type Store struct {
	db         *pgxpool.Pool
	deployment deployment
}

// NewStore returns a Store on db.
func NewStore(db *pgxpool.Pool) *Store { return &Store{db: db} }

// Arrival is one decoded wallet event as the inbox hands it to the gate: its (user, seq),
// the event as it came, and the SMS text rendered from it.
type Arrival struct {
	MsgID  string
	Queue  string // the broker queue it came from, e.g. "broker-b/3"
	Event  []byte
	UserID int64
	Seq    int64
	Kind   string
	Text   string
	// Traceparent is the W3C traceparent of the span that recorded the arrival ("" untraced):
	// the lane's send span is its child.
	Traceparent string
	// Epoch is the wallet epoch the event was written in (0: not said), EpochSince its
	// user's first seq in it (see History).
	Epoch, EpochSince int64
	// MayBaseline lets a user the gate has never seen start at this arrival's seq (see
	// start): set only on the first batch of a queue that the group's very first start
	// began at its end (CONSUME_FROM=last), whose earlier messages it never reads.
	MayBaseline bool
}

// Arrived is what one Arrive did.
type Arrived struct {
	Inserted  int // new (user, seq) rows in the inbox
	Ignored   int // redeliveries of what the inbox holds or finished already
	Baselines int // users first seen past seq 1 that start there (MayBaseline)
	// Rewound counts the users whose history the write found rewound (an event of a later
	// wallet epoch) and who had something of the rewound history set aside; Superseded the
	// arrivals of a rewound history it set aside instead of writing to the inbox.
	Rewound, Superseded int
	// Woken counts the users with new rows left to a claim (a wake row each): the others
	// the write claimed itself, for the ticket's lanes.
	Woken int

	claims []claim // the users the write claimed, for Ticket.Take
}

// Claimed returns how many users the write claimed for the ticket's lanes.
func (a Arrived) Claimed() int { return len(a.claims) }

// Arrive records a batch of arrivals in one transaction on db, of two round trips: it reads
// where their users stand, keeps each arrival the gate does not say is Finished (Admit),
// and writes those in ONE statement: each becomes a pending inbox row unless its (user,
// seq) is there already (a user seen for the first time also gets its progress row). A user
// with a new row whose lane is free and idle, and whose next SMS is one of them, is claimed
// by the write itself for t's lanes (up to the workers t reserved; none with a nil t),
// under a new fence, as a claim would; every other user with a new row is woken for the
// lanes' claims. It locks no row another statement holds, so a queue never waits for a
// lane. A user the gate has never seen starts at 1, or, when its lowest seq in the batch
// arrived with MayBaseline, at that seq, recorded as its baseline. The caller hands the answer
// to t.Take once the write has committed (or an empty one if it did not). It sends an
// ArrivalWrite, which a caller with statements of its own queues in its own batches.
func (s *Store) Arrive(ctx context.Context, db *pgxpool.Pool, batch []Arrival, t *Ticket) (Arrived, error) {
	w := s.NewArrival(batch, t)
	err := pg.TwoTrips(ctx, db, pg.Bounds{}, w.QueueRead, func(b *pgx.Batch) error {
		w.QueueWrite(b)
		return nil
	})
	if err != nil {
		return Arrived{}, err
	}
	return w.Arrived(), nil
}

// ArrivalWrite is an Arrive to send in two batches of one transaction: QueueRead reads
// where the users stand; QueueWrite, queued once that is read, writes what the gate admits.
type ArrivalWrite struct {
	batch       []Arrival
	t           *Ticket
	first       map[int64]int64   // each user's lowest seq in the batch
	mayBaseline map[int64]bool    // whether every arrival of that seq came with MayBaseline
	newest      map[int64]Arrival // each user's arrival of the latest epoch in the batch
	users       []int64
	at          map[int64]Position
	r           Arrived
	// rewinds are the users whose history plan found rewound, superseded the arrivals of a
	// rewound history: QueueWrite sets both aside before it writes the inbox.
	rewinds    []rewind
	superseded []Arrival
}

// rewind is a user whose history the wallet rewound: it began epoch at the user's seq since.
type rewind struct {
	user, epoch, since int64
}

// NewArrival returns the write of batch (see Arrive).
func (s *Store) NewArrival(batch []Arrival, t *Ticket) *ArrivalWrite {
	w := &ArrivalWrite{batch: batch, t: t, first: map[int64]int64{}, mayBaseline: map[int64]bool{}, newest: map[int64]Arrival{}}
	for _, a := range batch {
		switch f, ok := w.first[a.UserID]; {
		case !ok || a.Seq < f:
			w.first[a.UserID], w.mayBaseline[a.UserID] = a.Seq, a.MayBaseline
		case a.Seq == f:
			w.mayBaseline[a.UserID] = w.mayBaseline[a.UserID] && a.MayBaseline
		}
		if n, ok := w.newest[a.UserID]; !ok || a.Epoch > n.Epoch {
			w.newest[a.UserID] = a
		}
	}
	w.users = keys(w.first)
	return w
}

// QueueRead queues the read of where the users stand (a plain read: it locks nothing).
func (w *ArrivalWrite) QueueRead(b *pgx.Batch) {
	b.Queue(positionsSQL, pg.Args{"users": w.users}).Query(func(rows pgx.Rows) (err error) {
		if w.at, err = scanPositions(rows, len(w.users)); err != nil {
			return w.failed(err)
		}
		return nil
	})
}

// QueueWrite queues the write of the arrivals the gate admits, given what QueueRead read;
// once b's results are read, Arrived holds what it did. Before it, in the same transaction,
// the rewinds and the superseded arrivals plan found (a restored wallet: rare).
func (w *ArrivalWrite) QueueWrite(b *pgx.Batch) {
	args := w.plan()
	for _, r := range w.rewinds {
		b.Queue(rewindSQL, pg.Args{"user": r.user, "epoch": r.epoch, "since": r.since}).QueryRow(func(row pgx.Row) error {
			var setAside, movedBack int
			if err := row.Scan(&setAside, &movedBack); err != nil {
				return w.failed(fmt.Errorf("rewind user %d to epoch %d at seq %d: %w", r.user, r.epoch, r.since, err))
			}
			if setAside > 0 || movedBack > 0 {
				w.r.Rewound++
			}
			return nil
		})
	}
	if len(w.superseded) > 0 {
		b.Queue(supersededSQL, supersededArgs(w.superseded, w.at))
		w.r.Superseded = len(w.superseded)
	}
	b.Queue(arriveSQL, args).Query(func(rows pgx.Rows) error {
		if err := w.scan(rows); err != nil {
			return w.failed(err)
		}
		return nil
	})
}

// plan lets the gate decide, on where the users stand, which arrivals to write, and where a
// user seen for the first time starts; it returns arrive.sql's arguments.
func (w *ArrivalWrite) plan() pg.Args {
	if w.at == nil {
		w.at = map[int64]Position{}
	}
	at := w.at
	var startUsers, startLast, startBaselines, startEpochs, startSinces []int64
	for u, f := range w.first {
		n := w.newest[u]
		p, ok := at[u]
		switch {
		case !ok:
			var baseline int64
			p, baseline = start(f, w.mayBaseline[u])
			p.Epoch, p.EpochSince = n.Epoch, max(n.EpochSince, 1)
			startUsers, startLast, startBaselines = append(startUsers, u), append(startLast, p.LastSeq), append(startBaselines, baseline)
			startEpochs, startSinces = append(startEpochs, p.Epoch), append(startSinces, p.EpochSince)
		case Place(p, n.Epoch, n.Seq) == Rewinds:
			p = Rewind(p, n.Epoch, n.EpochSince)
			w.rewinds = append(w.rewinds, rewind{user: u, epoch: n.Epoch, since: n.EpochSince})
		}
		at[u] = p
	}
	var users, seqs []int64
	var msgIDs, events, kinds, texts, queues, traceparents []string
	for _, a := range w.batch {
		if Place(at[a.UserID], a.Epoch, a.Seq) == Superseded {
			w.superseded = append(w.superseded, a)
			continue
		}
		if Admit(at[a.UserID], a.Seq, 0) == Finished {
			continue
		}
		users, seqs = append(users, a.UserID), append(seqs, a.Seq)
		msgIDs, events, kinds, texts, queues = append(msgIDs, a.MsgID), append(events, string(a.Event)), append(kinds, a.Kind), append(texts, a.Text), append(queues, a.Queue)
		traceparents = append(traceparents, a.Traceparent)
	}
	args := pg.Args{
		"users": users, "seqs": seqs, "msg_ids": msgIDs, "events": events, "kinds": kinds, "texts": texts, "queues": queues,
		"traceparents": traceparents,
		"start_users":  startUsers, "start_last_seqs": startLast, "start_baselines": startBaselines,
		"start_epochs": startEpochs, "start_epoch_sinces": startSinces,
		"slots": 0, "owner": "", "lease_us": int64(0), "run": 1,
	}
	if t := w.t; t != nil {
		args["slots"], args["owner"], args["lease_us"], args["run"] = t.n, t.owner, t.lease.Microseconds(), max(t.run, 1)
	}
	return args
}

// Arrived is what the write did, once it was sent and committed.
func (w *ArrivalWrite) Arrived() Arrived { return w.r }

func (w *ArrivalWrite) failed(err error) error {
	return fmt.Errorf("inbox: record %d messages: %w", len(w.batch), err)
}

// scan reads arrive.sql's counts and the users it claimed.
func (w *ArrivalWrite) scan(rows pgx.Rows) error {
	defer rows.Close()
	var r Arrived
	var hs heads
	for rows.Next() {
		h := hs.row()
		var user, last, fence *int64
		if err := rows.Scan(append([]any{&r.Inserted, &r.Baselines, &r.Woken, &user, &last, &fence}, h.fields()...)...); err != nil {
			return err
		}
		if user == nil {
			continue // nobody claimed: the counts alone
		}
		h.user, h.last = *user, *last
		if hs.add(h) {
			hs.out[len(hs.out)-1].At.Fence, hs.out[len(hs.out)-1].At.Leased = *fence, true
		}
	}
	if err := rows.Err(); err != nil {
		return err
	}
	r.claims = hs.out
	r.Ignored = len(w.batch) - r.Inserted - w.r.Superseded
	r.Rewound, r.Superseded = w.r.Rewound, w.r.Superseded
	w.r = r
	return nil
}

// positions reads where users stand with sql (positions.sql, or lock.sql in a transaction).
func positions(ctx context.Context, q pg.Querier, sql string, users []int64) (map[int64]Position, error) {
	rows, err := q.Query(ctx, sql, pg.Args{"users": users})
	if err != nil {
		return nil, err
	}
	return scanPositions(rows, len(users))
}

// scanPositions reads the rows of positions.sql or lock.sql.
func scanPositions(rows pgx.Rows, n int) (map[int64]Position, error) {
	defer rows.Close()
	at := make(map[int64]Position, n)
	for rows.Next() {
		var u int64
		var p Position
		if err := rows.Scan(&u, &p.LastSeq, &p.Fence, &p.Leased, &p.Epoch, &p.EpochSince); err != nil {
			return nil, err
		}
		at[u] = p
	}
	return at, rows.Err()
}

// keys returns m's keys, in no order.
func keys[V any](m map[int64]V) []int64 {
	out := make([]int64, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// head is a user's next SMS as a lane sees it: the inbox row at last_seq + 1, if any.
type head struct {
	UserID   int64
	Seq      int64
	Status   string // "" when the row is missing
	Attempts int
	Age      time.Duration // since its first attempt, on the database's clock
	ReadAt   time.Time     // when it was read, on this process's monotonic clock
	MsgID    string
	Event    []byte
	// Text is the SMS text the inbox rendered from Event on arrival: the text sent.
	Text string
	// Traceparent is the inbox span that recorded it ("" untraced): its send span's parent.
	Traceparent string
}

// claim is a user a lane took: its next SMS (Heads[0], Status "" when it has not arrived)
// and those after it in the inbox, in seq order without gaps (at most the run asked for).
//
// The heads are read in the same snapshot in which the statement deletes the user's wake
// rows: a wake row it deletes is one whose SMS it read. An inbox write that lands after the
// snapshot leaves its wake row in place, and a give-back reads the inbox again under the
// user's lock (release), so a lane that gives the user back as idle never strands news.
type claim struct {
	UserID int64
	Heads  []head
	// At is where the user stands, under the fence this claim took: each claim takes a new
	// one, and a record or a give-back applies only under it.
	At Position
}

// scanHeads reads rows of (user, the seq before its next, extra, head columns...) into one
// claim per user, standing at that seq, its heads cut at the first gap; extra is scanned into
// the claim by set.
func scanHeads[X any](rows pgx.Rows, set func(*claim, X)) ([]claim, error) {
	defer rows.Close()
	var hs heads
	for rows.Next() {
		var extra X
		r := hs.row()
		if err := rows.Scan(append([]any{&r.user, &r.last, &extra}, r.fields()...)...); err != nil {
			return nil, err
		}
		if hs.add(r) {
			set(&hs.out[len(hs.out)-1], extra)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return hs.out, nil
}

// heads gathers the rows of a statement that reads users' next SMS (claim, record, arrive)
// into one claim per user.
type heads struct {
	out []claim
	now time.Time
}

// headRow is one row's user, the seq before its next, and head columns.
type headRow struct {
	user, last int64
	seq        *int64
	h          head
	age        float64
	event      string
}

func (hs *heads) row() *headRow {
	if hs.now.IsZero() {
		hs.now = time.Now()
	}
	return &headRow{}
}

// fields are the scan targets of the head columns, in the order the statements give them.
func (r *headRow) fields() []any {
	return []any{&r.seq, &r.h.Status, &r.h.Attempts, &r.age, &r.h.MsgID, &r.event, &r.h.Text, &r.h.Traceparent}
}

// add adds a row to its user's claim (rows come in user, then seq, order), and reports
// whether it began a new claim. A user's heads start at its next seq and end at the first
// gap.
func (hs *heads) add(r *headRow) bool {
	begun := len(hs.out) == 0 || hs.out[len(hs.out)-1].UserID != r.user
	if begun {
		hs.out = append(hs.out, claim{UserID: r.user, Heads: []head{{UserID: r.user, Seq: r.last + 1, ReadAt: hs.now}}, At: Position{LastSeq: r.last}})
	}
	c := &hs.out[len(hs.out)-1]
	prev := c.Heads[len(c.Heads)-1]
	switch {
	case r.seq == nil:
		return begun // no row at all: the missing head stays
	case prev.Status == "" && *r.seq == prev.Seq:
		// the first row is the head itself
	case prev.Status != "" && *r.seq == prev.Seq+1:
		c.Heads = append(c.Heads, head{})
	default:
		return begun // a gap: the run ends before it
	}
	h := r.h
	h.UserID, h.Seq, h.ReadAt = r.user, *r.seq, hs.now
	h.Age = time.Duration(r.age * float64(time.Second))
	if r.event != "" {
		h.Event = []byte(r.event)
	}
	c.Heads[len(c.Heads)-1] = h
	return begun
}

// claimUsers leases up to n users whose lane is due (due_at has come, or an inbox write woke
// them while idle) and free, longest waiting first, for lease, and returns each with up to
// run of its next SMS and the new fence the claim took. Replicas share the work: SKIP LOCKED
// passes over users another statement is taking or recording at the same moment, and a
// leased user is not claimable until its lease runs out (a lane that died) or is given back.
func (s *Store) claimUsers(ctx context.Context, owner string, n int, lease time.Duration, run int) ([]claim, error) {
	rows, err := s.db.Query(ctx, claimSQL, pg.Args{
		"owner": owner, "n": n, "lease_us": lease.Microseconds(), "run": max(run, 1), "drain": claimDrain(n),
	})
	if err != nil {
		return nil, fmt.Errorf("lanes: claim: %w", err)
	}
	out, err := scanHeads(rows, func(c *claim, fence int64) { c.At.Fence, c.At.Leased = fence, true })
	if err != nil {
		return nil, fmt.Errorf("lanes: claim: %w", err)
	}
	return out, nil
}

// claimDrain is how many of the oldest wake rows a claim of n users reads: enough to find n
// idle users with news past a few leased ones, and to clear the news of users that are due
// by their due_at (leased, or waiting for a retry) from the front of the queue in one pass.
func claimDrain(n int) int { return 4*n + 64 }

// verdictAdvance moves a user past a head that is finished already (the DLQ reconciler can
// record a dead letter ahead of the lane).
const verdictAdvance Verdict = "advance"

// outcome is what a lane records for one user's head.
type outcome struct {
	// OccurredAt is when the wallet committed the event, for the commit→SMS observer (not
	// stored).
	OccurredAt time.Time

	UserID   int64
	Seq      int64
	Verdict  Verdict
	Attempts int
	Delay    time.Duration // Retry, Postponed: until the user is due again
	Reason   string
	Text     string
	Phone    string
	Journal  bool          // write the SMS log row (the log sender's delivery) with a Sent
	Fence    int64         // the fence of the claim the lane holds the user under
	Age      time.Duration // since the SMS's first attempt (not stored: the policy's input)
}

// recorded is what the store answers for one user's outcomes.
type recorded struct {
	Held bool // the lane still held the user: the outcomes were recorded
	// Released: the user had nothing more to send, and the record gave it back (idle).
	Released bool
	At       Position // where the user stands now
	Heads    []head   // the SMS after them (after Sent, DeadLettered, advance)
}

// record writes a batch of outcomes, each user's all or nothing, in one transaction. A user
// may have several: a run of consecutive seqs (a journaled sender delivers a user's waiting
// SMS together). It locks the users' positions, lets the gate decide (Admit) which users'
// outcomes apply — each outcome must be its user's next seq under the fence of the claim the
// lane holds — and moves each user along its run (Advance); then, in ONE statement, it
// writes the positions, the notification rows, and for a journaled Sent the SMS log rows,
// and reads up to run of each advanced user's next SMS. Users whose outcomes the gate
// refused are left out of the answer.
func (s *Store) record(ctx context.Context, lease time.Duration, run int, batch []outcome) (map[int64]recorded, error) {
	byUser := map[int64][]outcome{}
	for _, o := range batch {
		byUser[o.UserID] = append(byUser[o.UserID], o)
	}
	users := keys(byUser)
	var at map[int64]Position
	var out map[int64]recorded
	// Two round trips: BEGIN with the lock, then the record with COMMIT. Bounded on the
	// server too: a record the lanes gave up on must not hold its users' rows (locked by
	// lockSQL) while it waits for some other lock (see pg.Bounds).
	err := pg.TwoTrips(ctx, s.db, pg.UntilDeadline(ctx), func(b *pgx.Batch) {
		b.Queue(lockSQL, pg.Args{"users": users}).Query(func(rows pgx.Rows) (err error) {
			at, err = scanPositions(rows, len(users))
			return err
		})
	}, func(b *pgx.Batch) error {
		var a recordArgs
		last := map[int64]Verdict{}
		for user, outs := range byUser {
			last[user] = outs[len(outs)-1].Verdict
			p, ok := at[user]
			for _, o := range outs {
				if !ok || Admit(p, o.Seq, o.Fence) != Next {
					ok = false
					break
				}
				p = Advance(p, o.Seq, o.Verdict)
			}
			if ok {
				a.add(p, outs)
			}
		}
		out = map[int64]recorded{}
		if len(a.uUsers) == 0 {
			return nil
		}
		b.Queue(recordSQL, a.named(lease, run)).Query(func(rows pgx.Rows) error {
			idle := map[int64]bool{}
			got, err := scanHeads(rows, func(c *claim, released bool) { idle[c.UserID] = released })
			if err != nil {
				return err
			}
			for _, c := range got {
				// A retry, a postponed send and an idle user end the lease.
				p := at[c.UserID]
				p.LastSeq, p.Leased = c.At.LastSeq, !idle[c.UserID] && last[c.UserID] != Retry && last[c.UserID] != Postponed
				out[c.UserID] = recorded{Held: true, Released: idle[c.UserID], At: p, Heads: c.Heads}
			}
			return nil
		})
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("lanes: record %d outcomes: %w", len(batch), err)
	}
	return out, nil
}

// recordArgs are record.sql's arrays: the admitted outcomes, and per user where it stands
// after them and its last outcome's verdict and delay.
type recordArgs struct {
	users, seqs                      []int64
	verdicts, reasons, texts, phones []string
	attempts                         []int32
	journal                          []bool
	uUsers, uLastSeqs, uDelays       []int64
	uVerdicts                        []string
}

func (a *recordArgs) add(at Position, outs []outcome) {
	for _, o := range outs {
		a.users, a.seqs = append(a.users, o.UserID), append(a.seqs, o.Seq)
		a.verdicts, a.reasons = append(a.verdicts, string(o.Verdict)), append(a.reasons, freetext.Clip(o.Reason, maxReason))
		a.texts, a.phones = append(a.texts, o.Text), append(a.phones, o.Phone)
		a.attempts, a.journal = append(a.attempts, int32(o.Attempts)), append(a.journal, o.Journal) //nolint:gosec // G115: the column is an integer; the retry policy stops far below 2^31 attempts
	}
	last := outs[len(outs)-1]
	a.uUsers, a.uLastSeqs = append(a.uUsers, last.UserID), append(a.uLastSeqs, at.LastSeq)
	a.uVerdicts, a.uDelays = append(a.uVerdicts, string(last.Verdict)), append(a.uDelays, last.Delay.Microseconds())
}

func (a *recordArgs) named(lease time.Duration, run int) pg.Args {
	return pg.Args{
		"users": a.users, "seqs": a.seqs, "verdicts": a.verdicts, "attempts": a.attempts, "reasons": a.reasons,
		"texts": a.texts, "phones": a.phones, "journal": a.journal,
		"u_users": a.uUsers, "u_last_seqs": a.uLastSeqs, "u_verdicts": a.uVerdicts, "u_delays_us": a.uDelays,
		"lease_us": lease.Microseconds(), "run": max(run, 1),
	}
}

// release gives a user back. With requeue, or when its next seq is in the inbox after all,
// the user is due again at once (a lane that has worked on it long enough lets others have
// a turn); otherwise it is idle: not due, and marked as waiting on a gap when later seqs are
// in the inbox while its next is not. An inbox write the release does not see still has its
// wake row, so a claim takes the user again. Nothing happens unless the user is still leased
// under fence.
func (s *Store) release(ctx context.Context, user, fence int64, requeue bool) error {
	// Bounded on the server too, as a record is: a give-back waiting for the user's row must
	// not queue behind it after the lanes stopped waiting.
	// The position is locked first, so that the release's own statement, which decides
	// whether the user is idle, reads the inbox in a snapshot taken after every claim that
	// deleted the user's wake rows before has committed (see claim.sql).
	err := pg.TwoTrips(ctx, s.db, pg.UntilDeadline(ctx), func(b *pgx.Batch) {
		b.Queue(lockSQL, pg.Args{"users": []int64{user}})
	}, func(b *pgx.Batch) error {
		b.Queue(releaseSQL, pg.Args{"user": user, "fence": fence, "requeue": requeue})
		return nil
	})
	if err != nil {
		return fmt.Errorf("lanes: release user %d: %w", user, err)
	}
	return nil
}

// releaseAll gives back every user leased by owner, due at once: at shutdown, and at the
// start of a process that took over a stable name (its predecessor's leases are its own).
func (s *Store) releaseAll(ctx context.Context, owner string) (int64, error) {
	tag, err := s.db.Exec(ctx, releaseAllSQL, pg.Args{"owner": owner})
	if err != nil {
		return 0, fmt.Errorf("lanes: release the leases of %s: %w", owner, err)
	}
	return tag.RowsAffected(), nil
}

// deployment caches the id of the deployment the notifier's tables belong to.
type deployment struct {
	mu sync.Mutex
	id string
}

// DeploymentID returns the id notify.deployment holds (created once, by the migration that
// made the table), read once and then kept: it is part of every provider key.
func (s *Store) DeploymentID(ctx context.Context) (string, error) {
	s.deployment.mu.Lock()
	defer s.deployment.mu.Unlock()
	if s.deployment.id != "" {
		return s.deployment.id, nil
	}
	if err := s.db.QueryRow(ctx, deploymentSQL).Scan(&s.deployment.id); err != nil {
		return "", fmt.Errorf("read the deployment id: %w", err)
	}
	return s.deployment.id, nil
}

// maxReason is how many characters of a failure reason the notifier's tables keep.
const maxReason = 1000

// supersededArgs are superseded.sql's arguments for arrivals of a rewound history, each
// set aside under its user's current epoch (at).
func supersededArgs(batch []Arrival, at map[int64]Position) pg.Args {
	n := len(batch)
	users, seqs, epochs, by := make([]int64, n), make([]int64, n), make([]int64, n), make([]int64, n)
	msgIDs, events, texts := make([]string, n), make([]string, n), make([]string, n)
	for i, a := range batch {
		users[i], seqs[i], epochs[i], by[i] = a.UserID, a.Seq, a.Epoch, at[a.UserID].Epoch
		msgIDs[i], events[i], texts[i] = a.MsgID, string(a.Event), a.Text
	}
	return pg.Args{"users": users, "seqs": seqs, "epochs": epochs, "by_epochs": by, "msg_ids": msgIDs, "events": events, "texts": texts}
}
