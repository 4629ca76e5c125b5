package deadletters_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/notify/deadletters"
	"github.com/walletsaga/walletsaga/internal/notify/gate"
	"github.com/walletsaga/walletsaga/internal/notify/inbox"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// sink is a DLQ topic that refuses while err is set, and says so on refused.
type sink struct {
	mu      sync.Mutex
	keys    []string
	err     error
	refused chan struct{}
	stored  wait.Signal // raised after each message stored
}

func (k *sink) Publish(_ context.Context, key, _, _ string, body []byte) error {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		select {
		case k.refused <- struct{}{}:
		default:
		}
		return k.err
	}
	if len(body) == 0 {
		return errors.New("empty body")
	}
	k.keys = append(k.keys, key)
	k.stored.Raise()
	return nil
}

func (k *sink) published() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	out := append([]string(nil), k.keys...)
	sort.Strings(out)
	return out
}

// TestDeadLettersReachTheDLQFromTheirRecordedIntent: the publisher publishes every recorded
// dead letter (SMS and bad messages), keeps those the broker refused for later, and marks
// what it published; the reconciler records a dead letter found in the DLQ without a record
// and moves its user past it.
func TestDeadLettersReachTheDLQFromTheirRecordedIntent(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	g, bad := gate.NewStore(pool), inbox.NewStore(pool)
	ctx := context.Background()
	notifytest.Seed(t, pool,
		notifytest.Row{Event: notifytest.Event(1, 1, walletevent.Deposit, 404), Status: gate.StatusDeadLettered, Attempts: 3, FinishedAt: time.Now()},
		notifytest.Row{Event: notifytest.Event(2, 1, walletevent.Deposit, 404), Status: gate.StatusDeadLettered, Attempts: 3, FinishedAt: time.Now()})
	in := inbox.NewInbox(bad, g, nil, quiet)
	require.NoError(t, in.Start(ctx))
	defer func() { require.NoError(t, in.Stop(context.Background())) }()
	require.NoError(t, in.Handle(ctx, []inbox.Message{{MsgID: "bad-9", Queue: "broker-a/0", Body: []byte("garbage")}}))

	k := &sink{err: errors.New("broker down"), refused: make(chan struct{})}
	pub := deadletters.NewPublisher(g, bad, k, 10*time.Millisecond, quiet)
	require.NoError(t, pub.Start(ctx))
	defer func() { require.NoError(t, pub.Stop(context.Background())) }()
	for range 3 { // a few rounds against the refusing broker
		wait.For(t, 10*time.Second, "a round against the refusing broker", k.refused)
	}
	backlog, err := pub.Backlog(ctx)
	require.NoError(t, err)
	require.EqualValues(t, 3, backlog, "nothing is marked while the broker refuses")
	k.mu.Lock()
	k.err = nil
	k.mu.Unlock()
	pub.Wake()
	wait.On(t, 10*time.Second, "the dead letters in the DLQ", k.stored.Next, func() bool { return len(k.published()) == 3 })
	require.Equal(t, []string{"1:1", "2:1", "bad-9"}, k.published())
	// The publisher counts what it published once it has marked it: wait for both (the
	// count read as soon as the marks show raced with it).
	wait.Until(t, 10*time.Second, "them marked and counted, 3 published", func() bool {
		backlog, err := pub.Backlog(ctx)
		require.NoError(t, err)
		return backlog == 0 && pub.Published() == 3
	})

	// The DLQ is not an input: a wallet event in the DLQ that this deployment never
	// dead-lettered (user 3's seq 1, while its seq 2 waits behind it) is flagged as a bad
	// message, once, and moves user 3 past nothing; what the gate knows (user 1's dead letter
	// of seq 1, published above) is left as it is.
	b, err := walletevent.Encode(notifytest.Event(3, 2, walletevent.Deposit, 200))
	require.NoError(t, err)
	require.NoError(t, in.Handle(ctx, []inbox.Message{{MsgID: "m-3-2", Queue: "broker-a/1", Body: b}}))
	rec := deadletters.NewReconciler(g, bad, quiet)
	b, err = walletevent.Encode(notifytest.Event(3, 1, walletevent.Deposit, 100))
	require.NoError(t, err)
	require.NoError(t, rec.Handle(ctx, inbox.Message{Topic: "%DLQ%g", MsgID: "orig-3-1", Body: b, DeadLetterReason: "gave up"}))
	require.NoError(t, rec.Handle(ctx, inbox.Message{Topic: "%DLQ%g", MsgID: "orig-3-1", Body: b}), "idempotent")
	require.NoError(t, rec.Handle(ctx, inbox.Message{Topic: "%DLQ%g", MsgID: "bad-9", Body: []byte("garbage")}))
	known, err := walletevent.Encode(notifytest.Event(1, 1, walletevent.Deposit, 404))
	require.NoError(t, err)
	require.NoError(t, rec.Handle(ctx, inbox.Message{Topic: "%DLQ%g", MsgID: "ours-1-1", Body: known}))
	require.EqualValues(t, 2, rec.Foreign(), "the foreign event, counted each time it is read")
	var n int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.notifications WHERE user_id = 3 AND seq = 1`).Scan(&n))
	require.Zero(t, n, "nothing is recorded at the gate for a dead letter the deployment never made")
	var reason string
	require.NoError(t, pool.QueryRow(ctx, `SELECT reason FROM notify.bad_messages WHERE msg_id = 'orig-3-1' AND dlq_published_at IS NOT NULL`).Scan(&reason))
	require.Equal(t, "found in %DLQ%g but never dead-lettered here: not taken as a dead letter (an operator may skip the seq if it is lost); the DLQ says: gave up", reason)
	l, err := gate.NewLanes(g, gate.LaneConfig{Owner: "dlq-test", Workers: 2, Poll: 20 * time.Millisecond, Policy: gate.DefaultRetryPolicy,
		Sender: senders.NewLogSender(nil), Logger: quiet})
	require.NoError(t, err)
	require.NoError(t, l.Start(ctx))
	defer func() { require.NoError(t, l.Stop(context.Background())) }()
	// User 3 stays held by its gap: its seq 2 waits for an operator's skip, not for the DLQ.
	wait.Until(t, 10*time.Second, "a lane to find user 3 held by its gap", func() bool {
		var gap bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT gap_since IS NOT NULL FROM notify.progress WHERE user_id = 3`).Scan(&gap))
		return gap
	})
	var held int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.notifications WHERE user_id = 3 AND seq = 2 AND status = 'pending'`).Scan(&held))
	require.Equal(t, 1, held, "user 3's seq 2 still waits behind the gap")
	var badRows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM notify.bad_messages`).Scan(&badRows))
	require.Equal(t, 2, badRows, "the garbage and the foreign event")
}
