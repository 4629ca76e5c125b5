package groupstart_test

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/notify/groupstart"
	"github.com/walletsaga/walletsaga/internal/testutil/testdb"
)

// The rule: a queue without an offset starts at its end only in the process that took the
// group's first start, with CONSUME_FROM=last, for a queue the topic had then.
func TestAQueueStartsAtItsEndOnlyOnTheGroupsFirstStart(t *testing.T) {
	t.Parallel()
	first := groupstart.Start{Group: "g", Topic: "t", ConsumeFrom: "last", Queues: []string{"broker-a/0", "broker-a/1"}, Process: "p1"}
	for _, c := range []struct {
		name           string
		start          groupstart.Start
		process, queue string
		want           bool
	}{
		{"the first start's queue, in its process", first, "p1", "broker-a/1", true},
		{"a queue added since", first, "p1", "broker-a/2", false},
		{"a later start, or another replica", first, "p2", "broker-a/0", false},
		{"a first start with CONSUME_FROM=first", groupstart.Start{Group: "g", Topic: "t", ConsumeFrom: "first", Queues: first.Queues, Process: "p1"}, "p1", "broker-a/0", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, c.want, c.start.AtEnd(c.process, c.queue))
		})
	}
}

// Replicas of a new group starting at once each ask where their first queue starts: exactly
// one takes the group's first start, and only its queues start at their end; each replica
// keeps the answer it read. A later start of the group, with CONSUME_FROM=last too, starts
// every queue without an offset at its first message; another group is a first start of its
// own.
func TestOneOfTheReplicasStartingAtOnceTakesTheGroupsFirstStart(t *testing.T) {
	t.Parallel()
	pool, _ := testdb.New(t)
	store := groupstart.NewStore(pool)
	queues := []string{"broker-a/0", "broker-a/1", "broker-b/0"}
	const replicas = 8
	plans := make([]*groupstart.Plan, replicas)
	ends := make([]bool, replicas)
	errs := make([]error, replicas)
	var wg sync.WaitGroup
	for i := range plans {
		plans[i] = groupstart.NewPlan(store, "notifier", "events", "last", "", nil)
		wg.Go(func() { ends[i], errs[i] = plans[i].AtEnd("broker-a/1", queues) })
	}
	wg.Wait()
	winners := 0
	for i := range plans {
		require.NoError(t, errs[i])
		if ends[i] {
			winners++
			again, err := plans[i].AtEnd("broker-b/0", nil)
			require.NoError(t, err)
			require.True(t, again, "the winner starts every queue of its start at its end")
			added, err := plans[i].AtEnd("broker-b/1", nil)
			require.NoError(t, err)
			require.False(t, added, "but not a queue added since")
		}
	}
	require.Equal(t, 1, winners)
	var rows int
	require.NoError(t, pool.QueryRow(context.Background(), `SELECT count(*) FROM notify.group_start`).Scan(&rows))
	require.Equal(t, 1, rows)

	later := groupstart.NewPlan(store, "notifier", "events", "last", "", nil)
	for _, q := range queues {
		end, err := later.AtEnd(q, queues)
		require.NoError(t, err)
		require.False(t, end, "a later start: %s starts at its first message", q)
	}
	other, err := groupstart.NewPlan(store, "another-notifier", "events", "last", "", nil).AtEnd("broker-a/0", queues)
	require.NoError(t, err)
	require.True(t, other, "another group's first start")
}
