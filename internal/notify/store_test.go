package notify_test

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seedUser1 gives user 1: seq 1 sent, 2 dead-lettered, 3 sent, 4 pending; and user 2: seq 1
// sent with no stored text (rendered from the event).
func seedUser1(t *testing.T, pool *pgxpool.Pool) {
	notifytest.Seed(t, pool,
		notifytest.Row{Event: notifytest.Event(1, 1, walletevent.Deposit, 10000), Status: notify.StatusSent, Attempts: 1,
			Text: "You topped up 100.00 CNY. Balance: 100.00 CNY.", FinishedAt: t0.Add(1 * time.Second)},
		notifytest.Row{Event: notifytest.Event(1, 2, walletevent.Purchase, -404), Status: notify.StatusDeadLettered, Attempts: 5,
			LastError: "simulated failure: amount -404", FinishedAt: t0.Add(2 * time.Second)},
		notifytest.Row{Event: notifytest.Event(1, 3, walletevent.Purchase, -5000), Status: notify.StatusSent, Attempts: 1,
			Text: "You paid 50.00 CNY for a purchase. Balance: 50.00 CNY.", FinishedAt: t0.Add(3 * time.Second)},
		notifytest.Row{Event: notifytest.Event(1, 4, walletevent.Deposit, 100), Status: notify.StatusPending, Attempts: 2, LastError: "boom"},
		notifytest.Row{Event: notifytest.Event(2, 1, walletevent.TransferIn, 2000), Status: notify.StatusSent, Attempts: 1,
			FinishedAt: t0.Add(4 * time.Second)},
	)
}

func TestUserSMS(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	s := notify.NewStore(pool)
	ctx := context.Background()

	items, err := s.UserSMS(ctx, 1, 0)
	require.NoError(t, err)
	require.Len(t, items, 3, "pending SMS are not in the log")
	require.Equal(t, []int64{1, 2, 3}, []int64{items[0].Seq, items[1].Seq, items[2].Seq})
	require.Equal(t, notify.StatusSent, items[0].Status)
	require.Equal(t, t0.Add(time.Second), items[0].SentAt.UTC())
	require.Equal(t, "You topped up 100.00 CNY. Balance: 100.00 CNY.", items[0].Text)

	dead := items[1]
	require.Equal(t, notify.StatusDeadLettered, dead.Status)
	require.Nil(t, dead.SentAt)
	require.Equal(t, 5, dead.Attempts)
	require.Equal(t, "simulated failure: amount -404", dead.LastError)
	require.Equal(t, "purchase", dead.Kind)
	require.Equal(t, "You paid 4.04 CNY for a purchase. Balance: 95.96 CNY.", dead.Text, "rendered from the stored event")

	after, err := s.UserSMS(ctx, 1, 2)
	require.NoError(t, err)
	require.Len(t, after, 1)
	require.Equal(t, int64(3), after[0].Seq)

	other, err := s.UserSMS(ctx, 2, 0)
	require.NoError(t, err)
	require.Equal(t, "You received 20.00 CNY from another user. Balance: 120.00 CNY.", other[0].Text)

	none, err := s.UserSMS(ctx, 99, 0)
	require.NoError(t, err)
	require.Empty(t, none)
}

func TestUsersPaginates(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	notifytest.Seed(t, pool, notifytest.Row{Event: notifytest.Event(3, 1, walletevent.Deposit, 1), Status: notify.StatusSent, FinishedAt: t0})
	gapSince := t0.Add(time.Minute)
	_, err := pool.Exec(context.Background(), `INSERT INTO notify.progress (user_id, last_seq, gap_since) VALUES (1, 3, $1)`, gapSince)
	require.NoError(t, err)
	s := notify.NewStore(pool)
	ctx := context.Background()

	p1, err := s.Users(ctx, 2, "")
	require.NoError(t, err)
	require.Len(t, p1.Items, 2)
	require.NotEmpty(t, p1.NextCursor)
	u1 := p1.Items[0]
	require.Equal(t, int64(1), u1.UserID)
	require.Equal(t, 2, u1.Sent)
	require.Equal(t, 1, u1.DeadLettered)
	require.Equal(t, 1, u1.Pending)
	require.Equal(t, int64(3), u1.LastSeq)
	require.Equal(t, int64(4), *u1.MissingSeq, "held by a gap at its next seq")
	require.Equal(t, gapSince, u1.GapSince.UTC())
	require.Equal(t, int64(2), p1.Items[1].UserID)
	require.Nil(t, p1.Items[1].MissingSeq)

	p2, err := s.Users(ctx, 2, p1.NextCursor)
	require.NoError(t, err)
	require.Len(t, p2.Items, 1)
	require.Equal(t, int64(3), p2.Items[0].UserID)
	require.Empty(t, p2.NextCursor)

	_, err = s.Users(ctx, 2, "not-a-cursor!")
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	_, err = s.Users(ctx, notify.MaxPageSize+1, "")
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
}

