package smslog_test

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

// seedUser1 gives user 1: seq 1 sent, 2 dead-lettered, 3 sent, 4 pending; and user 2: seq 1
// sent with no stored text (rendered from the event).
func seedUser1(t *testing.T, pool *pgxpool.Pool) {
	notifytest.Seed(t, pool,
		notifytest.Row{Event: notifytest.Event(1, 1, walletevent.Deposit, 10000), Status: gate.StatusSent, Attempts: 1,
			Text: "You topped up 100.00 CNY. Balance: 100.00 CNY.", FinishedAt: t0.Add(1 * time.Second)},
		notifytest.Row{Event: notifytest.Event(1, 2, walletevent.Purchase, -404), Status: gate.StatusDeadLettered, Attempts: 5,
			LastError: "simulated failure: amount -404", FinishedAt: t0.Add(2 * time.Second)},
		notifytest.Row{Event: notifytest.Event(1, 3, walletevent.Purchase, -5000), Status: gate.StatusSent, Attempts: 1,
			Text: "You paid 50.00 CNY for a purchase. Balance: 50.00 CNY.", FinishedAt: t0.Add(3 * time.Second)},
		notifytest.Row{Event: notifytest.Event(1, 4, walletevent.Deposit, 100), Status: gate.StatusPending, Attempts: 2, LastError: "boom"},
		notifytest.Row{Event: notifytest.Event(2, 1, walletevent.TransferIn, 2000), Status: gate.StatusSent, Attempts: 1,
			FinishedAt: t0.Add(4 * time.Second)},
	)
}

func TestUserSMS(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	s := smslog.NewStore(pool)
	ctx := context.Background()

	items, err := s.UserSMS(ctx, 1, 0)
	require.NoError(t, err)
	require.Len(t, items, 3, "pending SMS are not in the log")
	require.Equal(t, []int64{1, 2, 3}, []int64{items[0].Seq, items[1].Seq, items[2].Seq})
	require.Equal(t, gate.StatusSent, items[0].Status)
	require.Equal(t, t0.Add(time.Second), items[0].SentAt.UTC())
	require.Equal(t, "You topped up 100.00 CNY. Balance: 100.00 CNY.", items[0].Text)

	dead := items[1]
	require.Equal(t, gate.StatusDeadLettered, dead.Status)
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
	notifytest.Seed(t, pool, notifytest.Row{Event: notifytest.Event(3, 1, walletevent.Deposit, 1), Status: gate.StatusSent, FinishedAt: t0})
	gapSince := t0.Add(time.Minute)
	_, err := pool.Exec(context.Background(), `INSERT INTO notify.progress (user_id, last_seq, gap_since) VALUES (1, 3, $1)`, gapSince)
	require.NoError(t, err)
	s := smslog.NewStore(pool)
	ctx := context.Background()

	p1, err := s.Users(ctx, 2, "", "")
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

	p2, err := s.Users(ctx, 2, p1.NextCursor, "")
	require.NoError(t, err)
	require.Len(t, p2.Items, 1)
	require.Equal(t, int64(3), p2.Items[0].UserID)
	require.Empty(t, p2.NextCursor)

	_, err = s.Users(ctx, 2, "not-a-cursor!", "")
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
	_, err = s.Users(ctx, smslog.MaxPageSize+1, "", "")
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
}

func TestDeadLettersNewestFirst(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	var rows []notifytest.Row
	// Five dead letters; two share a finished_at so the cursor must break the tie.
	for i, at := range []time.Duration{1, 2, 2, 3, 4} {
		rows = append(rows, notifytest.Row{Event: notifytest.Event(int64(10+i), 1, walletevent.Deposit, 404),
			Status: gate.StatusDeadLettered, Attempts: 3, LastError: "nope", FinishedAt: t0.Add(at * time.Second)})
	}
	rows = append(rows, notifytest.Row{Event: notifytest.Event(20, 1, walletevent.Deposit, 1), Status: gate.StatusSent, FinishedAt: t0})
	notifytest.Seed(t, pool, rows...)
	s := smslog.NewStore(pool)
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
	s := smslog.NewStore(pool)
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
		notifytest.Row{Event: notifytest.Event(1, 1, walletevent.Deposit, 100), Status: gate.StatusSent, FinishedAt: old, UpdatedAt: old},
		notifytest.Row{Event: notifytest.Event(1, 2, walletevent.Deposit, 100), Status: gate.StatusDeadLettered, FinishedAt: old, UpdatedAt: old.Add(time.Second)},
		notifytest.Row{Event: notifytest.Event(2, 1, walletevent.Deposit, 100), Status: gate.StatusPending, Attempts: 1},
	)
	s := smslog.NewStore(pool)

	p, err := s.Changes(ctx, 2, "")
	require.NoError(t, err)
	require.True(t, p.More)
	require.Len(t, p.Items, 2)
	require.Equal(t, gate.StatusSent, p.Items[0].Status)
	require.NotNil(t, p.Items[0].SentAt)
	require.Equal(t, gate.StatusDeadLettered, p.Items[1].Status)

	p2, err := s.Changes(ctx, 2, p.NextCursor)
	require.NoError(t, err)
	require.False(t, p2.More)
	require.Len(t, p2.Items, 1)
	require.Equal(t, gate.StatusPending, p2.Items[0].Status)
	require.Equal(t, p.NextCursor, p2.NextCursor, "a row younger than the feed lag does not move the cursor")

	// The fresh row changes: the next poll from the same cursor sees its new state.
	_, err = pool.Exec(ctx, `UPDATE notify.notifications SET status = 'sent', finished_at = now(), updated_at = now() WHERE user_id = 2`)
	require.NoError(t, err)
	p3, err := s.Changes(ctx, 2, p2.NextCursor)
	require.NoError(t, err)
	require.Len(t, p3.Items, 1)
	require.Equal(t, gate.StatusSent, p3.Items[0].Status)
}

