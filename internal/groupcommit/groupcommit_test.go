package groupcommit_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/walletsaga/walletsaga/internal/groupcommit"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type req struct {
	n    int
	done chan int // the size of the group that wrote it
}

// TestConcurrentRequestsShareGroups: requests submitted at once by many goroutines are
// written in fewer groups than requests, each answered once, none lost; Stop writes what
// still waits.
func TestConcurrentRequestsShareGroups(t *testing.T) {
	t.Parallel()
	var groups, written atomic.Int64
	c := groupcommit.New(groupcommit.Config{Linger: 20 * time.Millisecond, MaxRows: 1000, Writers: 2}, func(_ context.Context, g []req) {
		groups.Add(1)
		for _, r := range g {
			written.Add(int64(r.n))
			r.done <- len(g)
		}
	})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	const n = 64
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := req{n: i, done: make(chan int, 1)}
			c.Submit(r, 1)
			<-r.done
		}()
	}
	wg.Wait()
	require.Less(t, groups.Load(), int64(n), "requests share groups")
	require.Equal(t, int64(n*(n-1)/2), written.Load(), "every request written once")

	last := req{n: 1, done: make(chan int, 1)}
	c.Submit(last, 1)
	require.NoError(t, c.Stop(ctx))
	require.Equal(t, 1, <-last.done, "Stop writes what waits")
}

// TestMaxRowsEndsTheLinger: a group is written as soon as MaxRows rows wait, long before
// the linger, and holds no more than MaxRows rows.
func TestMaxRowsEndsTheLinger(t *testing.T) {
	t.Parallel()
	sizes := make(chan int, 8)
	c := groupcommit.New(groupcommit.Config{Linger: time.Hour, MaxRows: 4}, func(_ context.Context, g []req) {
		sizes <- len(g)
		for _, r := range g {
			r.done <- len(g)
		}
	})
	ctx := context.Background()
	require.NoError(t, c.Start(ctx))
	defer func() { require.NoError(t, c.Stop(ctx)) }()
	var rs []req
	for range 5 {
		r := req{done: make(chan int, 1)}
		rs = append(rs, r)
		c.Submit(r, 1)
	}
	select {
	case got := <-sizes:
		require.Equal(t, 4, got)
	case <-time.After(10 * time.Second):
		t.Fatal("MaxRows did not end the linger")
	}
	require.Equal(t, 4, <-rs[0].done)
}

// TestStatsCountWhatWasWritten: a committer counts the groups it wrote and the requests and
// rows they held, and committers that share Counters (one per lead) count as one writer.
func TestStatsCountWhatWasWritten(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	shared := &groupcommit.Counters{}
	groups := 0
	for _, rows := range [][]int{{2, 3, 1}, {5}} {
		c := groupcommit.New(groupcommit.Config{Linger: time.Hour, MaxRows: 6, Counters: shared}, func(_ context.Context, g []req) {
			for _, r := range g {
				r.done <- len(g)
			}
		})
		require.NoError(t, c.Start(ctx))
		var rs []req
		for _, n := range rows {
			r := req{done: make(chan int, 1)}
			rs = append(rs, r)
			c.Submit(r, n)
		}
		// The first committer's 6 rows end its linger at once; Stop writes the second's.
		require.NoError(t, c.Stop(ctx))
		for _, r := range rs {
			require.Equal(t, len(rows), <-r.done, "one group")
		}
		groups++
		require.Equal(t, int64(groups), c.Stats().Groups)
	}
	require.Equal(t, groupcommit.Stats{Groups: 2, Requests: 4, Rows: 11}, shared.Stats())

	own := groupcommit.New(groupcommit.Config{Linger: time.Millisecond}, func(_ context.Context, g []req) {
		for _, r := range g {
			r.done <- len(g)
		}
	})
	require.NoError(t, own.Start(ctx))
	r := req{done: make(chan int, 1)}
	own.Submit(r, 7)
	<-r.done
	require.Equal(t, groupcommit.Stats{Groups: 1, Requests: 1, Rows: 7}, own.Stats(), "counted before the request is answered; counters of its own")
	require.NoError(t, own.Stop(ctx))
}
