package ordering_test

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestAHungQueueHoldsOnlyItsKeys: one queue's sends hang; the other queues' records are
// published and marked meanwhile, that queue's are not skipped, and once the queue answers
// again everything is published in order.
func TestAHungQueueHoldsOnlyItsKeys(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(4)
	hung := ordering.Queue{Broker: "broker-a", ID: 2}
	release := make(chan struct{})
	s.setHook(func(ctx context.Context, q ordering.Queue, _ []ordering.Message) error {
		if q == hung {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	var keys []string
	for q := range 4 {
		keys = append(keys, keysOn(q, 4, 3)...)
	}
	for range 5 {
		o.add(keys...)
	}
	r := startRelay(t, o, s, ordering.RelayConfig{Batch: 4, MaxPerSend: 2, StuckAfter: 100 * time.Millisecond})
	wait.On(t, 10*time.Second, "the other queues' 45 records marked", o.changed.Next, func() bool { return o.unpublished() == 15 })
	wait.Until(t, 10*time.Second, "the hung queue reported stuck", func() bool {
		for _, q := range r.Stats().Queues {
			if q.Queue == hung {
				return q.State == ordering.QueueStuck && q.Lag > 0
			}
		}
		return false
	})
	for _, q := range r.Stats().Queues {
		if q.Queue != hung {
			require.Equal(t, ordering.QueueIdle, q.State, "queue %s", q.Queue)
			require.Zero(t, q.Lag)
		}
	}
	for _, k := range keysOn(2, 4, 3) {
		require.Empty(t, s.storedOf(k), "nothing of the hung queue's keys is stored")
	}
	close(release)
	wait.On(t, 10*time.Second, "everything marked", o.changed.Next, func() bool { return o.unpublished() == 0 })
	requireInOrder(t, o, s)
}

// TestRecordsThatCommitLateArePublished: a transaction takes an id, then commits after later
// ids were published (the pump's cursor passed it): its record is still published.
func TestRecordsThatCommitLateArePublished(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(1)
	slow := o.begin()
	slow.insert("late")
	o.add("a", "b")
	r := startRelay(t, o, s, ordering.RelayConfig{})
	wait.On(t, 10*time.Second, "a and b marked", o.changed.Next, func() bool { return o.unpublished() == 1 })
	slice := ordering.Slice{Hash: ordering.HashJava, Count: 1}
	reads := o.readsOf(slice)
	wait.On(t, 10*time.Second, "the pump to read again past b", o.changed.Next, func() bool { return o.readsOf(slice) > reads+2 })
	slow.commit()
	o.add("c")
	r.WakeKey("c")
	wait.On(t, 10*time.Second, "the late record marked", o.changed.Next, func() bool { return o.unpublished() == 0 })
	require.Equal(t, []int64{1}, s.storedOf("late"))
	requireInOrder(t, o, s)
}

// TestAFailedSendDiscardsTheBatchReadAhead: a pump reads its next batch while one is in
// flight; when the flight fails, the batch read ahead (which holds the successors of what
// failed) is never sent ahead of it.
func TestAFailedSendDiscardsTheBatchReadAhead(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(1)
	for range 8 {
		o.add("k")
	}
	slice := ordering.Slice{Hash: ordering.HashJava, Count: 1}
	var once sync.Once
	s.setHook(func(context.Context, ordering.Queue, []ordering.Message) error {
		failed := false
		once.Do(func() {
			// Fail the first batch once the next one was read ahead.
			deadline := time.Now().Add(5 * time.Second)
			for o.readsOf(slice) < 2 && time.Now().Before(deadline) {
				time.Sleep(time.Millisecond)
			}
			failed = true
		})
		if failed {
			return errors.New("broker said no")
		}
		return nil
	})
	r := startRelay(t, o, s, ordering.RelayConfig{Batch: 2, MaxPerSend: 2})
	wait.On(t, 10*time.Second, "everything marked", o.changed.Next, func() bool { return o.unpublished() == 0 })
	require.GreaterOrEqual(t, o.readsOf(slice), 2, "the pump read ahead")
	require.EqualValues(t, 2, r.Stats().Failed, "the failed batch")
	require.Equal(t, []int64{1, 2, 3, 4, 5, 6, 7, 8}, s.storedOf("k"), "never a successor first, nothing twice")
}

// TestKeysThatMoveToAnotherQueueKeepTheirOrder: the topic grows from 2 to 3 queues while a
// key's first record hangs in flight on its old queue; the key's records now belong to
// another pump, which must not send the second before the first is stored.
func TestKeysThatMoveToAnotherQueueKeepTheirOrder(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	// A key that moves: queue 0 of 2, queue 2 of 3.
	var key string
	for i := 1; key == ""; i++ {
		if k := strconv.Itoa(i); ordering.HashJava.Slot(k, 2) == 0 && ordering.HashJava.Slot(k, 3) == 2 {
			key = k
		}
	}
	old := ordering.Queue{Broker: "broker-a", ID: 0}
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	s.setHook(func(ctx context.Context, q ordering.Queue, _ []ordering.Message) error {
		if q == old {
			once.Do(func() { close(entered) })
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	o.add(key)
	startRelay(t, o, s, ordering.RelayConfig{})
	wait.For(t, 10*time.Second, "key:1 sent on its old queue", entered) // where it hangs
	o.add(key, key)
	s.setQueues(3)
	wait.On(t, 10*time.Second, "the moved key's records stored by its new pump", s.stores.Next, func() bool { return len(s.storedOf(key)) == 3 })
	wait.On(t, 10*time.Second, "everything marked", o.changed.Next, func() bool { return o.unpublished() == 0 })
	require.Equal(t, []int64{1, 2, 3}, s.storedOf(key), "the new pump sends the predecessor itself, first")
	close(release) // the old pump's send lands late: a copy, after its successors
	wait.On(t, 10*time.Second, "the late copy", s.stores.Next, func() bool { return len(s.storedOf(key)) == 4 })
	requireInOrder(t, o, s)
}

// TestOnlyOneRelayIsActive: two relays on one outbox; one publishes, the other stands by,
// and takes over when the first stops.
func TestOnlyOneRelayIsActive(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	cfg := ordering.RelayConfig{Topic: "t", Poll: 20 * time.Millisecond, RoutePoll: 20 * time.Millisecond}
	r1, err := ordering.NewRelay(o, s, cfg)
	require.NoError(t, err)
	r2, err := ordering.NewRelay(o, s, cfg)
	require.NoError(t, err)
	require.NoError(t, r1.Start(t.Context()))
	wait.For(t, 10*time.Second, "r1 to lead", o.granted)
	require.NoError(t, r2.Start(t.Context()))
	o.add("k")
	wait.On(t, 10*time.Second, "k:1 published", o.changed.Next, func() bool { return o.unpublished() == 0 })
	require.False(t, r2.Stats().Active, "the second relay stands by")
	require.Empty(t, r2.Stats().Queues)
	require.EqualValues(t, 0, r2.Stats().Published)
	require.NoError(t, r1.Stop(t.Context()))
	require.Empty(t, r1.Stats().Queues, "a relay that stopped has no pumps")
	require.False(t, r1.Stats().Active, "a relay that stopped does not lead")
	wait.For(t, 10*time.Second, "r2 to take over", o.granted)
	o.add("k")
	wait.On(t, 10*time.Second, "k:2 published", o.changed.Next, func() bool { return o.unpublished() == 0 })
	require.EqualValues(t, 1, r2.Stats().Published)
	require.NoError(t, r2.Stop(t.Context()))
	requireInOrder(t, o, s)
}

func TestRelayNeedsATopic(t *testing.T) {
	t.Parallel()
	_, err := ordering.NewRelay(newMemOutbox(), newMemSender(1), ordering.RelayConfig{})
	require.ErrorContains(t, err, "topic")
	require.True(t, strings.Contains(fmt.Sprint(ordering.QueueStates), "stuck"))
}