func TestDeadLettersNewestFirst(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	var rows []notifytest.Row
	// Five dead letters; two share a finished_at so the cursor must break the tie.
	for i, at := range []time.Duration{1, 2, 2, 3, 4} {
		rows = append(rows, notifytest.Row{Event: notifytest.Event(int64(10+i), 1, walletevent.Deposit, 404),
			Status: notify.StatusDeadLettered, Attempts: 3, LastError: "nope", FinishedAt: t0.Add(at * time.Second)})
	}
	rows = append(rows, notifytest.Row{Event: notifytest.Event(20, 1, walletevent.Deposit, 1), Status: notify.StatusSent, FinishedAt: t0})
	notifytest.Seed(t, pool, rows...)
	s := notify.NewStore(pool)
	ctx := context.Background()

	var got []int64
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 5)
		p, err := s.DeadLetters(ctx, 2, cursor)
		require.NoError(t, err)
		for _, d := range p.Items {
			got = append(got, d.UserID)
			require.Equal(t, 3, d.Attempts)
			require.Equal(t, "nope", d.LastError)
			require.Equal(t, "deposit", d.Kind)
			require.Equal(t, "You topped up 4.04 CNY. Balance: 104.04 CNY.", d.Text)
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	require.Equal(t, []int64{14, 13, 12, 11, 10}, got)
}

func TestBadMessages(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	_, err := pool.Exec(context.Background(), `
		INSERT INTO notify.bad_messages (msg_id, queue, queue_offset, body, reason, received_at) VALUES
		('m1', 'wallet-events@broker-a@0', 7, '{"v":9}', 'walletevent: unsupported version 9', $1),
		('m2', 'wallet-events@broker-a@1', 8, '\xff00'::bytea, 'walletevent: decode: invalid character', $2),
		('m3', 'wallet-events@broker-a@1', 9, 'x', 'walletevent: decode: invalid character', $2)`, t0, t0.Add(time.Second))
	require.NoError(t, err)
	s := notify.NewStore(pool)
	p, err := s.BadMessages(context.Background(), 2, "")
	require.NoError(t, err)
	require.Len(t, p.Items, 2)
	require.Equal(t, "m3", p.Items[0].MsgID)
	require.Equal(t, "m2", p.Items[1].MsgID)
	require.Equal(t, "/wA=", p.Items[1].BodyBase64)
	p2, err := s.BadMessages(context.Background(), 2, p.NextCursor)
	require.NoError(t, err)
	require.Len(t, p2.Items, 1)
	require.Equal(t, `{"v":9}`, p2.Items[0].Body)
	require.Equal(t, int64(7), p2.Items[0].QueueOffset)
	require.Empty(t, p2.NextCursor)
}

func TestChangesFeed(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	ctx := context.Background()
	// Two old rows (past the feed lag) and one fresh row.
	old := time.Now().Add(-time.Hour)
	notifytest.Seed(t, pool,
		notifytest.Row{Event: notifytest.Event(1, 1, walletevent.Deposit, 100), Status: notify.StatusSent, FinishedAt: old, UpdatedAt: old},
		notifytest.Row{Event: notifytest.Event(1, 2, walletevent.Deposit, 100), Status: notify.StatusDeadLettered, FinishedAt: old, UpdatedAt: old.Add(time.Second)},
		notifytest.Row{Event: notifytest.Event(2, 1, walletevent.Deposit, 100), Status: notify.StatusPending, Attempts: 1},
	)
	s := notify.NewStore(pool)

	p, err := s.Changes(ctx, 2, "")
	require.NoError(t, err)
	require.True(t, p.More)
	require.Len(t, p.Items, 2)
	require.Equal(t, notify.StatusSent, p.Items[0].Status)
	require.NotNil(t, p.Items[0].SentAt)
	require.Equal(t, notify.StatusDeadLettered, p.Items[1].Status)

	p2, err := s.Changes(ctx, 2, p.NextCursor)
	require.NoError(t, err)
	require.False(t, p2.More)
	require.Len(t, p2.Items, 1)
	require.Equal(t, notify.StatusPending, p2.Items[0].Status)
	require.Equal(t, p.NextCursor, p2.NextCursor, "a row younger than the feed lag does not move the cursor")

	// The fresh row changes: the next poll from the same cursor sees its new state.
	_, err = pool.Exec(ctx, `UPDATE notify.notifications SET status = 'sent', finished_at = now(), updated_at = now() WHERE user_id = 2`)
	require.NoError(t, err)
	p3, err := s.Changes(ctx, 2, p2.NextCursor)
	require.NoError(t, err)
	require.Len(t, p3.Items, 1)
	require.Equal(t, notify.StatusSent, p3.Items[0].Status)
}

