package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// The epochs of these tests: the wallet's history before and after a restore.
const (
	before = notifytest.Epoch
	after  = notifytest.Epoch + 1_000_000
)

// inboundIn is (user, seq) of the wallet's epoch, which began at the user's seq since, with
// its balance after: what tells two events of one seq apart.
func inboundIn(t testing.TB, user, seq, epoch, since, balance int64) Arrival {
	t.Helper()
	ev := notifytest.Event(user, seq, walletevent.Deposit, 100)
	ev.Epoch, ev.EpochSince, ev.BalanceAfter = epoch, since, balance
	b, err := walletevent.Encode(ev)
	require.NoError(t, err)
	m, err := notify.Render(ev)
	require.NoError(t, err)
	return Arrival{MsgID: fmt.Sprintf("m-%d-%d-%d", user, seq, epoch), Event: b, UserID: user, Seq: seq, Kind: string(ev.Kind), Text: m.Text,
		Epoch: epoch, EpochSince: since}
}

// TestARewoundHistoryIsSetAsideAndTheNewOneIsTexted: user 1 took seqs 1–4 of the wallet's
// history; 1–3 are sent (3 journaled in the SMS log), 4 waits. The wallet's database is then
// restored to a backup taken at its seq 2, and its next event is seq 3 of a new epoch. The
// gate sets aside what it holds of the rewound history from seq 3 on (inbox rows 3 and 4, the
// SMS log row of 3), stands the user before seq 3 in the new epoch, under a new fence, and
// keeps the new seq 3 to send; the audit trail says so. A late copy of the rewound seq 4 is
// set aside, never kept to send; a copy of seq 2, from before the restore, is a redelivery;
// the new seq 4 is kept.
func TestARewoundHistoryIsSetAsideAndTheNewOneIsTexted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	r := receive(t, s, false, inboundIn(t, 1, 1, before, 1, 100), inboundIn(t, 1, 2, before, 1, 200),
		inboundIn(t, 1, 3, before, 1, 300), inboundIn(t, 1, 4, before, 1, 400))
	require.Equal(t, 4, r.Inserted)
	_, err := pool.Exec(ctx, `UPDATE notify.notifications SET status = 'sent', finished_at = now() WHERE user_id = 1 AND seq <= 3`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `UPDATE notify.progress SET last_seq = 3, fence = 5 WHERE user_id = 1`)
	require.NoError(t, err)
	_, err = pool.Exec(ctx, `INSERT INTO notify.sms_log (user_id, seq, phone, text) VALUES (1, 3, '+8613800001234', 'old 3')`)
	require.NoError(t, err)

	newThree := inboundIn(t, 1, 3, after, 3, 250)
	r = receive(t, s, false, newThree)
	require.Equal(t, Arrived{Inserted: 1, Rewound: 1, Woken: 1}, r)

	p := position(t, s, 1)
	require.Equal(t, Position{LastSeq: 2, Fence: 6, Epoch: after, EpochSince: 3}, p, "before seq 3 of the new epoch, under a new fence")
	var event []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT event::text FROM notify.notifications WHERE user_id = 1 AND seq = 3 AND status = 'pending'`).Scan(&event))
	require.JSONEq(t, string(newThree.Event), string(event), "the inbox holds the new seq 3")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND seq = 4`))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.sms_log WHERE user_id = 1 AND seq >= 3`))
	require.Equal(t, []string{"inbox 3 sent", "inbox 4 pending", "sms_log 3 sent"}, setAside(t, pool, 1))

	var detail map[string]int64
	var raw []byte
	require.NoError(t, pool.QueryRow(ctx, `SELECT detail FROM notify.audit WHERE action = 'history_rewound' AND user_id = 1 AND seq = 3`).Scan(&raw))
	require.NoError(t, json.Unmarshal(raw, &detail))
	require.Equal(t, map[string]int64{"from_epoch": before, "to_epoch": after, "last_seq_was": 3, "set_aside": 3}, detail)

	r = receive(t, s, false, inboundIn(t, 1, 4, before, 1, 400), inboundIn(t, 1, 2, before, 1, 200),
		newThree, inboundIn(t, 1, 4, after, 3, 350))
	require.Equal(t, Arrived{Inserted: 1, Ignored: 2, Superseded: 1, Woken: 1}, r)
	require.Equal(t, []string{"arrival 4 ", "inbox 3 sent", "inbox 4 pending", "sms_log 3 sent"}, setAside(t, pool, 1))
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.notifications WHERE user_id = 1 AND seq = 4 AND event->>'balance_after' = '350'`))

	// A second copy of the new epoch's first event rewinds nothing more.
	r = receive(t, s, false, newThree)
	require.Equal(t, Arrived{Ignored: 1}, r)
	require.Equal(t, 1, count(t, pool, `SELECT count(*) FROM notify.audit WHERE action = 'history_rewound'`))
}

// TestAUserFirstSeenAfterARewindStartsInItsEpoch: a user the gate has never seen, whose
// first batch holds a seq of the rewound history and the same seq of the new epoch, keeps
// the new one, sets the old one aside, and waits for its seqs before the new epoch (of the
// history before it, still to come).
func TestAUserFirstSeenAfterARewindStartsInItsEpoch(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	r := receive(t, s, false, inboundIn(t, 2, 5, before, 1, 500), inboundIn(t, 2, 5, after, 5, 450))
	require.Equal(t, Arrived{Inserted: 1, Superseded: 1, Woken: 1}, r)
	require.Equal(t, Position{Epoch: after, EpochSince: 5}, position(t, s, 2))
	require.Equal(t, []string{"arrival 5 "}, setAside(t, pool, 2))
	r = receive(t, s, false, inboundIn(t, 2, 4, before, 1, 400))
	require.Equal(t, Arrived{Inserted: 1, Woken: 1}, r, "seq 4 is of the history before the new epoch")
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.audit WHERE action = 'history_rewound'`), "nothing of the user was rewound")
}

// TestEventsWithoutAnEpochAreOfTheCurrentHistory: a body of the version before epochs (a
// wallet of the previous release during an upgrade) is of the user's current history, and
// the first event with an epoch moves the user to it without setting anything aside or
// telling anyone: nothing was rewound.
func TestEventsWithoutAnEpochAreOfTheCurrentHistory(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	r := receive(t, s, false, inboundIn(t, 3, 1, 0, 0, 100), inboundIn(t, 3, 2, 0, 0, 200))
	require.Equal(t, 2, r.Inserted)
	r = receive(t, s, false, inboundIn(t, 3, 3, after, 3, 300), inboundIn(t, 3, 4, 0, 0, 400))
	require.Equal(t, Arrived{Inserted: 2, Woken: 1}, r)
	require.Equal(t, Position{Epoch: after, EpochSince: 3, Fence: 1}, position(t, s, 3))
	require.Empty(t, setAside(t, pool, 3))
	require.Zero(t, count(t, pool, `SELECT count(*) FROM notify.audit WHERE action = 'history_rewound'`))
}

// position reads where user stands.
func position(t *testing.T, s *Store, user int64) Position {
	t.Helper()
	at, err := positions(context.Background(), s.db, positionsSQL, []int64{user})
	require.NoError(t, err)
	return at[user]
}

// setAside lists what the gate set aside of user's rewound histories: "what seq status".
func setAside(t *testing.T, s interface {
	Query(context.Context, string, ...any) (pgx.Rows, error)
}, user int64) []string {
	t.Helper()
	rows, err := s.Query(context.Background(), `SELECT what || ' ' || seq || ' ' || COALESCE(status, '') FROM notify.rewound WHERE user_id = $1 ORDER BY what, seq`, user)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}
