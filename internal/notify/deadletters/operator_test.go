package deadletters_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/apperr"
	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/notify/smslog"
	"github.com/walletsaga/walletsaga/internal/pg"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
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

// deployment returns the id of the database's deployment.
func deployment(t *testing.T, pool *pgxpool.Pool) string {
	t.Helper()
	var id string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id::text FROM notify.deployment`).Scan(&id))
	return id
}

// operator is the operators' actions on pool, replays sent through sender.
func operator(pool *pgxpool.Pool, sender notify.Sender) *deadletters.Operator {
	return deadletters.NewOperator(pool, gate.NewStore(pool), sender)
}

// failingSender fails every send with err.
type failingSender struct{ err error }

func (f failingSender) Send(context.Context, notify.SMS) error { return f.err }

func TestReplay(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	seedUser1(t, pool)
	s := smslog.NewStore(pool)
	ctx := context.Background()
	var out bytes.Buffer
	log := senders.NewLogSender(&out)

	res, err := operator(pool, log).Replay(ctx, "admin", 1, 2, "provider was down")
	require.NoError(t, err)
	require.Equal(t, 1, res.Replay)
	var dep string
	require.NoError(t, pool.QueryRow(ctx, `SELECT id::text FROM notify.deployment`).Scan(&dep))
	require.Equal(t, fmt.Sprintf("%s:1:2:%d", dep, notifytest.Epoch), res.IdempotencyKey, "the SMS's own key")
	require.False(t, res.AlreadyDelivered)
	require.Equal(t, "(Delayed) You paid 4.04 CNY for a purchase. Balance: 95.96 CNY.", res.Text)
	require.Contains(t, out.String(), "late=true")

	// A second replay under the same key delivers nothing twice.
	res2, err := operator(pool, log).Replay(ctx, "admin", 1, 2, "")
	require.NoError(t, err)
	require.Equal(t, fmt.Sprintf("%s:1:2:%d", dep, notifytest.Epoch), res2.IdempotencyKey)
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
	require.Equal(t, gate.StatusDeadLettered, status, "a replay does not rewrite the gate's record")

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
	ctx := context.Background()
	ok := senders.NewLogSender(nil)

	_, err := operator(pool, ok).Replay(ctx, "admin", 1, 99, "")
	require.Equal(t, apperr.NotFound, apperr.CodeOf(err))
	require.Contains(t, err.Error(), "no dead letter for user 1 seq 99")

	_, err = operator(pool, ok).Replay(ctx, "admin", 1, 1, "")
	require.Equal(t, apperr.Conflict, apperr.CodeOf(err))
	require.Contains(t, err.Error(), "is sent, not dead_lettered")

	_, err = operator(pool, failingSender{errors.New("connection refused")}).Replay(ctx, "admin", 1, 2, "")
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
	_, err = operator(pool, failingSender{errors.Join(errors.New("400"), notify.ErrPermanent)}).Replay(ctx, "admin", 1, 2, "")
	require.Equal(t, apperr.Unprocessable, apperr.CodeOf(err))
	// A 409: a send under the key is still in progress. Not delivered as far as anyone
	// knows: nothing is recorded, and the operator is told to ask again.
	_, err = operator(pool, failingSender{errors.Join(errors.New("409"), notify.ErrInProgress)}).Replay(ctx, "admin", 1, 2, "")
	require.Equal(t, apperr.Unavailable, apperr.CodeOf(err))
	require.Contains(t, err.Error(), "still processing")

	var audits int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.audit`).Scan(&audits))
	require.Zero(t, audits, "a failed replay leaves no audit row")

	// A provider that had the SMS already (its first answer, replayed) makes the replay a
	// recorded no-op.
	res, err := operator(pool, failingSender{errors.Join(errors.New("200 replayed"), notify.ErrAlreadyDelivered)}).Replay(ctx, "admin", 1, 2, "")
	require.NoError(t, err)
	require.Equal(t, notify.ProviderKey(deployment(t, pool), 1, 2, notifytest.Epoch), res.IdempotencyKey)
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
	ctx := context.Background()
	probe := &lockProbe{pool: pool}
	var overtaking deadletters.ReplayResult
	var overtakingErr error
	probe.during = func() {
		octx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		overtaking, overtakingErr = operator(pool, failingSender{errors.Join(errors.New("200 replayed"), notify.ErrAlreadyDelivered)}).Replay(octx, "bob", 1, 2, "overtakes")
	}

	_, err := operator(pool, probe).Replay(ctx, "alice", 1, 2, "first")
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
