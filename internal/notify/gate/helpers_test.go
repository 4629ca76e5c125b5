// The tests' helpers: arrivals, a checked provider, lanes that stop with the test.

package gate

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify"
	"github.com/walletsaga/walletsaga/internal/notify/senders"
	"github.com/walletsaga/walletsaga/internal/testutil/notifytest"
	"github.com/walletsaga/walletsaga/internal/testutil/smsprovider"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
	"github.com/walletsaga/walletsaga/internal/walletevent"
)

var quiet = slog.New(slog.NewTextHandler(io.Discard, nil))

// inbound is (user, seq) as the inbox hands it to the gate.
func inbound(t testing.TB, user, seq, amount int64) Arrival {
	t.Helper()
	ev := notifytest.Event(user, seq, walletevent.Deposit, amount)
	b, err := walletevent.Encode(ev)
	require.NoError(t, err)
	m, err := notify.Render(ev)
	require.NoError(t, err)
	return Arrival{MsgID: fmt.Sprintf("m-%d-%d", user, seq), Event: b, UserID: user, Seq: seq, Kind: string(ev.Kind), Text: m.Text}
}

// receive writes ms through the gate, each with MayBaseline when mayBaseline is set.
func receive(t testing.TB, s *Store, mayBaseline bool, ms ...Arrival) Arrived {
	t.Helper()
	for i := range ms {
		ms[i].MayBaseline = ms[i].MayBaseline || mayBaseline
	}
	r, err := s.Arrive(context.Background(), s.db, ms, nil)
	require.NoError(t, err)
	return r
}

// arriveFor writes ms as an inbox handing its users to l does (inbox.Inbox.HandTo): the
// write claims, for l's free workers, the idle users whose next SMS it brings, and wakes l
// for the others.
func arriveFor(ctx context.Context, s *Store, l *Lanes, ms ...Arrival) (Arrived, error) {
	ticket := l.Reserve(len(ms))
	a, err := s.Arrive(ctx, s.db, ms, ticket)
	if err != nil {
		ticket.Take(Arrived{})
		return a, err
	}
	ticket.Take(a)
	if a.Woken > 0 {
		l.Wake()
	}
	return a, nil
}

// provider is the tests' SMS provider (internal/testutil/smsprovider) behind a webhook
// sender, checking the gate rule at each call: (user, seq) goes out only once (user, seq-1)
// is recorded finished.
type provider struct {
	*smsprovider.Provider
	sender     *senders.WebhookSender
	mu         sync.Mutex
	violations []string
}

func newProvider(t *testing.T, pool *pgxpool.Pool) *provider {
	t.Helper()
	p := &provider{Provider: smsprovider.Start()}
	t.Cleanup(p.Close)
	var err error
	p.sender, err = senders.NewWebhookSender(p.URL(), 0, nil)
	require.NoError(t, err)
	p.OnCall(func(c smsprovider.Call) {
		if c.Seq == 1 {
			return
		}
		var st string
		err := pool.QueryRow(context.Background(), `SELECT COALESCE((SELECT status FROM notify.notifications WHERE user_id = $1 AND seq = $2), '')`,
			c.UserID, c.Seq-1).Scan(&st)
		if err != nil || (st != StatusSent && st != StatusDeadLettered && st != StatusSkipped) {
			p.mu.Lock()
			defer p.mu.Unlock()
			p.violations = append(p.violations, fmt.Sprintf("%s sent while %d was %q (%v)", c.Key, c.Seq-1, st, err))
		}
	})
	return p
}

// failWhen makes the provider answer 503 to the SMS fail picks (nil: none).
func (p *provider) failWhen(fail func(smsprovider.Call) bool) {
	p.SetFault(func(c smsprovider.Call) smsprovider.Fault {
		if fail != nil && fail(c) {
			return smsprovider.Fault{Status: http.StatusServiceUnavailable}
		}
		return smsprovider.Fault{}
	})
}

