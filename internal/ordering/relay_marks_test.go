package ordering_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/walletsaga/walletsaga/internal/groupcommit"
	"github.com/walletsaga/walletsaga/internal/ordering"
	"github.com/walletsaga/walletsaga/internal/testutil/wait"
)

// TestConfirmationsOfManyQueuesAreMarkedInOneStatement: eight pumps' confirmations that
// arrive within the linger become one MarkPublished statement, and a pump does not wait for
// its mark before its next send; MarkMaxRows bounds a statement.
func TestConfirmationsOfManyQueuesAreMarkedInOneStatement(t *testing.T) {
	t.Parallel()
	const queues = 8
	for _, tc := range []struct {
		maxRows, wantStatements int
	}{{1024, 1}, {5, 4}} {
		o, s := newMemOutbox(), newMemSender(queues)
		var (
			mu      sync.Mutex
			waiting int
			all     = make(chan struct{})
		)
		// Every queue's first send waits until all eight are in flight, so their
		// confirmations arrive together.
		s.setHook(func(_ context.Context, _ ordering.Queue, msgs []ordering.Message) error {
			if _, seq := parseBody(msgs[0].Body); seq != 1 {
				return nil
			}
			mu.Lock()
			waiting++
			if waiting == queues {
				close(all)
			}
			mu.Unlock()
			<-all
			return nil
		})
		for q := range queues {
			k := keysOn(q, queues, 1)[0]
			o.add(k, k) // two batches of one per queue (Batch 1): the second follows the first's confirmation
		}
		r := startRelay(t, o, s, ordering.RelayConfig{Batch: 1, MarkLinger: time.Second, MarkMaxRows: tc.maxRows})
		wait.On(t, 10*time.Second, "everything marked", o.changed.Next, func() bool { return o.unpublished() == 0 })
		stmts := o.statements()
		rows := 0
		for _, st := range stmts {
			require.LessOrEqual(t, len(st), tc.maxRows)
			rows += len(st)
		}
		require.Equal(t, 2*queues, rows)
		require.Len(t, stmts, tc.wantStatements, "statements %v", stmts)
		// What /metrics shows of the committer: a group per statement, a request per
		// confirmed batch (of one record each here).
		require.Equal(t, groupcommit.Stats{Groups: int64(len(stmts)), Requests: 2 * queues, Rows: 2 * queues}, r.Stats().Marks)
		requireInOrder(t, o, s)
	}
}

// TestFailedMarksAreRetriedWithoutSendingAgain: while the database refuses marks, the
// committer retries them, and the pumps go on without sending what the broker stored again.
func TestFailedMarksAreRetriedWithoutSendingAgain(t *testing.T) {
	t.Parallel()
	o, s := newMemOutbox(), newMemSender(2)
	o.mu.Lock()
	o.failMark = 3
	o.mu.Unlock()
	keys := append(keysOn(0, 2, 2), keysOn(1, 2, 2)...)
	for range 3 {
		o.add(keys...)
	}
	startRelay(t, o, s, ordering.RelayConfig{Batch: 1})
	wait.On(t, 10*time.Second, "everything marked", o.changed.Next, func() bool { return o.unpublished() == 0 })
	for _, k := range keys {
		require.Equal(t, []int64{1, 2, 3}, s.storedOf(k), "sent once each, in order")
	}
}
