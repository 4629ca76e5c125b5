package retention_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/retention"
)

func TestBoundsCheck(t *testing.T) {
	t.Parallel()
	day := 24 * time.Hour
	for _, c := range []struct {
		name string
		b    retention.Bounds
		dev  bool
		d    time.Duration
		ok   bool
	}{
		{"idempotency default", retention.IdempotencyBounds, false, retention.DefaultIdempotency, true},
		{"idempotency 24h", retention.IdempotencyBounds, false, day, true},
		{"idempotency 30d", retention.IdempotencyBounds, false, 30 * day, true},
		{"idempotency below a day in production", retention.IdempotencyBounds, false, 23 * time.Hour, false},
		{"idempotency beyond 30 days", retention.IdempotencyBounds, false, 31 * day, false},
		{"idempotency beyond 30 days in dev too", retention.IdempotencyBounds, true, 31 * day, false},
		{"idempotency never forever", retention.IdempotencyBounds, false, 0, false},
		{"idempotency seconds in dev", retention.IdempotencyBounds, true, 5 * time.Second, true},
		{"outbox forever", retention.OutboxBounds, false, 0, true},
		{"outbox a minute in production", retention.OutboxBounds, false, time.Minute, false},
		{"outbox seconds in dev", retention.OutboxBounds, true, 2 * time.Second, true},
		{"outbox below a second in dev", retention.OutboxBounds, true, 500 * time.Millisecond, false},
		{"negative", retention.InboxBounds, true, -time.Second, false},
		{"wakes a minute", retention.WakeBounds, false, time.Minute, true},
		{"sagas default", retention.SagaBounds, false, retention.DefaultSagas, true},
	} {
		got := c.b.Check(c.dev, c.d)
		require.Equal(t, c.ok, got == "", "%s: %q", c.name, got)
	}
	require.Contains(t, retention.IdempotencyBounds.Check(false, time.Hour), "must be 24h0m0s–720h0m0s, got 1h0m0s")
	require.Empty(t, retention.CheckSagasOutliveKeys(0, day), "sagas kept forever outlive any key")
	require.Empty(t, retention.CheckSagasOutliveKeys(day, day))
	require.Contains(t, retention.CheckSagasOutliveKeys(time.Hour, day), "a repeated key answers with its saga")
}

func TestEvery(t *testing.T) {
	t.Parallel()
	require.Equal(t, time.Minute, retention.Every(), "nothing to prune: a minute")
	require.Equal(t, time.Minute, retention.Every(retention.DefaultOutbox, 0))
	require.Equal(t, 15*time.Second, retention.Every(time.Hour, time.Minute))
	require.Equal(t, time.Second, retention.Every(2*time.Second), "never below a second")
}

// fakeTable deletes from a count of prunable rows, at most limit a call.
type fakeTable struct {
	mu      sync.Mutex
	left    int64
	calls   int
	windows []time.Duration
	fail    error
}

func (f *fakeTable) prune(_ context.Context, window time.Duration, limit int) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls++
	f.windows = append(f.windows, window)
	if f.fail != nil {
		return 0, f.fail
	}
	n := min(f.left, int64(limit))
	f.left -= n
	return n, nil
}

func (f *fakeTable) table(name string, window time.Duration) retention.Table {
	return retention.Table{Name: name, Window: window, Prune: f.prune, Oldest: func(context.Context) (time.Duration, error) {
		f.mu.Lock()
		defer f.mu.Unlock()
		return time.Duration(f.left) * time.Second, nil
	}}
}

type observed struct {
	mu        sync.Mutex
	pruned    map[string]int64
	oldest    map[string]time.Duration
	interval  map[string]time.Duration
	lastPass  map[string]time.Time
	scheduled map[string]time.Time
}

func newObserved() *observed {
	return &observed{pruned: map[string]int64{}, oldest: map[string]time.Duration{}, interval: map[string]time.Duration{},
		lastPass: map[string]time.Time{}, scheduled: map[string]time.Time{}}
}

func (o *observed) Scheduled(table string, interval time.Duration, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.interval[table] = interval
	o.scheduled[table] = at
}

func (o *observed) Passed(table string, at time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.lastPass[table] = at
}

func (o *observed) Pruned(table string, n int64) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.pruned[table] += n
}

func (o *observed) Oldest(table string, age time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.oldest[table] = age
}