// syncBuffer is a bytes.Buffer safe for one writer and one reader.
type syncBuffer struct {
	mu      sync.Mutex
	b       bytes.Buffer
	written wait.Signal // raised after each write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	defer s.written.Raise()
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
	s := smslog.NewStore(pool)
	var out bytes.Buffer
	require.NoError(t, smslog.PrintSMSLog(context.Background(), s, 1, false, &out))
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
	s := smslog.NewStore(pool)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var out syncBuffer
	done := make(chan error, 1)
	go func() { done <- smslog.PrintSMSLog(ctx, s, 1, true, &out) }()

	wait.On(t, 10*time.Second, "the log's first lines", out.written.Next, func() bool { return strings.Count(out.String(), "\n") == 4 })
	_, err := pool.Exec(ctx, `UPDATE notify.notifications SET status = 'sent', text = 'fourth', finished_at = $1 WHERE user_id = 1 AND seq = 4`, t0.Add(5*time.Second))
	require.NoError(t, err)
	wait.On(t, 10*time.Second, "the new SMS", out.written.Next, func() bool { return strings.Contains(out.String(), "fourth") })
	cancel()
	require.NoError(t, <-done)
	require.Equal(t, 1, strings.Count(out.String(), "fourth"), "each SMS printed once")
	require.Equal(t, 5, strings.Count(out.String(), "\n"))
}

func TestConsoleListsPage(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	notifytest.Bulk(t, pool, 30, 7)
	s := smslog.NewStore(pool)
	ctx := context.Background()

	// Recent activity: newest first, each page before the last of the previous one, the
	// pages together every change once.
	seen := map[[2]int64]bool{}
	var prev time.Time
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, 30)
		p, err := s.Activity(ctx, 40, cursor)
		require.NoError(t, err)
		for _, it := range p.Items {
			if !prev.IsZero() {
				require.False(t, it.UpdatedAt.After(prev), "newest first")
			}
			prev = it.UpdatedAt
			k := [2]int64{it.UserID, it.Seq}
			require.False(t, seen[k], "each change once")
			seen[k] = true
		}
		if p.NextCursor == "" {
			break
		}
		cursor = p.NextCursor
	}
	require.Len(t, seen, 30*7)
	first, err := s.Activity(ctx, 1, "")
	require.NoError(t, err)
	require.Equal(t, []int64{30, 7}, []int64{first.Items[0].UserID, first.Items[0].Seq}, "the newest change first")

	// A user's SMS: pages of seq order; the pending last seq of user 10 is not in the log.
	p1, err := s.UserSMSPage(ctx, 10, 4, "")
	require.NoError(t, err)
	require.Equal(t, []int64{1, 2, 3, 4}, seqs(p1.Items))
	p2, err := s.UserSMSPage(ctx, 10, 4, p1.NextCursor)
	require.NoError(t, err)
	require.Equal(t, []int64{5, 6}, seqs(p2.Items))
	require.Empty(t, p2.NextCursor)

	// Search by phone: the user whose events went to it, and no one for another number.
	found, err := s.Users(ctx, 10, "", notifytest.BulkPhone(17))
	require.NoError(t, err)
	require.Len(t, found.Items, 1)
	require.Equal(t, int64(17), found.Items[0].UserID)
	require.Equal(t, 7, found.Items[0].Sent+found.Items[0].DeadLettered)
	require.Equal(t, "+*********0017", found.Items[0].Phone, "masked")
	none, err := s.Users(ctx, 10, "", "+8613999999999")
	require.NoError(t, err)
	require.Empty(t, none.Items)
	_, err = s.Users(ctx, 10, "", "13800001234")
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err), "a phone not in E.164")

	// The audit trail pages newest first.
	_, err = pool.Exec(ctx, `INSERT INTO notify.audit (actor, action, reason) SELECT 'alice', 'skip_seq', 'r' || i FROM generate_series(1, 5) AS g(i)`)
	require.NoError(t, err)
	a1, err := s.Audit(ctx, 3, "")
	require.NoError(t, err)
	require.Len(t, a1.Items, 3)
	require.Equal(t, "r5", a1.Items[0].Reason)
	a2, err := s.Audit(ctx, 3, a1.NextCursor)
	require.NoError(t, err)
	require.Len(t, a2.Items, 2)
	require.Equal(t, "r2", a2.Items[0].Reason)
	require.Empty(t, a2.NextCursor)
	_, err = s.Audit(ctx, 3, "bad cursor")
	require.Equal(t, apperr.Invalid, apperr.CodeOf(err))
}

func seqs(items []smslog.SMSItem) []int64 {
	out := make([]int64, len(items))
	for i, it := range items {
		out[i] = it.Seq
	}
	return out
}