// deployment returns the id of the database's deployment.
func deployment(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var id string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id::text FROM notify.deployment`).Scan(&id))
	return id
}

// failingSender fails every send with err.
type failingSender struct{ err error }

func (f failingSender) Send(context.Context, notify.SMS) error { return f.err }

func TestReplay(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	s := notify.NewStore(pool)
	ctx := context.Background()
	var out bytes.Buffer
	log := notify.NewLogSender(&out)

	res, err := s.Replay(ctx, log, "admin", 1, 2, "provider was down")
	require.NoError(t, err)
	require.Equal(t, 1, res.Replay)
	var dep string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id::text FROM notify.deployment`).Scan(&dep))
	require.Equal(t, dep+":1:2", res.IdempotencyKey, "the SMS's own key")
	require.False(t, res.AlreadyDelivered)
	require.Equal(t, "(Delayed) You paid 4.04 CNY for a purchase. Balance: 95.96 CNY.", res.Text)
	require.Contains(t, out.String(), "late=true")

	// A second replay under the same key delivers nothing twice.
	res2, err := s.Replay(ctx, log, "admin", 1, 2, "")
	require.NoError(t, err)
	require.Equal(t, dep+":1:2", res2.IdempotencyKey)
	require.Equal(t, 2, res2.Replay)
	require.True(t, res2.AlreadyDelivered)
	require.Equal(t, 1, strings.Count(out.String(), "late=true"))

	var late int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.sms_log WHERE user_id = 1 AND seq = 2 AND late`).Scan(&late))
	require.Equal(t, 1, late)
	var actor, action, reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT actor, action, reason FROM notify.audit WHERE user_id = 1 AND seq = 2 ORDER BY id LIMIT 1`).Scan(&actor, &action, &reason))
	require.Equal(t, []string{"admin", "replay_dead_letter", "provider was down"}, []string{actor, action, reason})

	var status string
	require.NoError(t, pool.QueryRow(ctx, `SELECT status FROM notify.notifications WHERE user_id = 1 AND seq = 2`).Scan(&status))
	require.Equal(t, notify.StatusDeadLettered, status, "a replay does not rewrite the gate's record")

	items, err := s.UserSMS(ctx, 1, 0)
	require.NoError(t, err)
	require.Equal(t, 2, items[1].ReplayCount)
	require.NotNil(t, items[1].ReplayedAt)

	dl, err := s.DeadLetters(ctx, 10, "")
	require.NoError(t, err)
	require.Equal(t, 2, dl.Items[0].ReplayCount)
}

