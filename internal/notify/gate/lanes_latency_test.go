package gate

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

// TestEachSentSMSIsObservedFromItsCommit: the lanes tell ObserveSent, once per SMS recorded
// as sent, how long after its event's commit (occurred_at) that was; a dead letter is not
// observed. A journaled sender records a user's run of SMS together: each is observed.
func TestEachSentSMSIsObservedFromItsCommit(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	var (
		mu  sync.Mutex
		got []time.Duration
	)
	observed := func() []time.Duration {
		mu.Lock()
		defer mu.Unlock()
		return append([]time.Duration(nil), got...)
	}
	policy := RetryPolicy{Base: 10 * time.Millisecond, Max: 10 * time.Millisecond, MaxAttempts: 2, DeadLetterAfter: 0}
	sender := &senders.FailureSwitch{Inner: senders.NewLogSender(nil), FailAmount: 404}
	lanes, stop := startLanes(t, s, LaneConfig{Workers: 4, Sender: sender, Policy: policy, ObserveSent: func(d time.Duration) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
	}})

	const age = 3 * time.Second
	committed := time.Now().Add(-age)
	var in []Arrival
	for seq := int64(1); seq <= 3; seq++ {
		in = append(in, committedAt(t, 1, seq, 100, committed))
	}
	in = append(in, committedAt(t, 2, 1, 404, committed)) // always fails: dead-lettered
	receive(t, s, false, in...)
	lanes.Wake()

	wait.On(t, 10*time.Second, "three SMS observed", recordedBy(s).Next, func() bool { return len(observed()) == 3 })
	wait.On(t, 10*time.Second, "the dead letter", recordedBy(s).Next, func() bool {
		return count(t, pool, `SELECT count(*) FROM notify.notifications WHERE status = 'dead_lettered'`) == 1
	})
	stop() // every worker has returned: whatever it was going to observe, it has
	latest := time.Since(committed)
	require.Len(t, observed(), 3, "one observation per SMS sent, none for the dead letter")
	for _, d := range observed() {
		require.GreaterOrEqual(t, d, age, "measured from the event's commit")
		require.LessOrEqual(t, d, latest)
	}
}

// committedAt is (user, seq) as the inbox hands it to the gate, committed by the wallet at
// occurred.
func committedAt(t *testing.T, user, seq, amount int64, occurred time.Time) Arrival {
	t.Helper()
	e := notifytest.Event(user, seq, walletevent.Deposit, amount)
	e.OccurredAt = occurred
	b, err := walletevent.Encode(e)
	require.NoError(t, err)
	m, err := notify.Render(e)
	require.NoError(t, err)
	return Arrival{MsgID: fmt.Sprintf("m-%d-%d", user, seq), Event: b, UserID: user, Seq: seq, Kind: string(e.Kind), Text: m.Text}
}