// firstKey is the provider key of the user's seq 1 in the database behind pool.
func firstKey(t *testing.T, pool *pgxpool.Pool, user int64) string {
	t.Helper()
	var dep string
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT id::text FROM notify.deployment`).Scan(&dep))
	return notify.ProviderKey(dep, user, 1, notifytest.Epoch)
}

// callsOf returns the provider's calls for key, in order.
func (p *provider) callsOf(key string) []smsprovider.Call {
	return p.Calls(func(c smsprovider.Call) bool { return c.Key == key })
}

// requireInOrder checks that each user's delivered seqs are 1..n in order, and the gate rule.
func (p *provider) requireInOrder(t *testing.T, want map[int64]int) {
	t.Helper()
	p.mu.Lock()
	require.Empty(t, p.violations)
	p.mu.Unlock()
	got := p.Delivered()
	for user, n := range want {
		seqs := got[user]
		require.Len(t, seqs, n, "user %d delivered %v", user, seqs)
		for i, s := range seqs {
			require.Equal(t, int64(i+1), s, "user %d delivered %v", user, seqs)
		}
	}
}

func testPolicy() RetryPolicy {
	return RetryPolicy{Base: 20 * time.Millisecond, Max: 200 * time.Millisecond, MaxAttempts: 3, DeadLetterAfter: 0}
}

// recordedSignals holds, per store, the signal its lanes raise (see recordedBy).
var recordedSignals sync.Map // *Store → *wait.Signal

// recordedBy returns the signal the lanes startLanes runs on s raise each time they have
// recorded an SMS sent or dead-lettered: through ObserveSent and DeadLettered, the hooks the
// metrics and the DLQ publisher are told by, once the record's answer is back.
func recordedBy(s *Store) *wait.Signal {
	sig, _ := recordedSignals.LoadOrStore(s, new(wait.Signal))
	return sig.(*wait.Signal)
}

// startLanes runs lanes until the test ends (or stop is called). They raise recordedBy(s)
// after each SMS recorded sent or dead-lettered, after cfg's own hooks.
func startLanes(t testing.TB, s *Store, cfg LaneConfig) (*Lanes, func()) {
	t.Helper()
	sig := recordedBy(s)
	t.Cleanup(func() { recordedSignals.Delete(s) })
	observe, dead := cfg.ObserveSent, cfg.DeadLettered
	cfg.ObserveSent = func(d time.Duration) {
		if observe != nil {
			observe(d)
		}
		sig.Raise()
	}
	cfg.DeadLettered = func() {
		if dead != nil {
			dead()
		}
		sig.Raise()
	}
	if cfg.Owner == "" {
		cfg.Owner = "test-" + fmt.Sprint(rand.Int64())
	}
	if cfg.Policy == (RetryPolicy{}) {
		cfg.Policy = testPolicy()
	}
	if cfg.Poll == 0 {
		cfg.Poll = 20 * time.Millisecond
	}
	cfg.Logger = quiet
	l, err := NewLanes(s, cfg)
	require.NoError(t, err)
	require.NoError(t, l.Start(t.Context()))
	stop := func() { require.NoError(t, l.Stop(context.Background())) }
	t.Cleanup(stop)
	return l, stop
}

func count(t *testing.T, pool *pgxpool.Pool, sql string, args ...any) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(), sql, args...).Scan(&n))
	return n
}

// userOneClaimed returns a store whose user 1 has its seq 1 in the inbox, claimed by lane "a"
// under fence 1.
func userOneClaimed(t *testing.T) (*pgxpool.Pool, *Store) {
	t.Helper()
	pool, _ := testdb.New(t)
	s := NewStore(pool)
	receive(t, s, false, inbound(t, 1, 1, 100))
	c, err := s.claimUsers(context.Background(), "a", 1, time.Minute, 1)
	require.NoError(t, err)
	require.Len(t, c, 1)
	require.Equal(t, int64(1), c[0].At.Fence)
	return pool, s
}