func TestReplayErrors(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	s := notify.NewStore(pool)
	ctx := context.Background()
	ok := notify.NewLogSender(nil)

	_, err := s.Replay(ctx, ok, "admin", 1, 99, "")
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
	require.Contains(t, err.Error(), "no dead letter for user 1 seq 99")

	_, err = s.Replay(ctx, ok, "admin", 1, 1, "")
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
	require.Contains(t, err.Error(), "is sent, not dead_lettered")

	_, err = s.Replay(ctx, failingSender{errors.New("connection refused")}, "admin", 1, 2, "")
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
	_, err = s.Replay(ctx, failingSender{errors.Join(errors.New("400"), notify.ErrPermanent)}, "admin", 1, 2, "")
	require.Equal(t, apperr.Unprocessable, apperr.CodeOf(err))

	var audits int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.audit`).Scan(&audits))
	require.Zero(t, audits, "a failed replay leaves no audit row")

	// A provider that had the SMS already (a 409) makes the replay a recorded no-op.
	res, err := s.Replay(ctx, failingSender{errors.Join(errors.New("409"), notify.ErrAlreadyDelivered)}, "admin", 1, 2, "")
	require.NoError(t, err)
	require.Equal(t, notify.ProviderKey(deployment(t, pool), 1, 2), res.IdempotencyKey)
	require.True(t, res.AlreadyDelivered)
}

// lockProbe is a sender that, while it sends, tries to lock the SMS's notification row from
// another connection without waiting, and then runs during (once).
type lockProbe struct {
	pool    *pgxpool.Pool
	lockErr error
	during  func()
}

func (p *lockProbe) Send(ctx context.Context, m notify.SMS) error {
	p.lockErr = pg.WithTx(ctx, p.pool, func(tx pgx.Tx) error {
		_, err := tx.Exec(ctx, `SELECT 1 FROM notify.notifications WHERE user_id = $1 AND seq = $2 FOR UPDATE NOWAIT`, m.UserID, m.Seq)
		return err
	})
	if during := p.during; during != nil {
		p.during = nil
		during()
	}
	return nil
}

// TestReplaySendsWithNoRowLockedUnderAFence: while a replay calls the provider, it holds no
// transaction and no lock (a provider that hangs holds up nobody). Another replay of the same
// dead letter that starts and finishes meanwhile is the one recorded; the first, fenced off,
// records nothing and says why.
func TestReplaySendsWithNoRowLockedUnderAFence(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	s := notify.NewStore(pool)
	ctx := context.Background()
	probe := &lockProbe{pool: pool}
	var overtaking notify.ReplayResult
	var overtakingErr error
	probe.during = func() {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		overtaking, overtakingErr = s.Replay(octx, failingSender{errors.Join(errors.New("409"), notify.ErrAlreadyDelivered)}, "bob", 1, 2, "overtakes")
	}

	_, err := s.Replay(ctx, probe, "alice", 1, 2, "first")
	require.NoError(t, probe.lockErr, "the provider was called while the dead letter's row was locked")
	require.NoError(t, overtakingErr, "a replay waited for another one's send")
	require.Equal(t, 1, overtaking.Replay)
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err), "the overtaken replay is fenced off: %v", err)
	require.Contains(t, err.Error(), "another replay of user 1 seq 2 was recorded")
	var actors []string
	rows, err := pool.Query(ctx, `SELECT actor FROM notify.audit WHERE user_id = 1 AND seq = 2 ORDER BY id`)
	require.NoError(t, err)
	actors, err = pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	require.Equal(t, []string{"bob"}, actors, "only the replay that recorded first has an audit row")
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func TestPrintSMSLog(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	s := notify.NewStore(pool)
	var out bytes.Buffer
	require.NoError(t, notify.PrintSMSLog(context.Background(), s, 1, false, &out))
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	require.Equal(t, []string{
		"   SEQ  STATUS               SENT_AT               TEXT",
		"     1  sent                 2026-03-01T12:00:01Z  You topped up 100.00 CNY. Balance: 100.00 CNY.",
		"     2  dead_lettered        -                     You paid 4.04 CNY for a purchase. Balance: 95.96 CNY.  [DEAD-LETTERED after 5 attempts: simulated failure: amount -404]",
		"     3  sent                 2026-03-01T12:00:03Z  You paid 50.00 CNY for a purchase. Balance: 50.00 CNY.",
	}, lines)
}

func TestPrintSMSLogFollows(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	s := notify.NewStore(pool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- notify.PrintSMSLog(ctx, s, 1, true, &out) }()

	wait.Until(t, 10*time.Second, "the log's first lines", func() bool { return strings.Count(out.String(), "\n") == 4 })
	_, err := pool.Exec(ctx, `UPDATE notify.notifications SET status = 'sent', text = 'fourth', finished_at = $1 WHERE user_id = 1 AND seq = 4`, t0.Add(5*time.Second))
	require.NoError(t, err)
	wait.Until(t, 10*time.Second, "the new SMS", func() bool { return strings.Contains(out.String(), "fourth") })
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 1, strings.Count(out.String(), "fourth"), "each SMS printed once")
	require.Equal(t, 5, strings.Count(out.String(), "\n"))
}