func TestAPassPrunesInBatchesUntilOneComesBackShort(t *testing.T) {
	t.Parallel()
	big, small, off, broken := &fakeTable{left: 2500}, &fakeTable{left: 3}, &fakeTable{left: 10}, &fakeTable{fail: errors.New("boom")}
	obs := newObserved()
	p, err := retention.New(retention.Config{Batch: 1000, Pause: time.Millisecond, Observer: obs},
		broken.table("broken", time.Hour), big.table("big", time.Hour), small.table("small", 2*time.Hour), off.table("off", 0))
	require.NoError(t, err)
	require.Equal(t, time.Minute, p.Interval(), "a quarter of the shortest window, at most a minute")
	before := time.Now()
	pruned, err := p.Pass(context.Background())
	require.ErrorContains(t, err, "broken: boom", "a failing table is reported")
	require.Equal(t, map[string]int64{"broken": 0, "big": 2500, "small": 3}, pruned, "the failing table keeps no other from being pruned; a window of 0 is never pruned")
	require.Equal(t, 3, big.calls, "1000, 1000, then 500: short, done")
	require.Equal(t, []time.Duration{time.Hour, time.Hour, time.Hour}, big.windows, "each batch is given the table's window")
	require.Equal(t, 1, small.calls)
	require.Zero(t, off.calls, "a window of 0 keeps the rows forever")
	require.Equal(t, map[string]int64{"big": 2500, "small": 3}, obs.pruned)
	require.Equal(t, map[string]time.Duration{"broken": 0, "big": 0, "small": 0}, obs.oldest, "the oldest retained row is reported after pruning")
	require.ElementsMatch(t, []string{"big", "small"}, keys(obs.lastPass), "a pass is reported finished for each table it pruned without an error, never for a failing one")
	for table, at := range obs.lastPass {
		require.False(t, at.Before(before) || at.After(time.Now()), "%s: passed at %s, during the pass", table, at)
	}
	require.Empty(t, obs.scheduled, "Pass alone schedules nothing; the pruner's start does")
}

// TestAPassThatFailsIsNotReportedAsPassed: a table whose prune fails, or whose oldest row
// cannot be read, is not reported passed, so its last pass ages (the pruner-behind alert);
// once it works again, the next pass is reported.
func TestAPassThatFailsIsNotReportedAsPassed(t *testing.T) {
	t.Parallel()
	tab := &fakeTable{left: 5, fail: errors.New("boom")}
	obs := newObserved()
	p, err := retention.New(retention.Config{Batch: 10, Observer: obs}, tab.table("t", time.Hour))
	require.NoError(t, err)
	_, err = p.Pass(context.Background())
	require.Error(t, err)
	require.Empty(t, obs.lastPass)
	tab.mu.Lock()
	tab.fail = nil
	tab.mu.Unlock()
	_, err = p.Pass(context.Background())
	require.NoError(t, err)
	require.Contains(t, obs.lastPass, "t")

	unreadable := &fakeTable{left: 5}
	obs = newObserved()
	tbl := unreadable.table("u", time.Hour)
	tbl.Oldest = func(context.Context) (time.Duration, error) { return 0, errors.New("no oldest") }
	p, err = retention.New(retention.Config{Batch: 10, Observer: obs}, tbl)
	require.NoError(t, err)
	_, err = p.Pass(context.Background())
	require.ErrorContains(t, err, "no oldest")
	require.Empty(t, obs.lastPass, "a pass whose oldest row was not read did not finish")
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestPrunesFromStartUntilStop(t *testing.T) {
	t.Parallel()
	tab := &fakeTable{left: 5}
	obs := newObserved()
	p, err := retention.New(retention.Config{Batch: 10, Interval: time.Hour, Observer: obs}, tab.table("t", time.Second), tab.table("off", 0))
	require.NoError(t, err)
	start := time.Now()
	require.NoError(t, p.Start(context.Background()))
	require.Eventually(t, func() bool {
		tab.mu.Lock()
		defer tab.mu.Unlock()
		return tab.left == 0
	}, 10*time.Second, 5*time.Millisecond, "the first pass runs at once")
	require.Eventually(t, func() bool {
		obs.mu.Lock()
		defer obs.mu.Unlock()
		return !obs.lastPass["t"].IsZero()
	}, 10*time.Second, 5*time.Millisecond, "the first pass is reported")
	obs.mu.Lock()
	require.Equal(t, map[string]time.Duration{"t": time.Hour}, obs.interval, "the start reports each pruned table's interval; a window of 0 is not pruned")
	require.False(t, obs.scheduled["t"].Before(start), "and its start as the last pass, before the first")
	require.False(t, obs.lastPass["t"].Before(obs.scheduled["t"]))
	obs.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	require.NoError(t, p.Stop(ctx))
	select {
	case <-p.Stopped():
	default:
		t.Fatal("Stop returned before the pruner stopped")
	}
}

func TestNewRefusesWhatCannotWork(t *testing.T) {
	t.Parallel()
	tab := &fakeTable{}
	_, err := retention.New(retention.Config{Batch: 0}, tab.table("t", time.Second))
	require.ErrorContains(t, err, "batch must be positive")
	_, err = retention.New(retention.Config{Batch: 1}, retention.Table{Name: "t", Window: time.Second})
	require.ErrorContains(t, err, "needs a name, Prune and Oldest")
	_, err = retention.New(retention.Config{Batch: 1}, tab.table("t", -time.Second))
	require.ErrorContains(t, err, "must not be negative")
}
