package ordering_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// addOne writes and commits key's next event and returns it as a committing process
// hands it over: Pred is its unpublished predecessor, 0 when that one is published.
func (o *memOutbox) addOne(key string) ordering.OutboxRecord {
	o.add(key)
	o.mu.Lock()
	defer o.mu.Unlock()
	rec := o.rows[len(o.rows)-1].rec
	for _, r := range o.rows {
		if r.rec.Key == key && r.rec.Seq == rec.Seq-1 && !r.published {
			rec.Pred = r.rec.ID
		}
	}
	return rec
}

// idleRelay starts a relay on 2 queues that never polls, and waits for its pumps' first
// reads.
func idleRelay(t *testing.T, o *memOutbox, s *memSender, probe time.Duration) (*ordering.Relay, []ordering.Slice) {
	t.Helper()
	r := startRelay(t, o, s, ordering.RelayConfig{Poll: probe, QueuePoll: time.Hour, RoutePoll: time.Hour})
	slices := []ordering.Slice{{Hash: ordering.HashJava, Count: 2, Index: 0}, {Hash: ordering.HashJava, Count: 2, Index: 1}}
	wait.On(t, 10*time.Second, "both pumps' first read", o.changed.Next, func() bool { return o.readsOf(slices[0]) > 0 && o.readsOf(slices[1]) > 0 })
	return r, slices
}

// TestOfferedRecordsGoWithoutARead: a record handed over whose predecessor is published, or
// held by the pump, is sent without reading the outbox; one whose predecessor the pump does
// not hold makes it read, and the two go in order.
func TestOfferedRecordsGoWithoutARead(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	r, slices := idleRelay(t, o, s, time.Hour)
	k := keysOn(0, 2, 1)[0]
	reads := o.readsOf(slices[0])

	r.Offer(o.addOne(k))
	wait.On(t, 10*time.Second, "k:1 published", o.changed.Next, func() bool { return o.unpublished() == 0 })
	r.Offer(o.addOne(k))
	wait.On(t, 10*time.Second, "k:2 published", o.changed.Next, func() bool { return o.unpublished() == 0 })
	require.Equal(t, reads, o.readsOf(slices[0]), "no read for records handed over")

	o.add(k) // k:3, committed elsewhere: not handed over
	r.Offer(o.addOne(k))
	wait.On(t, 10*time.Second, "k:3 and k:4 published", o.changed.Next, func() bool { return o.unpublished() == 0 })
	require.Equal(t, reads+1, o.readsOf(slices[0]), "k:4's predecessor is not the pump's: one read")
	require.Equal(t, []int64{1, 2, 3, 4}, s.storedOf(k))
	require.Equal(t, 0, o.readsOf(slices[1])-1, "the other queue never read again")
}

// TestALateOfferIsNotSentAgain: a record read, sent and marked before it is handed over is
// not sent a second time.
func TestALateOfferIsNotSentAgain(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	r, _ := idleRelay(t, o, s, time.Hour)
	rec := o.addOne("k")
	r.WakeKey("k")
	wait.On(t, 10*time.Second, "k:1 published", o.changed.Next, func() bool { return o.unpublished() == 0 })
	r.Offer(rec)
	r.Offer(o.addOne("k"))
	wait.On(t, 10*time.Second, "k:2 published", o.changed.Next, func() bool { return o.unpublished() == 0 })
	require.Equal(t, []int64{1, 2}, s.storedOf("k"))
}

// TestTheProbeFindsWhatWasNotHanded: a record written by another process is found by the
// relay's probe, and only its queue's pump reads.
func TestTheProbeFindsWhatWasNotHanded(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	_, slices := idleRelay(t, o, s, 20*time.Millisecond)
	k := keysOn(1, 2, 1)[0]
	o.add(k)
	wait.On(t, 10*time.Second, "k:1 published", o.changed.Next, func() bool { return o.unpublished() == 0 })
	require.Equal(t, 1, o.readsOf(slices[0]), "the other queue's pump did not read")
	o.mu.Lock()
	probes := o.probes
	o.mu.Unlock()
	require.Positive(t, probes)
}
